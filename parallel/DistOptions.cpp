#include "parallel/DistOptions.h"

#include "common/Errors.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace engram::parallel {
namespace {

/// The whole of `text` as an integer in [low, high], or InvalidOption naming `variable`.
int parse_int(const char* variable, const std::string& text, long low, long high) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || value < low ||
      value > high) {
    throw InvalidOption(variable, "is '" + text + "', expected an integer in " +
                                      std::to_string(low) + ".." + std::to_string(high));
  }
  return static_cast<int>(value);
}

}  // namespace

DistEnv env_from(const std::function<const char*(const char*)>& lookup) {
  DistEnv env;
  const auto get = [&](const char* name) -> const char* { return lookup(name); };
  if (const char* v = get("WORLD_SIZE")) env.world_size = parse_int("WORLD_SIZE", v, 1, 1 << 20);
  if (const char* v = get("RANK")) {
    env.rank = parse_int("RANK", v, 0, env.world_size - 1);
    env.launched = true;
  }
  if (const char* v = get("LOCAL_WORLD_SIZE"))
    env.local_world_size = parse_int("LOCAL_WORLD_SIZE", v, 1, env.world_size);
  if (const char* v = get("LOCAL_RANK")) {
    env.local_rank = parse_int("LOCAL_RANK", v, 0, env.ranks_on_this_host() - 1);
    env.local_rank_given = true;
  } else if (env.local_world_size > 0 && env.distributed()) {
    throw InvalidOption("LOCAL_RANK",
                        "is not set, and LOCAL_WORLD_SIZE is: a rank's place among the ranks on "
                        "its host, which picks its GPU, needs both (torchrun sets both)");
  } else {
    env.local_rank = env.rank;  // every rank counts as on this host: the ranks on it are all
  }
  if (const char* v = get("MASTER_ADDR")) {
    if (*v == '\0') throw InvalidOption("MASTER_ADDR", "is empty");
    env.master_addr = v;
  }
  if (const char* v = get("MASTER_PORT")) env.master_port = parse_int("MASTER_PORT", v, 1, 65535);
  if (const char* v = get("TORCHELASTIC_USE_AGENT_STORE"))
    env.agent_store = std::string(v) == "True";
  if (const char* v = get("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", v, 0, 1 << 20);
  if (const char* v = get("GLOO_SOCKET_IFNAME")) env.gloo_interface = v;
  return env;
}

const std::vector<std::string>& grad_sync_names() {
  static const std::vector<std::string> names{"none", "after", "overlap", "ooo", "host"};
  return names;
}

const char* grad_sync_name(GradSync sync) {
  return grad_sync_names().at(static_cast<std::size_t>(sync)).c_str();
}

GradSync grad_sync_from_name(const std::string& name) {
  const auto& names = grad_sync_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<GradSync>(i);
  throw InvalidOption("dist.grad_sync",
                      "'" + name + "' is not one of none, after, overlap, ooo, host");
}

void validate(const DistOptions& o) {
  if (o.backend != "auto" && o.backend != "gloo" && o.backend != "nccl")
    throw InvalidOption("dist.backend", "'" + o.backend + "' is not one of auto, gloo, nccl");
  if (!std::isfinite(o.timeout_seconds) || o.timeout_seconds <= 0)
    throw InvalidOption("dist.timeout_seconds", "must be a positive number of seconds");
  if (o.bucket_bytes == 0) throw InvalidOption("dist.bucket_bytes", "must be at least 1 byte");
  if (o.first_bucket_bytes == 0)
    throw InvalidOption("dist.first_bucket_bytes", "must be at least 1 byte");
  if (!std::isfinite(o.link_bandwidth) || o.link_bandwidth < 0)
    throw InvalidOption("dist.link_bandwidth", "must be 0 (not emulated) or bytes per second");
  if (!std::isfinite(o.link_latency) || o.link_latency < 0)
    throw InvalidOption("dist.link_latency", "must be a non-negative number of seconds");
  if (o.check_every < 1) throw InvalidOption("dist.check_every", "must be at least 1");
  if (o.chunk_layers < -1 || o.chunk_layers == 0)
    throw InvalidOption("dist.chunk_layers", "must be a number of layers (1 or more), or auto");
  if (o.ooo_k < -1)
    throw InvalidOption("dist.ooo_k", "must be a number of layers (0 or more), or auto");
}

std::string resolved_backend(const std::string& backend, RankDevices devices,
                             const std::string& shared) {
  if (backend == "auto") return devices == RankDevices::gpu_each ? "nccl" : "gloo";
  if (backend != "nccl") return backend;
  if (devices == RankDevices::cpu)
    throw InvalidOption("dist.backend",
                        "is nccl, which sums CUDA tensors only, and the model is on the CPU: "
                        "train on a GPU (--device cuda) or use gloo");
  if (devices == RankDevices::gpu_shared)
    throw InvalidOption("dist.backend",
                        "is nccl, which needs a GPU per rank, and the ranks share one (" +
                            shared + "): use gloo there" +
                            (shared.rfind("cuda:", 0) == 0
                                 ? ", or --device cuda (each rank its LOCAL_RANK's GPU)"
                                 : ""));
  return backend;
}

std::size_t bytes_of_mib(double mib) {
  return static_cast<std::size_t>(std::max(1.0, mib * (1 << 20)));
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot find a free loopback port");
  return ntohs(addr.sin_port);
}

}  // namespace engram::parallel
