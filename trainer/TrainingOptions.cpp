#include "trainer/TrainingOptions.h"

#include "trainer/Device.h"
#include "trainer/MemoryCap.h"
#include "trainer/Threads.h"

#include "common/Errors.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

namespace engram::trainer {
namespace {

/// Where the job's ranks compute: on one named GPU ("cuda:N") they share it when this host has
/// more than one of them (ranks on hosts of their own each have their own GPU N).
parallel::RankDevices rank_devices(const TrainingOptions& o) {
  if (o.device == "cpu") return parallel::RankDevices::cpu;
  return o.device.rfind("cuda:", 0) == 0 && o.job.ranks_on_this_host() > 1
             ? parallel::RankDevices::gpu_shared
             : parallel::RankDevices::gpu_each;
}

/// The GPU the ranks share, as the refusal of nccl names it: a job launched without
/// LOCAL_WORLD_SIZE counts every rank on this host, which it may say otherwise.
std::string shared_gpu(const TrainingOptions& o) {
  if (o.job.local_world_size > 0) return o.device;
  return o.device + "; without LOCAL_WORLD_SIZE, the ranks a host runs, all " +
         std::to_string(o.job.world_size) + " ranks count as on this host";
}

/// With 3 or more ranks a ring all-reduce adds each element's terms in an order set by its place
/// in its bucket (with 2, a + b either way): the sums' bits follow the buckets. ooo's k and
/// host's chunks cut the buckets, and auto chooses them from measured times, which differ from
/// run to run: --deterministic refuses auto there.
void check_repeatable_exchange(const TrainingOptions& o) {
  if (!o.deterministic || o.job.world_size < 3) return;
  const std::string why = "is auto, chosen from measured times, and with 3 or more ranks (here " +
                          std::to_string(o.job.world_size) +
                          ") the sums' rounding follows the buckets it makes: give a number to "
                          "repeat bit for bit (--deterministic)";
  if (o.dist.grad_sync == parallel::GradSync::ooo && o.dist.ooo_k < 0)
    throw InvalidOption("dist.ooo_k", why);
  if (o.dist.grad_sync == parallel::GradSync::host && o.dist.chunk_layers < 0)
    throw InvalidOption("dist.chunk_layers", why);
}

}  // namespace

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names{"adam", "sgd"};
  return names;
}

void validate(const TrainingOptions& o, long min_steps) {
  if (o.steps < min_steps) {
    throw InvalidOption("steps", min_steps == 0 ? "must not be negative"
                                                : "must be at least " + std::to_string(min_steps));
  }
  if (o.batch < 1) throw InvalidOption("batch", "must be at least 1");
  if (!(o.learning_rate > 0) || !std::isfinite(o.learning_rate))
    throw InvalidOption("learning_rate", "must be a positive number");
  const auto& names = optimizer_names();
  if (std::find(names.begin(), names.end(), o.optimizer) == names.end())
    throw InvalidOption("optimizer", "must be adam or sgd, not '" + o.optimizer + "'");
  if (!(o.momentum >= 0 && o.momentum < 1))
    throw InvalidOption("momentum", "must be at least 0 and below 1");
  // The norm is a float32: a larger bound would not convert.
  if (!(o.grad_clip >= 0 && o.grad_clip <= std::numeric_limits<float>::max()))
    throw InvalidOption("grad_clip", "must be a non-negative float32 number (0: no clipping)");
  if (o.grad_clip > 0 && o.dist.grad_sync == parallel::GradSync::ooo)
    throw InvalidOption("grad_clip",
                        "must be 0 with --grad-sync ooo: the global norm needs every gradient "
                        "before any update, and ooo updates the first layers during the next "
                        "forward");
  check_threads_option(o.threads);
  check_device_name(o.device);
  if (o.ooo_threads != 1 && o.ooo_threads != 2)
    throw InvalidOption("ooo_threads",
                        "must be 1 (plain backward) or 2 (weight gradients on a "
                        "second thread)");
  if (o.ooo_threads == 2 && o.threads != 1)
    throw InvalidOption("threads",
                        "must be 1 with --ooo-threads 2: each of the two threads "
                        "computes with one");
  if (o.ooo_streams != 1 && o.ooo_streams != 2)
    throw InvalidOption("ooo_streams",
                        "must be 1 (one CUDA stream) or 2 (weight gradients on a second)");
  if (o.ooo_streams == 2 && o.device == "cpu")
    throw InvalidOption("ooo_streams",
                        "is 2, a second CUDA stream, and the model is on the CPU: there the "
                        "weight gradients take a second thread (--ooo-threads 2)");
  if (o.ooo_streams == 2 && o.ooo_threads == 2)
    throw InvalidOption("ooo_streams", "is 2 with --ooo-threads 2: choose one");
  if (o.ooo_threads == 2 && o.job.distributed())
    throw InvalidOption("ooo_threads",
                        "is for one process; data-parallel training reorders "
                        "its backward with --grad-sync ooo");
  if (o.ooo_streams == 2 && o.job.distributed())
    throw InvalidOption("ooo_streams",
                        "is for one process; data-parallel training reorders its backward "
                        "with --grad-sync ooo");
  if (o.log_every < 1) throw InvalidOption("log_every", "must be at least 1");
  if (!(o.curriculum >= 0 && o.curriculum <= 1))
    throw InvalidOption("curriculum", "must be a share of the steps, from 0 (none) to 1");
  if (o.checkpoint_every < 0)
    throw InvalidOption("checkpoint_every", "must be 0 (only when interrupted) or more");
  if (o.checkpoint_path.empty() && o.checkpoint_every > 0)
    throw InvalidOption("checkpoint_path", "is needed to write a checkpoint every N steps");
  if (o.checkpoint_path.empty() && o.resume)
    throw InvalidOption("checkpoint_path", "is needed to resume");
  validate(o.memory);
  parallel::validate(o.dist);
  check_repeatable_exchange(o);
  // nccl on the CPU or on a GPU the ranks share: refused
  parallel::resolved_backend(o.dist.backend, rank_devices(o), shared_gpu(o));
}

