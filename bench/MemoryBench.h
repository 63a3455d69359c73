#pragma once
/// \file
/// `engram bench memory`: the memory of a training step of a workload, measured exactly by the
/// tracking allocator (memory/MemoryTracker.h), per memory technique, beside what PyTorch's own
/// profiler reports for the same network and batch (bench/peers/resnet_memory_peer.py, run in
/// the same invocation).
///
/// \code
///   engram::bench::MemoryBenchOptions options;
///   options.workload = "resnet";            // or "npi"
///   options.json_path = "memory.json";
///   engram::bench::run_memory_bench(options, std::cout);   // prints a table, writes the JSON
/// \endcode
///
/// A step is: zero_grad (gradients reset to undefined), forward (the batch is made inside it),
/// backward then the gradient scheduler's finish(), the optimizer step (FusedAdam). One warm-up
/// step (it allocates the optimizer state), then `steps` measured steps, each in its own
/// tracker window. Figures per step (memory/MemoryTracker.h has the definitions):
///   peak_bytes             maximum of live bytes during the step
///   activation_peak_bytes  maximum over the step of live bytes minus the parameter, gradient and
///                          optimizer-state bytes live at that instant
/// The row reports the maximum over the measured steps (and the per-step lists: a step repeats
/// the same allocations, so they agree) and the median step time.
///
/// Techniques (`techniques`, one row each, every row a fresh model from the same seed trained on
/// the same batch): any name of trainer/MemoryTechnique.h's list, or several joined by '+'; a
/// registered store technique (examples/techniques/Fp16Store.cpp) is measured like relu, with no
/// change here. Every row says whether its techniques are "lossless" and which "store" the layers
/// saved through. "none", the plain activation store; "relu", ReLU compression
/// (memory/CompressingStore.h, decompressed once per ReLU output) for the warm-up and measured
/// steps; "recompute", "swap" and "all" (relu + recompute + swap) run the model's units
/// (nn/Units.h) under a plan (trainer/MemoryTechniques.h): with `budget`, the planner's choice
/// under it, measured on a scratch copy of the model; without, every unit recomputed, swapped, or
/// both. Their rows add "plan" (per unit: measured costs, choice, swap-in start point, slack and
/// predicted stall; the planner's log) and, for swap, "swap": bytes moved per step, stall time with
/// the slack schedule (stall_ms) and, over as many further steps with every tensor read back on
/// demand, on_demand_stall_ms and on_demand_step_ms. With recompute among the techniques (ResNet,
/// peer not skipped) bench/peers/resnet_checkpoint_peer.py measures PyTorch's own checkpointing of
/// every unit of the same network, side by side with its plain run; its JSON is under
/// "checkpoint_peer" with rows "none" and "checkpoint". Against the `none` row, when there is one,
/// every row has peak_ratio, activation_peak_ratio and time_ratio (step_ms), and max_abs_grad_diff
/// and max_abs_loss_diff: the largest absolute difference of any parameter's gradient (as the
/// optimizer received it) and of the loss over all measured steps; lossless techniques must show
/// exactly 0, and every row has first_step_grad_rel_l2_diff, the relative L2 norm of the first
/// step's gradient difference (a lossy row's error). The relu row adds "relu": the store's figures
/// per measured step (ReLU outputs compressed, handles shared with the consuming layers,
/// decompressions), the sparsity (fraction of +0.0 elements among all compressed ones),
/// compression_ratio (dense bytes / compressed bytes), the format's overhead over bitmap plus
/// values, predicted_saving_bytes_per_step (dense bytes minus bitmap plus values, what the
/// technique should save at the activation peak), the measured saving (none's activation peak minus
/// relu's, per step) and saving_vs_prediction (measured / predicted, the step farthest from 1).
/// With relu among the techniques the report also has "relu_kernels": the CPU kernels' compress and
/// decompress throughput against a memcpy of the same dense bytes (over the same threads) on 2^21
/// elements at 0, 50% and 90% zeros, with the compressed size against bitmap plus values
/// (format_overhead).
///
/// Workloads: "resnet", the CIFAR ResNet-18 of resnet/ResNet.h on synthetic images
/// (resnet/ResNetWorkload.h), made inside each step; "resnet50", ResNet-50 in its ImageNet layout
/// (resnet50_options(), 1000 classes) on 224x224 synthetic images by default; "npi", the addition
/// NPI on `batch` traces drawn from the task's default training data, whose data set (those traces
/// only) is live activation bytes at every step's start (see live_bytes_by_tag_at_step_start).
///
/// Also per row, to attribute the peak: the phase it falls in, the activation bytes at the end
/// of forward, live bytes by tag at the peak and at the step's start, and
/// activation_peak_bytes_counting_gradient_temporaries: the peak when gradient-tagged
/// allocations that the step makes and frees again (the working buffers of the weight-gradient
/// tasks, which the gradient scheduler tags as gradients) count as activations, so that only
/// what outlives the step as a .grad is left out.
///
/// The peer (ResNet workload only) builds the same network in Python PyTorch and profiles one
/// step with torch.profiler (profile_memory=True). Parameters and Adam states exist before the
/// profiled step; gradients are freed before it, as here, and the allocations that end it as a
/// .grad are found by address and left out. Its activation_peak_bytes is the maximum of the
/// running sum of the remaining allocation events over forward and backward (torch.optim.Adam's
/// temporaries in the optimizer step are reported apart: FusedAdam has none). The report carries
/// the peer's JSON under "peer" and, per row, activation_peak_ratio_vs_profiler (ours / peer's),
/// the same for the figure counting gradient temporaries (the like-for-like definition: at the
/// default configuration it agrees to a few kilobytes), and the ratio to the peer's figure with
/// gradients kept allocated and zeroed in place (higher: backward's weight-gradient results are
/// then temporaries). bench/peers/resnet_memory_peer.py documents the peer's method.

