#pragma once
/// \file
/// What data-parallel training is told: where this process stands in the job (DistEnv, read from
/// torchrun's environment by the command line, never by a library) and how the ranks exchange
/// gradients (DistOptions). Plain structs, no torch: the command line includes this header.
///
/// \code
///   // RANK, WORLD_SIZE, ... (cli/Flags.h's read_job_environment does this)
///   engram::parallel::DistEnv env = engram::parallel::env_from(std::getenv);
///   engram::parallel::DistOptions opt;
///   opt.grad_sync = engram::parallel::GradSync::overlap;
///   opt.link_bandwidth = 125e6;          // emulate 1 Gb/s
///   engram::parallel::validate(opt);     // InvalidOption
/// \endcode

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace engram::parallel {

/// Where this process stands: torchrun's RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
struct DistEnv {
  int rank = 0;
  /// LOCAL_RANK, this rank's place among the ranks on its host, which picks its GPU; when not
  /// given (nor LOCAL_WORLD_SIZE), RANK, every rank counting as on this host.
  int local_rank = 0;
  bool local_rank_given = false;  ///< LOCAL_RANK is set
  int world_size = 1;
  /// LOCAL_WORLD_SIZE, the ranks on this host (torchrun sets it); 0 when not given.
  int local_world_size = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// torchrun's static rendezvous already serves a store at MASTER_ADDR:MASTER_PORT
  /// (TORCHELASTIC_USE_AGENT_STORE=True): every rank joins it as a client.
  bool agent_store = false;
  int restart_count = 0;       ///< TORCHELASTIC_RESTART_COUNT: keys of earlier attempts ignored
  std::string gloo_interface;  ///< GLOO_SOCKET_IFNAME: the network interface Gloo binds to
  bool launched = false;       ///< RANK is set: a launcher (torchrun) started this process
  /// A job: started by a launcher (a job of one rank too, as PyTorch DDP under torchrun
  /// --nproc_per_node 1), or WORLD_SIZE above 1.
  bool distributed() const { return launched || world_size > 1; }
  /// The ranks that may share this host's GPUs: LOCAL_WORLD_SIZE, or every rank when the
  /// launcher did not say.
  int ranks_on_this_host() const { return local_world_size > 0 ? local_world_size : world_size; }
};

/// Reads the variables through `lookup` (std::getenv, or a map in tests). Unset: one process.
/// Throws InvalidOption naming the variable when one is set but malformed (a rank outside
/// 0..WORLD_SIZE-1, a port outside 1..65535, text where a number belongs), and LOCAL_RANK when
/// a job gives LOCAL_WORLD_SIZE without it. Without both, LOCAL_RANK is RANK.
DistEnv env_from(const std::function<const char*(const char*)>& lookup);

/// When gradients are exchanged (docs/ARCHITECTURE.md).
enum class GradSync {
  none,     ///< never: every rank trains alone (the compute-only baseline of `bench dp`)
  after,    ///< one all-reduce of every gradient once backward has finished
  overlap,  ///< buckets in backward order, each all-reduced as soon as its gradients are ready
  /// Out-of-order backprop (Oh et al., EuroSys 2022), "reverse first-k": the weight gradients of
  /// the k layers nearest the input are computed after the input-gradient chain, input-first,
  /// each all-reduced alone; their exchange runs on while the next step's forward starts, and
  /// each such layer is updated just before its forward reads it. The others go as in overlap.
  ooo,
  /// Host-side accumulation in chunks (US10949746B2, US11164079B2): the gradients of a chunk of
  /// consecutive layers (in backward order) are copied into a host buffer and summed over the
  /// CPU process group while backward goes on with the layers below; the chunk's size in layers
  /// is searched on the first steps (chunk_layers).
  host,
};
/// "none", "after", "overlap", "ooo", "host".
const std::vector<std::string>& grad_sync_names();
const char* grad_sync_name(GradSync sync);
/// InvalidOption("dist.grad_sync", ...) for a name not in grad_sync_names().
GradSync grad_sync_from_name(const std::string& name);

struct DistOptions {
  /// "gloo" (host and CUDA tensors), "nccl" (CUDA tensors; host tensors then go over a Gloo
  /// group beside it, as PyTorch's "cpu:gloo,cuda:nccl") or "auto": nccl when each rank has a
  /// GPU of its own, gloo otherwise (resolved_backend()).
  std::string backend = "auto";
  double timeout_seconds = 300;  ///< a collective or the rendezvous waiting longer fails
  GradSync grad_sync = GradSync::overlap;
  /// Bucket capacity in bytes, as PyTorch DDP: 25 MiB, the first bucket (the last layers, whose
  /// gradients backward produces first) 1 MiB so that communication starts early.
  std::size_t bucket_bytes = 25u << 20;
  std::size_t first_bucket_bytes = 1u << 20;
  double link_bandwidth = 0;  ///< emulated link, bytes per second on the wire; 0: not emulated
  double link_latency = 0;    ///< emulated per-collective latency, seconds
  long check_every = 100;     ///< steps between checks that every replica holds equal parameters
  /// GradSync::ooo: how many layers (those nearest the input) are updated late; -1: chosen from
  /// the first steps' measured per-layer compute and communication (parallel/OooPlan.h).
  long ooo_k = -1;
  /// GradSync::host: layers per chunk; -1: searched (1, 2, 4, ... while a step gets faster; the
  /// best kept).
  long chunk_layers = -1;
  /// Batch normalisation over the global batch (as torch.nn.SyncBatchNorm): two small
  /// all-reduces per layer in forward and one in backward. Off, as in PyTorch DDP: each rank
  /// normalises its own batch, and training equals one process only without batch norm.
  bool sync_batch_norm = false;
};

/// InvalidOption naming the field ("dist.backend", "dist.timeout_seconds", ...).
void validate(const DistOptions& options);

/// Where a job's ranks compute, as far as the choice of backend goes.
enum class RankDevices {
  cpu,         ///< host memory, which only Gloo sums
  gpu_each,    ///< a GPU per rank
  gpu_shared,  ///< two ranks or more on one GPU, which NCCL cannot sum over
};

/// The backend of a job whose ranks compute on `devices`: "auto" is nccl for a GPU per rank and
/// gloo otherwise; "gloo" and "nccl" as given. InvalidOption("dist.backend") for nccl on the CPU
/// (NCCL sums device memory only) and on a shared GPU; then the message names `shared`, what the
/// ranks share ("cuda:0"), and for a "cuda:N" offers --device cuda, a GPU per rank.
std::string resolved_backend(const std::string& backend, RankDevices devices,
                             const std::string& shared = "");

/// The largest bucket a command line may ask for, in MiB (1 TiB): far above any model's
/// gradients, and far below where a size in bytes stops fitting a size_t.
constexpr double kMaxBucketMib = 1 << 20;

/// `mib` MiB in bytes, at least 1 (bucket sizes are given in MiB, as DDP's bucket_cap_mb);
/// `mib` in (0, kMaxBucketMib].
std::size_t bytes_of_mib(double mib);

/// A loopback TCP port no one listens on now, chosen by the system, for the rendezvous of a job
/// on this machine (a fixed or pid-derived port can be one another process's connection holds).
/// Throws std::runtime_error when no socket can be bound.
int free_loopback_port();

}  // namespace engram::parallel