void check_swap_bandwidth(double bytes_per_second, const std::string& field) {
  if (!(bytes_per_second == 0 || bytes_per_second >= kMinSwapBandwidth) ||
      !std::isfinite(bytes_per_second))
    throw InvalidOption(field, "must be 0 (unthrottled) or at least 1e6 bytes per second");
}

std::string default_checkpoint_path(const std::string& out_path) {
  if (out_path.empty()) return "";
  std::error_code error;
  const auto status = std::filesystem::status(out_path, error);
  if (!error && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    return "";
  return out_path + ".ckpt";
}

void validate(const MemoryOptions& o) {
  const std::vector<std::string> known = memory_technique_names();
  for (const auto& t : o.techniques) {
    if (std::find(known.begin(), known.end(), t) == known.end()) {
      std::string valid;
      for (const auto& name : known) valid += (valid.empty() ? "" : ", ") + name;
      throw InvalidOption("memory.techniques",
                          "has an unknown technique '" + t + "' (valid: " + valid + ")");
    }
  }
  const TechniqueChoice chosen(o.techniques);
  std::string stores;
  for (const MemoryTechniqueInfo* t : chosen.chosen()) {
    if (t->kind == TechniqueKind::store) stores += (stores.empty() ? "" : " and ") + t->name;
  }
  if (stores.find(" and ") != std::string::npos) {
    throw InvalidOption("memory.techniques",
                        "names " + stores + ", which both keep the saved activations: choose one");
  }
  if (o.budget_bytes < 0) throw InvalidOption("memory.budget_bytes", "must not be negative");
  if (o.budget_bytes > 0 && !chosen.plans())
    throw InvalidOption("memory.budget_bytes",
                        "needs recompute, swap or algo among the techniques");
  check_swap_bandwidth(o.swap_bandwidth, "memory.swap_bandwidth");
  if (!o.cap.empty()) check_memory_cap(o.cap);
}

void check_device_support(const TrainingOptions& o) {
  check_device_support(o, o.device == "cpu" ? 0 : cuda_device_count());
}

void check_device_support(const TrainingOptions& o, int visible_devices) {
  const c10::Device device =
      resolve_device_among(job_device_name(o, visible_devices), visible_devices);
  if (device.is_cpu()) {
    if (!o.memory.cap.empty())
      throw InvalidOption("memory.cap",
                          "limits a device's memory, and the model is on the CPU: bound the "
                          "CPU's activations with memory.budget_bytes (--memory-budget)");
    return;
  }
  // ReLU compression works on device memory (memory/cuda/'s kernels), recompute on the units
  // (the device's generator replayed), swap to pinned host memory (memory/PinnedCopy.h), reuse
  // from a device arena (memory/DeviceArenaReuse.h) and algo with cuDNN's algorithms
  // (nn/Conv2d.h), planned on the device's measured peaks; a registered store is not known to
  // handle device tensors.
  const TechniqueChoice chosen(o.memory.techniques);
  for (const MemoryTechniqueInfo* t : chosen.chosen()) {
    if (t->name != "relu" && t->name != "recompute" && t->name != "swap" && t->name != "reuse" &&
        t->name != "algo")
      throw InvalidOption("memory.techniques",
                          "must be none, relu, recompute, swap, reuse, algo or all on " +
                              o.device + ", not " + t->name + " (host memory only so far)");
  }
  if (o.ooo_threads != 1)
    throw InvalidOption("ooo_threads",
                        "must be 1 on " + o.device +
                            ": the second weight-gradient thread computes on the CPU");
}

std::string job_device_name(const TrainingOptions& o) {
  if (o.device != "cuda" || !o.job.distributed()) return o.device;
  return job_device_name(o, cuda_device_count());
}

std::string job_device_name(const TrainingOptions& o, int count) {
  if (o.device != "cuda" || !o.job.distributed()) return o.device;
  if (count == 0) return o.device;  // resolve_device says why there is none
  if (o.job.local_rank >= count)
    throw InvalidOption("device",
                        "is cuda in a job, where each rank takes the GPU of its LOCAL_RANK, and "
                        "the rank with LOCAL_RANK " + std::to_string(o.job.local_rank) +
                            (o.job.local_rank_given
                                 ? ""
                                 : " (its RANK: without LOCAL_RANK and LOCAL_WORLD_SIZE every "
                                   "rank counts as on this host)") +
                            " sees " + std::to_string(count) +
                            " CUDA device(s): start at most that many ranks per host, or give "
                            "--device cuda:N to share one GPU (over gloo; NCCL needs a GPU per "
                            "rank); ranks that each see only their own GPU (CUDA_VISIBLE_DEVICES "
                            "per rank) are each alone on it: LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "
                            "--device cuda:0; a rank alone on its host: LOCAL_RANK=0");
  return "cuda:" + std::to_string(o.job.local_rank);
}

parallel::DistOptions job_dist_options(const TrainingOptions& o) {
  parallel::DistOptions d = o.dist;
  d.backend = parallel::resolved_backend(d.backend, rank_devices(o), shared_gpu(o));
  return d;
}

}  // namespace engram::trainer
