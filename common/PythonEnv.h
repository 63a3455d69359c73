#pragma once
/// \file
/// The Python environment with the pinned PyTorch (scripts/install-deps.sh): the interpreter the
/// benchmarks' Python peers run on and the launcher (torchrun) that starts a data-parallel peer
/// on it. Defaults are the environment this binary was built against; ENGRAM_PYTHON and
/// ENGRAM_TORCHRUN in the environment override them, and each command's --python / --torchrun
/// overrides both.
///
/// \code
///   std::vector<std::string> argv = engram::torchrun_command("", "/usr/bin/python3");
///   // {"/usr/bin/python3", "-m", "torch.distributed.run"}: no torchrun beside that python
///   argv.insert(argv.end(), {"--nproc_per_node", "2", "peer.py"});
/// \endcode

#include <string>
#include <vector>

namespace engram {

/// $ENGRAM_PYTHON, else the build's environment's python (its bin/python).
std::string torch_python();

/// $ENGRAM_TORCHRUN, else "" (torchrun_command() then finds the launcher of the python).
std::string named_torchrun();

/// The command that launches a torchrun job on `python`'s torch, to which torchrun's arguments
/// are appended: {torchrun} where one is named, else the torchrun beside `python` (a virtual
/// environment's bin/), else {python, "-m", "torch.distributed.run"}, the same launcher run by
/// that python itself, where a torchrun found on PATH could belong to another Python and start
/// the job's processes on another torch.
std::vector<std::string> torchrun_command(const std::string& torchrun, const std::string& python);

}  // namespace engram
