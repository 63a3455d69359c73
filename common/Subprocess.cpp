#include "common/Subprocess.h"

#include "common/FileChecks.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace engram {

ScratchDir::ScratchDir(const std::string& tag) {
  std::string pattern = (temporary_folder() / ("engram-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a scratch folder: " +
                             std::string(std::strerror(errno)));
  path_ = pattern;
  interrupt_ = std::make_unique<RemoveOnInterrupt>(path_.string(), /*folder=*/true);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw std::invalid_argument("ChildProcess: no program to run");
  std::vector<std::string> env;
  const auto replaced = [&](const std::string& name) {
    if (std::find(options.unset_environment.begin(), options.unset_environment.end(), name) !=
        options.unset_environment.end())
      return true;
    return std::any_of(options.set_environment.begin(), options.set_environment.end(),
                       [&](const auto& kv) { return kv.first == name; });
  };
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    if (!replaced(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [name, value] : options.set_environment) env.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, options.stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int error = ::posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  }
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), ended_(other.ended_), status_(other.status_) {}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0 || ended_) return;
  try {
    kill();
  } catch (const std::exception&) {  // already reaped elsewhere: nothing left to end
  }
}

namespace {

/// How often a wait with a time limit, or over several children, looks again.
constexpr std::chrono::milliseconds kPollInterval{5};

}  // namespace

bool ChildProcess::poll() {
  if (pid_ <= 0 || ended_) return true;
  while (true) {
    const pid_t done = ::waitpid(pid_, &status_, WNOHANG);
    if (done == pid_) {
      ended_ = true;
      return true;
    }
    if (done == 0) return false;
    if (errno != EINTR)  // reaped elsewhere: its outcome is lost
      throw std::runtime_error("lost the child process " + std::to_string(pid_) + ": " +
                               std::strerror(errno));
  }
}

bool ChildProcess::wait(double timeout_seconds) {
  if (pid_ <= 0 || ended_) return true;
  if (timeout_seconds > 0) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    while (!poll()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(kPollInterval);
    }
    return true;
  }
  while (true) {
    if (::waitpid(pid_, &status_, 0) == pid_) {
      ended_ = true;
      return true;
    }
    if (errno != EINTR)
      throw std::runtime_error("lost the child process " + std::to_string(pid_) + ": " +
                               std::strerror(errno));
  }
}

void ChildProcess::kill(int signal) {
  if (pid_ <= 0 || ended_) return;
  ::kill(pid_, signal);
  wait();
}

bool ChildProcess::succeeded() const {
  return ended_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
}

int ChildProcess::exit_code() const {
  return ended_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

int ChildProcess::signal_number() const {
  return ended_ && WIFSIGNALED(status_) ? WTERMSIG(status_) : 0;
}

std::string ChildProcess::outcome() const {
  if (!ended_) return "is still running";
  if (WIFEXITED(status_)) return "exited with " + std::to_string(WEXITSTATUS(status_));
  return "was killed by signal " + std::to_string(WTERMSIG(status_));
}

std::optional<std::size_t> wait_all(std::vector<ChildProcess>& children) {
  std::optional<std::size_t> first_failure;
  std::vector<bool> running(children.size(), true);
  std::size_t left = children.size();
  while (left > 0) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (!running[i] || !children[i].poll()) continue;
      running[i] = false;
      --left;
      if (!children[i].succeeded() && !first_failure) {
        first_failure = i;
        for (std::size_t j = 0; j < children.size(); ++j)
          if (running[j]) children[j].kill();  // waits for it; it is counted on the next pass
      }
    }
    if (left > 0) std::this_thread::sleep_for(kPollInterval);
  }
  return first_failure;
}

}  // namespace engram
