#pragma once
/// \file
/// The options of a training session, shared by every model: each model's train options embed
/// one TrainingOptions (with the model's own defaults), the command line registers its flags
/// once for every `engram train ...` command, and trainer::train (trainer/Trainer.h) runs the
/// session they describe. Plain structs, no torch: the command line includes this header.
///
/// \code
///   engram::trainer::TrainingOptions t;
///   t.steps = 2000;  t.batch = 8;  t.learning_rate = 2e-3;
///   t.memory.techniques = {"relu", "recompute"};   // docs/ARCHITECTURE.md
///   engram::trainer::validate(t);                  // InvalidOption naming the field
/// \endcode

#include "parallel/DistOptions.h"
#include "trainer/MemoryTechnique.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engram::trainer {

/// The slowest spill file a run may emulate, 1 MB/s: below it a step waits minutes on its swap
/// (a byte per second would never finish, and a stop request waits for the step).
constexpr double kMinSwapBandwidth = 1e6;

/// Throws InvalidOption(`field`) unless `bytes_per_second` is 0 (unthrottled) or a finite number
/// of at least kMinSwapBandwidth.
void check_swap_bandwidth(double bytes_per_second, const std::string& field);

/// The memory techniques of a session (trainer/MemoryTechniques.h).
struct MemoryOptions {
  /// Names from trainer/MemoryTechnique.h's list (memory_technique_names(): "none", "all", the
  /// built-in "relu", "recompute", "swap", "reuse", "algo", and any registered one).
  std::vector<std::string> techniques;
  /// Bound on activation_peak_bytes; 0: every unit treated (and every replaceable layer given
  /// its least-workspace algorithm).
  std::int64_t budget_bytes = 0;
  /// Bytes per second for the spill file; 0: unthrottled, else at least kMinSwapBandwidth.
  double swap_bandwidth = 0;
  std::string spill_directory;  ///< empty: the system's temporary directory
  /// Prefetch by the slack schedule (true) or read swapped tensors back on demand (false).
  bool slack_schedule = true;
  /// What the device's allocator may hold while training (trainer/MemoryCap.h's syntax: bytes,
  /// "8GiB", or a fraction "0.5"); on CUDA only. With recompute, swap or algo among the
  /// techniques and no budget, the planner's budget is what the cap leaves beside the step's
  /// state. Empty: no cap.
  std::string cap;
  /// Set by a training session whose budget comes from a device cap: what the allocator may
  /// reserve at a planning step's live peak (trainer/MemoryCap.h's
  /// reserved_budget_while_planning). The planner then measures each plan from an emptied cache
  /// and holds its reserved bytes at the live peak to this as well as its live activation peak
  /// to budget_bytes. 0: live bytes only.
  std::int64_t reserved_budget = 0;
};

/// The optimizers TrainingOptions::optimizer may name: "adam", "sgd" (trainer/Optimizer.h).
const std::vector<std::string>& optimizer_names();

struct TrainingOptions {
  long steps = 1000;  ///< optimizer steps
  int batch = 32;     ///< examples per step, sampled without replacement per epoch
  double learning_rate = 1e-3;
  /// trainer/Optimizer.h: "adam" (trainer/FusedAdam.h) or "sgd" (with momentum,
  /// trainer/FusedSgd.h).
  std::string optimizer = "adam";
  double momentum = 0.9;   ///< SGD's, in [0, 1); 0: plain SGD
  double grad_clip = 1.0;  ///< max global gradient norm; 0 disables clipping
  std::uint64_t seed = 1;  ///< batch order (and the model's initial weights, by its caller)
  /// Intra-op threads (and OpenBLAS's); 0: every core. The models' small matrices often train
  /// fastest on one.
  int threads = 1;
  /// Where the model, its batches, the optimizer's state and the step live: "cpu", "cuda" or
  /// "cuda:N" (trainer/Device.h). The model's train function builds its model there.
  std::string device = "cpu";
  /// Bit-for-bit repeatable computation on CUDA (trainer/Device.h's make_deterministic): cuDNN's
  /// and ATen's deterministic algorithms, cuBLAS's fixed workspace. CPU runs repeat themselves
  /// either way. In a job of 3 ranks or more the sums round as the buckets cut them, so an auto
  /// dist.ooo_k or dist.chunk_layers (chosen from times) is refused (validate()).
  bool deterministic = false;
  /// Out-of-order backprop in one process: 2 runs the weight gradients on a second thread
  /// (nn::ThreadedScheduler) while the input-gradient chain goes on, each thread computing with
  /// one intra-op thread (threads must then be 1); 1: the plain backward.
  int ooo_threads = 1;
  /// Out-of-order backprop on one GPU: 2 runs the weight-gradient kernels on a second CUDA
  /// stream (nn::cuda::StreamScheduler) while the input-gradient chain goes on on the first,
  /// events ordering what one needs of the other; 1: one stream. CUDA only.
  int ooo_streams = 1;
  std::string metrics_path;  ///< JSON lines, one object per logged step; empty: none
  int log_every = 10;        ///< steps between metrics lines
  bool progress = false;     ///< draw a progress bar on stderr
  /// The share of `steps` trained under a curriculum, shortest examples first
  /// (trainer/BatchSampler.h's Curriculum); 0: none. Needs a workload whose examples have
  /// lengths (Workload::example_lengths: the NPI's traces).
  double curriculum = 0;
  MemoryOptions memory;
  /// Resumable training (trainer/TrainingState.h): the session's state is written here every
  /// `checkpoint_every` steps and when a SIGINT or SIGTERM interrupts training; empty: never.
  std::string checkpoint_path;
  long checkpoint_every = 0;  ///< steps between checkpoints; 0: only when interrupted
  bool resume = false;        ///< continue from the state at checkpoint_path
  /// What a resumed run must share with the one that wrote the state besides the options (the
  /// model's configuration and a checksum of its data): set by the model's train function.
  std::string identity;
  /// Data-parallel training (trainer/DataParallel.h): where this process stands in its job,
  /// torchrun's environment as the command line read it (parallel::env_from). With a world of
  /// more than one rank, `batch` is per rank, every rank trains on its share of the same global
  /// batch, and only rank 0 writes files (writes_files()). The default: one process.
  parallel::DistEnv job;
  parallel::DistOptions dist;
  /// False on the ranks other than 0 of a data-parallel job: they write no model or metrics.
  bool writes_files() const { return job.rank == 0; }
  /// The number of ranks training together (1: one process).
  int world_size() const { return job.world_size; }
};

