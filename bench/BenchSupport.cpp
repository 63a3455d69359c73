#include "bench/BenchSupport.h"

#include "common/Errors.h"

#include <malloc.h>
#include <unistd.h>
#include <torch/version.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace engram::bench {
namespace {

using nlohmann::json;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown";
}

/// `text` cut to its last 300 characters, for one-line error messages.
std::string tail(const std::string& text) {
  return text.size() > 300 ? "..." + text.substr(text.size() - 297) : text;
}

}  // namespace

json machine_json() {
  return {{"cpu", cpu_model()}, {"cores", std::thread::hardware_concurrency()}};
}

json versions_json() {
#if defined(__clang__)
  const std::string compiler = "Clang " __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = "GCC " __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  return {{"libtorch", TORCH_VERSION}, {"compiler", compiler}};
}

std::string peer_script(const std::string& name) {
  const std::string path = std::string(ENGRAM_SOURCE_DIR) + "/bench/peers/" + name;
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error("the Python peer '" + path + "' is missing (see --no-peer)");
  }
  return path;
}

void check_peer_launcher(const std::string& program, const std::string& field) {
  if (program.find('/') == std::string::npos) return;
  if (::access(program.c_str(), X_OK) != 0)
    throw InvalidOption(field, "is '" + program + "', which is not an executable file");
}

std::string run_peer(const std::vector<std::string>& argv, const ScratchDir& dir) {
  ProcessOptions io;
  io.stdout_path = dir.file("peer.stdout");
  io.stderr_path = dir.file("peer.stderr");
  std::optional<ChildProcess> peer;
  try {
    peer.emplace(argv, io);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("the Python peer: " + std::string(e.what()) +
                             " (see --python, --no-peer)");
  }
  peer->wait();
  if (!peer->succeeded()) {
    const std::string script = argv.size() > 1 ? " " + argv[1] : "";
    throw std::runtime_error("the Python peer (" + argv[0] + script + ") " + peer->outcome() +
                             ": " + tail(peer_failure_line(read_file(io.stderr_path))) +
                             " (see --python, --no-peer)");
  }
  return read_file(io.stdout_path);
}

std::string peer_failure_line(const std::string& stderr_text) {
  // "Name: message", Name a (dotted) Python identifier ending in Error or Exception.
  static const std::regex exception(
      R"(^\s*(\[rank\d+\]:\s*)?[A-Za-z_][\w.]*(Error|Exception):\s*\S)");
  static const std::regex rule(R"(^[\s=\-*]*$)");
  std::string rank_exception, any_exception, last;
  std::istringstream lines(stderr_text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, exception)) {
      (m[1].matched ? rank_exception : any_exception) = line;
    }
    if (!std::regex_match(line, rule)) last = line;
  }
  const std::string& said =
      !rank_exception.empty() ? rank_exception : !any_exception.empty() ? any_exception : last;
  const auto start = said.find_first_not_of(" \t");
  return start == std::string::npos ? "" : said.substr(start);
}

json peer_json(const std::string& text) {
  try {
    return json::parse(last_line(text));
  } catch (const json::exception&) {
    throw std::runtime_error("the Python peer printed no JSON result: '" + tail(last_line(text)) +
                             "'");
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fixed(double value, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << value;
  return s.str();
}

std::string exact(double value) {
  char text[32];
  const auto [end, error] =
      std::to_chars(std::begin(text), std::end(text), value, std::chars_format::general);
  if (error != std::errc())
    throw std::logic_error("a double that does not fit 32 characters: " + fixed(value, 17));
  return std::string(text, end);
}

bool reset_peak_rss() {
  ::malloc_trim(0);  // what earlier work freed goes back to the kernel, not into this peak
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

namespace {
/// A "Vm...:" line of /proc/self/status in bytes, -1 when absent.
std::int64_t status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0) {
      std::istringstream fields(line.substr(key.size()));
      std::int64_t kib = -1;
      fields >> kib;
      return kib >= 0 ? kib * 1024 : -1;
    }
  }
  return -1;
}
}  // namespace

std::int64_t peak_rss_bytes() { return status_bytes("VmHWM:"); }

std::int64_t rss_bytes() { return status_bytes("VmRSS:"); }

}  // namespace engram::bench
