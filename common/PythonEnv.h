#pragma once
/// \file
/// The Python environment with the pinned PyTorch (scripts/install-deps.sh): the interpreter the
/// benchmarks' Python peers run on and its torchrun. Defaults are the environment this binary was
/// built against; ENGRAM_PYTHON and ENGRAM_TORCHRUN in the environment override them, and each
/// command's --python / --torchrun overrides both.

#include <string>

namespace engram {

/// $ENGRAM_PYTHON, else the build's environment's python (its bin/python).
std::string torch_python();

/// $ENGRAM_TORCHRUN, else the torchrun beside torch_python(), else (none there) "torchrun", which
/// a child process finds on PATH.
std::string torchrun_program();

}  // namespace engram