/// Where a run that writes its model to `out_path` keeps its training state when no checkpoint
/// path is given: beside the model (out_path + ".ckpt"), or nowhere ("") when `out_path` is a
/// device or a pipe (--out /dev/null), beside which no file belongs.
std::string default_checkpoint_path(const std::string& out_path);

/// Throws InvalidOption (common/Errors.h) naming the first invalid field: steps < min_steps
/// (0 for the loop itself; the models' train commands ask for at least 1), batch < 1,
/// a learning rate that is not a positive finite number, an unknown optimizer, a momentum
/// outside [0, 1), a negative or non-finite grad_clip,
/// threads outside 0..1024, a device name that is not cpu, cuda or cuda:N, nccl on the CPU or
/// on a GPU the ranks of a host share (parallel::resolved_backend), ooo_streams 2 on the CPU,
/// log_every < 1, an unknown memory technique, a negative budget or bandwidth, two store
/// techniques (relu and a registered one), a budget without recompute,
/// swap or algo, a negative checkpoint_every, checkpoint_every
/// or resume without a checkpoint_path, deterministic with an auto dist.ooo_k (ooo) or
/// dist.chunk_layers (host) in a job of 3 ranks or more.
void validate(const TrainingOptions& options, long min_steps = 0);
/// The memory part alone (fields named "memory.techniques", ...).
void validate(const MemoryOptions& options);

/// What a session on `options.device` can do, checked before any work: the device itself
/// (trainer/Device.h's resolve_device: UsageError naming what is missing when it asks for a GPU
/// this process does not see, or a rank's own GPU it does not have), and, on CUDA,
/// InvalidOption for what runs on the CPU only so far: a memory technique other than relu,
/// recompute, swap, reuse and algo (a registered store is not known to handle device tensors)
/// and a second weight-gradient thread (ooo_threads 2; ooo_streams 2 is the GPU's); on the CPU,
/// a device-memory cap.
void check_device_support(const TrainingOptions& options);
/// check_device_support() in a process that sees `visible_devices` CUDA devices.
void check_device_support(const TrainingOptions& options, int visible_devices);

/// The device this process trains on: `options.device`, except that "cuda" in a job is the
/// rank's own GPU, cuda:LOCAL_RANK (torchrun's one GPU per rank; "cuda:N" shares one; ranks
/// started without LOCAL_RANK and LOCAL_WORLD_SIZE take their RANK's, parallel::env_from).
std::string job_device_name(const TrainingOptions& options);
/// job_device_name() in a process that sees `visible_devices` CUDA devices: InvalidOption for a
/// LOCAL_RANK beyond them.
std::string job_device_name(const TrainingOptions& options, int visible_devices);

/// `options.dist` with its backend resolved for the device the job trains on
/// (parallel::resolved_backend: auto is nccl on CUDA, gloo on the CPU; and gloo for ranks of one
/// host that share one named GPU, "cuda:N", which NCCL cannot).
parallel::DistOptions job_dist_options(const TrainingOptions& options);

}  // namespace engram::trainer
