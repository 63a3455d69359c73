#pragma once
/// \file
/// `engram bench dp`: data-parallel training steps on `ranks` processes of this machine (one
/// compute thread each), for every model, emulated link speed and gradient schedule
/// (parallel::GradSync), beside PyTorch DDP (bench/peers/ddp_peer.py under torchrun) with the same
/// network, per-rank batch, threads, default buckets and link emulation (a DDP communication
/// hook with the same delay model), in the same invocation.
///
/// Per configuration: the step time (the median over the timed steps of each step's slowest
/// rank), the compute-only step (`none`), the communication alone (the same buckets all-reduced
/// back to back over the same link, no compute), the overlap efficiency
/// max(compute, communication) / step, and the bytes each rank all-reduces per step. With a
/// trace directory, a Chrome trace per rank of the last step of each configuration (compute
/// spans, one span per bucket's all-reduce).
///
/// With predict_links, the link what-if (bench/LinkPrediction.h): every schedule's step on each
/// target link is predicted from the links of link_bandwidths alone, then measured there too
/// (the target is emulated like the others), and the JSON's "link_predictions" give both and
/// the relative error.
///
/// The driver starts the ranks as child processes of the same binary (`--worker`, torchrun's
/// variables on loopback) and the peer through torchrun.
///
/// With hosts = "netns", every link is then measured a second time for real: the ranks run on
/// hosts of their own (bench/NetnsHosts.h: network namespaces through a bridge, Gloo bound to
/// each host's interface) and each link is a tbf shaper on every host's interface instead of the
/// sleep model, one job per link; the DDP peer runs across the same hosts, one torchrun per host.
/// Those rows say "link_kind": "shaped" (the others "emulated"), and the what-if is made for
/// each kind, the shaped prediction beside the sleep model's step on the same link.

#include "common/PythonEnv.h"
#include "parallel/DistOptions.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace engram::bench {

struct DpBenchOptions {
  std::string json_path;  ///< where the JSON goes (written atomically)
  int ranks = 2;
  std::vector<std::string> models{"resnet", "npi"};
  /// Emulated link bandwidths in bytes per second; 0: unthrottled loopback. Default: loopback,
  /// 10 Gb/s, 1 Gb/s, 100 Mb/s.
  std::vector<double> link_bandwidths{0, 1.25e9, 1.25e8, 1.25e7};
  double link_latency = 0;  ///< seconds per collective
  /// Links (bytes per second, > 0) whose step is predicted from link_bandwidths, then measured.
  std::vector<double> predict_links;
  std::vector<std::string> schedules{"none", "after", "overlap", "ooo", "host"};
  long ooo_k = -1;             ///< layers `ooo` updates late; -1: chosen (parallel::DistOptions)
  long chunk_layers = -1;      ///< layers per chunk of `host`; -1: searched (parallel::DistOptions)
  long warmup = 2;             ///< untimed steps per configuration (the first learns the buckets)
  long steps = 5;              ///< timed steps per configuration
  int resnet_batch = 16;       ///< per rank
  int npi_batch = 8;           ///< per rank
  int hidden = 256;            ///< NPI
  int threads = 1;             ///< intra-op threads per rank, Engram and peer alike
  /// Where the ranks train, Engram's and the peer's: "cpu", "cuda" (each rank the GPU of its
  /// LOCAL_RANK) or "cuda:N" (shared by the ranks, over gloo); a step is timed to the end of its
  /// kernels on the compute stream (ooo's deferred sums on NCCL's stream run on into the next).
  std::string device = "cpu";
  std::string dist_backend = "auto";  ///< parallel::DistOptions::backend, Engram and peer alike
  double bucket_mb = 25;       ///< bucket capacity in MiB, Engram and DDP (bucket_cap_mb) alike
  double first_bucket_mb = 1;  ///< Engram's first bucket (DDP's is fixed at 1 MiB)
  std::uint64_t seed = 1;
  std::string trace_dir;                      ///< Chrome traces per rank; empty: none
  std::string python = torch_python();        ///< with the pinned torch (common/PythonEnv.h)
  /// The DDP peer's launcher; "": the torchrun of `python` (common/PythonEnv.h's
  /// torchrun_command).
  std::string torchrun = named_torchrun();
  bool skip_peer = false;
  /// "loopback": the emulated links only; "netns": the links also shaped between hosts.
  std::string hosts = "loopback";
  double link_delay = 0;  ///< hosts = "netns": seconds each packet waits before its link (netem)
  /// The worker's: false when the driver shaped a real link, which the rows are then labelled
  /// with (link_bandwidths has that one link), so that nothing is emulated.
  bool emulate = true;
  /// The worker's: the driver's pid, so that a rank ends when its driver does.
  int driver_pid = 0;
  int port = 0;         ///< rendezvous port on 127.0.0.1 (the peer's: port + 1); 0: free ones
  bool worker = false;  ///< this process is one rank (started by the driver)
};

/// With device "cuda" each rank of the emulated links' job (on loopback, whatever `hosts` is)
/// trains on the GPU of its LOCAL_RANK: refuses (InvalidOption naming ranks) more ranks than the
/// `cuda_devices` this process sees, which the last ranks would otherwise find only after the
/// first had started. Other devices pass.
void check_ranks_have_gpus(const DpBenchOptions& options, int cuda_devices);

/// The backend of the bench's ranks and of its DDP peer, parallel::resolved_backend's for where
/// they train. Two ranks or more share one GPU with device "cuda:N", and under --hosts netns
/// with any GPU device: the shaped links' jobs run each rank as LOCAL_RANK 0 of its host, and
/// every host is this one machine. There "auto" is gloo and "nccl" is refused (InvalidOption
/// naming dist.backend). The emulated links' job of --hosts netns, a GPU per rank on loopback,
/// takes the same backend, so that its rows and the shaped ones compare.
std::string dp_backend(const DpBenchOptions& options);

/// The DDP peer's report (bench/peers/ddp_peer.py's --out) at `path`, checked to be one it
/// writes (rows, bucket_cap_mb, latency) and to have run with `bucket_mb` and `latency`; throws
/// std::runtime_error naming what differs. Its rows are then measured at Engram's settings.
nlohmann::json read_ddp_peer_report(const std::string& path, double bucket_mb, double latency);

/// The driver: starts the ranks and the peer, prints a table on `out`, writes the JSON.
/// Throws UsageError for bad options, std::runtime_error when a rank or the peer fails.
void run_dp_bench(const DpBenchOptions& options, std::ostream& out);

/// One rank of the job `env` describes (torchrun's variables as the command line read them,
/// parallel::env_from): measures every configuration; rank 0 writes the rows to
/// options.json_path.
void run_dp_worker(const DpBenchOptions& options, const parallel::DistEnv& env);
/// run_dp_worker on the options the driver wrote to `options_path` (JSON).
void run_dp_worker_from(const std::string& options_path, const parallel::DistEnv& env);

}  // namespace engram::bench
