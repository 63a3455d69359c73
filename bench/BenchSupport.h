#pragma once
/// \file
/// What every benchmark driver of bench/ does the same way: describe the machine and the
/// libraries it measured with, run its Python peer (bench/peers/) as a subprocess and read the
/// JSON result the peer prints.
///
/// \code
///   engram::ScratchDir dir("bench-memory");                         // removed on destruction
///   const nlohmann::json peer = engram::bench::peer_json(engram::bench::run_peer(
///       {"/usr/bin/python3", engram::bench::peer_script("resnet_memory_peer.py"), "--batch",
///       "32"}, dir));
///   report["machine"] = engram::bench::machine_json();
///   report["versions"] = engram::bench::versions_json();            // libtorch, compiler
/// \endcode

#include "common/Subprocess.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace engram::bench {

/// {"cpu": model name from /proc/cpuinfo, "cores": hardware threads}.
nlohmann::json machine_json();
/// {"libtorch": TORCH_VERSION, "compiler": e.g. "GCC 12.2.0"}.
nlohmann::json versions_json();

/// The path of a peer script in the source tree's bench/peers/; throws std::runtime_error
/// (pointing at --no-peer) when it is missing.
std::string peer_script(const std::string& name);

/// Checked before a benchmark's measurements, so that a peer's interpreter or launcher that is not
/// there fails at once, not after minutes of Engram's rows: throws InvalidOption(field, ...) when
/// `program` is a path (it has a '/') to no executable file. A bare name is left to the PATH.
void check_peer_launcher(const std::string& program, const std::string& field);

/// Runs `argv` (argv[0] looked up in PATH) with stdout and stderr going to files in `dir` and
/// returns its stdout; throws std::runtime_error with stderr's last line if it cannot start or
/// does not exit with 0.
std::string run_peer(const std::vector<std::string>& argv, const ScratchDir& dir);

/// The line of a failed peer's stderr that says why: the last exception of a rank (torchrun's
/// "[rank0]: AssertionError: ..."), else the last exception line with a message ("ValueError:
/// ..."), else the last line that is not a rule of '=' or '-' (torchrun ends with one).
std::string peer_failure_line(const std::string& stderr_text);

/// The JSON object on the last non-empty line of `text`; throws std::runtime_error otherwise.
nlohmann::json peer_json(const std::string& text);

/// The median (the mean of the two middle values for an even count); `v` must not be empty.
double median(std::vector<double> v);

/// `value` with `precision` digits after the point.
std::string fixed(double value, int precision);

/// `value` in the fewest decimal digits that read back as exactly `value` (a setting handed to
/// a peer on its command line, which must run with the same number: `fixed` would round
/// 5e-7 to nothing).
std::string exact(double value);

/// Gives freed heap memory back to the kernel (malloc_trim) and resets the process's peak
/// resident set to what is resident now (Linux: "5" into /proc/self/clear_refs); false when the
/// kernel refuses, and the peak then counts from the process's start.
bool reset_peak_rss();
/// The process's peak resident set in bytes since the start or the last reset (VmHWM), -1 when
/// /proc does not say.
std::int64_t peak_rss_bytes();
/// The process's resident set now (VmRSS), -1 when /proc does not say.
std::int64_t rss_bytes();

}  // namespace engram::bench
