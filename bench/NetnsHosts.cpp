#include "bench/NetnsHosts.h"

#include "common/Subprocess.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace engram::bench {
namespace {

/// Every host's interface has this name in its own namespace; the switch's ports are p0, p1...
constexpr const char* kHostInterface = "eth0";
constexpr const char* kBridge = "br0";

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

/// Runs `argv` to its end; its stdout, or std::runtime_error "COMMAND failed: LAST STDERR LINE"
/// unless `may_fail`.
std::string run_command(const std::vector<std::string>& argv, bool may_fail = false) {
  ScratchDir dir("netns");
  ProcessOptions io;
  io.stdout_path = dir.file("out");
  io.stderr_path = dir.file("err");
  ChildProcess child(argv, io);
  if (!child.wait(60)) child.kill();
  if (!child.succeeded() && !may_fail) {
    const std::string said = last_line(read_file(io.stderr_path));
    throw std::runtime_error("'" + joined(argv) + "' " + child.outcome() +
                             (said.empty() ? "" : ": " + said));
  }
  return read_file(io.stdout_path);
}

bool in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

/// Whether this process holds capability `bit` (linux/capability.h's numbering) in its
/// effective set, from /proc/self/status.
bool has_capability(int bit) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    return ((mask >> bit) & 1ULL) != 0;
  }
  return false;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

/// The keeper: waits for EOF on its stdin (the owner closed the pipe, or died), then kills
/// what runs in the namespaces named by its arguments and deletes them. It ignores the signals
/// a terminal or a time limit sends a process group, so that it outlives the owner.
constexpr const char* kKeeperScript =
    "trap '' INT TERM HUP QUIT\n"
    "while read -r _; do :; done\n"
    "for ns in \"$@\"; do ip netns pids \"$ns\" 2>/dev/null | xargs -r kill -9 2>/dev/null; done\n"
    "for ns in \"$@\"; do ip netns del \"$ns\" 2>/dev/null; done\n"
    "exit 0\n";

/// Removes the namespaces `names` at once: the keeper's script, its stdin already at its end.
void remove_now(const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::vector<std::string> argv{"/bin/sh", "-c", kKeeperScript, "engram-netns-keeper"};
  argv.insert(argv.end(), names.begin(), names.end());
  run_command(argv, /*may_fail=*/true);
}

}  // namespace

std::vector<std::vector<std::string>> shaper_commands(const std::string& device,
                                                      const LinkShape& shape) {
  if (!(shape.bandwidth >= 0) || !std::isfinite(shape.bandwidth))
    throw std::invalid_argument("a link's bandwidth must be bytes per second, 0 or more");
  if (!(shape.delay >= 0) || !std::isfinite(shape.delay))
    throw std::invalid_argument("a link's delay must be seconds, 0 or more");
  std::vector<std::vector<std::string>> commands;
  std::string parent = "root";
  if (shape.delay > 0) {
    const auto micros = static_cast<long long>(std::llround(shape.delay * 1e6));
    commands.push_back({"qdisc", "add", "dev", device, "root", "handle", "1:", "netem", "delay",
                        std::to_string(std::max(1LL, micros)) + "us"});
    parent = "parent";
  }
  if (shape.bandwidth > 0) {
    const auto bits = static_cast<long long>(std::llround(shape.bandwidth * 8));
    const auto burst = static_cast<long long>(std::max(131072.0, shape.bandwidth * 0.001));
    std::vector<std::string> tbf{"qdisc", "add", "dev", device};
    if (parent == "parent") {
      tbf.insert(tbf.end(), {"parent", "1:1", "handle", "10:"});
    } else {
      tbf.push_back("root");
    }
    tbf.insert(tbf.end(), {"tbf", "rate", std::to_string(std::max(8LL, bits)) + "bit", "burst",
                           std::to_string(burst), "latency", "100ms"});
    commands.push_back(tbf);
  }
  return commands;
}

std::vector<std::string> stale_namespaces(const std::string& ip_netns_list, bool (*alive)(pid_t)) {
  static const std::regex owned(R"(^egdp([0-9]+)-[0-9]+-(h[0-9]+|sw)$)");
  std::vector<std::string> stale;
  std::stringstream lines(ip_netns_list);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    std::smatch m;
    if (!std::regex_match(name, m, owned)) continue;
    const long pid = std::strtol(m[1].str().c_str(), nullptr, 10);
    if (pid > 0 && !alive(static_cast<pid_t>(pid))) stale.push_back(name);
  }
  return stale;
}

void NetnsHosts::check_available() {
  constexpr int kNetAdmin = 12, kSysAdmin = 21;  // CAP_NET_ADMIN, CAP_SYS_ADMIN
  if (::geteuid() != 0 || !has_capability(kSysAdmin) || !has_capability(kNetAdmin))
    throw std::runtime_error(
        "--hosts netns needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN (it makes network "
        "namespaces and shapes their links)");
  for (const char* program : {"ip", "tc"})
    if (!in_path(program))
      throw std::runtime_error(std::string("--hosts netns needs iproute2's '") + program +
                               "' command, and it is not in PATH");
}