#include "common/PythonEnv.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace engram::bench {

struct MemoryBenchOptions {
  std::string workload;  ///< "npi", "resnet" or "resnet50"
  std::vector<std::string> techniques{"none"};
  std::string json_path;   ///< where the JSON goes (written atomically)
  std::string trace_path;  ///< Chrome trace of the last measured step; empty: none
  long steps = 3;          ///< measured steps after the warm-up
  long batch = 0;          ///< 0: the workload's default (npi: 8 traces, resnet: 32 images)
  int image_size = 0;      ///< resnet: images' height and width; 0: 32 (resnet), 224 (resnet50)
  int width = 64;          ///< resnet: channels of the first stage; each later stage doubles it
  int hidden = 256;        ///< npi: LSTM width
  std::string impl = "engram";  ///< npi: "engram" (nn/) or "torch" (plain torch modules)
  std::uint64_t seed = 1;
  int threads = 1;  ///< intra-op threads, C++ and peer alike
  /// Where the step runs: "cpu", or "cuda"/"cuda:N" (bench/DeviceMemoryBench.h: the ResNet and
  /// the none row only, measured on the CUDA caching allocator beside PyTorch eager's figures).
  std::string device = "cpu";
  std::string python = torch_python();  ///< with the pinned torch (common/PythonEnv.h)
  bool skip_peer = false;
  /// Bound on activation_peak_bytes for the rows that plan (recompute, swap, all): a number of
  /// bytes, or a fraction of the `none` row's activation peak written "0.5x" (`none` must come
  /// first). Empty: those rows treat every unit.
  std::string budget;
  double swap_bandwidth = 0;  ///< bytes per second of the spill file; 0: unthrottled
  bool explain = false;       ///< print each planning row's plan (memory::explain)
  /// On a CUDA device: what its caching allocator may hold while a row trains
  /// (trainer/MemoryCap.h's syntax: bytes, "8GiB" or a fraction "0.5"); recompute, swap and
  /// algo rows are planned per unit and layer under it. Empty: no cap.
  std::string memory_cap;
  /// With memory_cap: each row's largest batch that trains under the cap instead of one batch's
  /// figures, beside PyTorch's (bench/DeviceMemoryBench.h, run_max_batch_bench).
  bool find_max_batch = false;
  long max_batch = 4096;  ///< find_max_batch: no larger batch is tried
  /// find_max_batch: seconds from the search's start (0: no limit). No trial starts past it; the
  /// report then says what was cut (the search of a row, the rows after it, the peer) and is
  /// written as usual, each largest batch one that trained.
  double time_limit = 0;
};

/// The budget in bytes that `budget` (MemoryBenchOptions::budget) names, given the `none` row's
/// activation peak (-1 when there is none yet); 0 for an empty budget. Throws UsageError for a
/// malformed budget or a fraction without a `none` row.
std::int64_t resolve_budget(const std::string& budget, std::int64_t none_activation_peak);

/// The workloads `--workload` accepts.
const std::vector<std::string>& memory_workloads();

/// Measures, prints a table on `out` and writes the JSON (and the trace); throws UsageError for
/// bad options, std::runtime_error for a failed peer or an unwritable file.
void run_memory_bench(const MemoryBenchOptions& options, std::ostream& out);

}  // namespace engram::bench
