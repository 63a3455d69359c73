#include "bench/BenchSupport.h"

#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

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

/// The last non-empty line of `text`.
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

/// `text` cut to its last 300 characters, for one-line error messages.
std::string tail(const std::string& text) {
  return text.size() > 300 ? "..." + text.substr(text.size() - 297) : text;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

ScratchDir::ScratchDir(const std::string& tag) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("engram-bench-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a temporary directory: " +
                             std::string(std::strerror(errno)));
  }
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

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

std::string run_peer(const std::vector<std::string>& argv, const ScratchDir& dir) {
  const std::string out_path = dir.file("peer.stdout"), err_path = dir.file("peer.stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_error = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    throw std::runtime_error("cannot start the Python peer with '" + argv[0] +
                             "': " + std::strerror(spawn_error) + " (see --python, --no-peer)");
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waiting for the Python peer failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status)
                                ? "exited with " + std::to_string(WEXITSTATUS(status))
                                : "was killed by signal " + std::to_string(WTERMSIG(status));
    const std::string script = argv.size() > 1 ? " " + argv[1] : "";
    throw std::runtime_error("the Python peer (" + argv[0] + script + ") " + how + ": " +
                             tail(last_line(read_all(err_path))) + " (see --python, --no-peer)");
  }
  return read_all(out_path);
}

json peer_json(const std::string& text) {
  try {
    return json::parse(last_line(text));
  } catch (const json::exception&) {
    throw std::runtime_error("the Python peer printed no JSON result: '" + tail(last_line(text)) +
                             "'");
  }
}

std::string fixed(double value, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << value;
  return s.str();
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