NetnsHosts::NetnsHosts(int count) : count_(count) {
  if (count < 1 || count > 200) throw std::invalid_argument("NetnsHosts: 1 to 200 hosts");
  check_available();
  const std::vector<std::string> stale =
      stale_namespaces(run_command({"ip", "netns", "list"}), &process_alive);
  remove_now(stale);
  static std::atomic<int> sets{0};
  tag_ = "egdp" + std::to_string(::getpid()) + "-" + std::to_string(sets++);
  for (int h = 0; h < count; ++h) namespaces_.push_back(tag_ + "-h" + std::to_string(h));
  namespaces_.push_back(tag_ + "-sw");
  start_keeper();
  try {
    for (const auto& ns : namespaces_) run_command({"ip", "netns", "add", ns});
    const std::string& sw = namespaces_.back();
    run_command({"ip", "-n", sw, "link", "add", kBridge, "type", "bridge"});
    run_command({"ip", "-n", sw, "link", "set", kBridge, "up"});
    for (int h = 0; h < count; ++h) {
      const std::string port = "p" + std::to_string(h);
      // Made inside the two namespaces at once: the names never meet another run's.
      run_command({"ip", "link", "add", "name", kHostInterface, "netns", namespace_of(h), "type",
                   "veth", "peer", "name", port, "netns", sw});
      run_command({"ip", "-n", sw, "link", "set", port, "master", kBridge});
      run_command({"ip", "-n", sw, "link", "set", port, "up"});
      run_command({"ip", "-n", namespace_of(h), "addr", "add", address_of(h) + "/24", "dev",
                   kHostInterface});
      run_command({"ip", "-n", namespace_of(h), "link", "set", "lo", "up"});
      run_command({"ip", "-n", namespace_of(h), "link", "set", kHostInterface, "up"});
    }
  } catch (...) {
    release();
    throw;
  }
}

void NetnsHosts::start_keeper() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("NetnsHosts: cannot make a pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A group of its own: a terminal's Ctrl-C or a group kill aimed at the owner misses it.
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<std::string> args{"/bin/sh", "-c", kKeeperScript, "engram-netns-keeper"};
  args.insert(args.end(), namespaces_.begin(), namespaces_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int failed =
      ::posix_spawn(&keeper_, "/bin/sh", &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(fds[0]);
  if (failed != 0) {
    ::close(fds[1]);
    throw std::runtime_error("NetnsHosts: cannot start /bin/sh for the clean-up");
  }
  keeper_pipe_ = fds[1];
}

NetnsHosts::~NetnsHosts() { release(); }

void NetnsHosts::release() {
  ::close(keeper_pipe_);
  // The keeper removes them; waiting for it means none is left when this returns.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(keeper_, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::string NetnsHosts::namespace_of(int host) const { return namespaces_.at(host); }

std::string NetnsHosts::address_of(int host) const {
  if (host < 0 || host >= count_) throw std::out_of_range("NetnsHosts: no such host");
  return "10.79.0." + std::to_string(host + 1);
}

std::string NetnsHosts::interface_of(int host) const {
  if (host < 0 || host >= count_) throw std::out_of_range("NetnsHosts: no such host");
  return kHostInterface;
}

std::vector<std::string> NetnsHosts::command_on(int host,
                                                const std::vector<std::string>& argv) const {
  std::vector<std::string> full{"ip", "netns", "exec", namespace_of(host)};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

void NetnsHosts::shape(const LinkShape& shape) {
  const auto commands = shaper_commands(kHostInterface, shape);
  for (int h = 0; h < count_; ++h) {
    // What an earlier shape put there (an unshaped veth has no root qdisc to delete).
    run_command({"tc", "-n", namespace_of(h), "qdisc", "del", "dev", kHostInterface, "root"},
                /*may_fail=*/true);
    for (const auto& c : commands) {
      std::vector<std::string> argv{"tc", "-n", namespace_of(h)};
      argv.insert(argv.end(), c.begin(), c.end());
      try {
        run_command(argv);
      } catch (const std::runtime_error& e) {
        const std::string said = e.what();
        if (shape.delay > 0 && said.find("unknown") != std::string::npos)
          throw std::runtime_error(
              "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so a link delay cannot be "
              "shaped: " +
              said);
        throw;
      }
    }
  }
}

std::uint64_t NetnsHosts::sent_bytes(int host) const {
  const std::string text = run_command(
      {"ip", "-n", namespace_of(host), "-s", "-j", "link", "show", "dev", kHostInterface});
  const auto j = nlohmann::json::parse(text);
  return j.at(0).at("stats64").at("tx").at("bytes").get<std::uint64_t>();
}

}  // namespace engram::bench
