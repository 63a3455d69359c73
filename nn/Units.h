#pragma once
/// \file
/// A network cut into units for swap and recompute (docs/ARCHITECTURE.md): a chain of units, each
/// starting at a checkpoint layer, run under a plan that says, for each unit, whether its
/// forward is rerun during backward (nn/Recompute.h) and whether what it saves moves to the spill
/// file between its forward and its backward (memory/SwapStore.h). A unit that is both keeps only
/// its input, and swaps that.
///
/// \code
///   std::vector<engram::nn::Unit> units = engram::resnet::resnet_units(net);  // stem, every block
///   engram::nn::UnitPlan plan(units.size());
///   plan[3].recompute = true;  plan[5].swap = true;
///   engram::memory::SwapStore swap;            // needed when some unit swaps
///   engram::nn::UnitRunner runner(plan, &swap);
///   at::Tensor logits;
///   {
///     engram::nn::RuntimeGuard use(&swap, nullptr);
///     logits = net->head(runner.forward(units, images));
///   }
///   loss(logits).backward();
///   runner.timings();     // forward time of each unit, when each unit's backward began
/// \endcode
///
/// The runner calls the swap store's begin_unit / end_unit / end_forward around the units and
/// backward_begins(k) when the gradient of unit k's output arrives (a hook on the output), so
/// the store's prefetch schedule fires at the right moments. The units' spans are recorded in
/// the memory tracker ("unit_forward" in category "forward"; "unit_backward_begins" instants
/// as zero-length spans in category "backward").

#include "memory/UnitPlanner.h"
#include "nn/Recompute.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace engram::memory {
class SwapStore;
}  // namespace engram::memory

namespace engram::nn {

/// One unit: a function of the previous unit's output, and its trainable tensors.
struct Unit {
  std::string name;
  /// Must stay valid until backward (a recomputed unit runs it again then): capture by value.
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::vector<at::Tensor> parameters;
  /// The unit's output is a ReLU's (the next unit's input, kept by a recomputed next unit, is
  /// then saved as memory::SavedKind::relu_output, which a compressing store compresses).
  bool output_is_relu = false;
};

/// What happens to one unit: memory::UnitChoice (recompute, swap; the planner's choice).
using UnitTreatment = memory::UnitChoice;
using UnitPlan = std::vector<UnitTreatment>;

/// Where a runner reads its figures for a model off the CPU: `live_bytes` replaces the CPU
/// memory tracker's live bytes (a CUDA workload's, memory/CudaMemoryTracker.h), and
/// `synchronize`, called before each clock reading, makes the times those of the kernels rather
/// than of their launches (a device synchronize). Either may be empty: the CPU's figures.
struct UnitProbe {
  std::function<std::int64_t()> live_bytes;
  std::function<void()> synchronize;
};

/// Times of the last forward and backward the runner ran, in nanoseconds of a steady clock.
struct UnitTimings {
  std::vector<std::int64_t> forward_ns;         ///< per unit: its forward's duration
  std::vector<std::int64_t> backward_begin_ns;  ///< per unit: when its backward began (-1: not yet)
  std::int64_t forward_end_ns = 0;              ///< when the last unit's forward ended
  /// Per unit: bytes of its input tensor, and the memory tracker's live bytes after its forward
  /// (0 without a tracker installed), or the probe's; live_bytes_before: before the first unit.
  std::vector<std::int64_t> input_bytes, live_bytes_after;
  std::int64_t live_bytes_before = 0;
};

class UnitRunner {
 public:
  /// `swap` may be null when no unit of `plan` swaps (std::invalid_argument otherwise); `probe`:
  /// where the timings' live bytes and clock come from (the CPU's by default).
  UnitRunner(UnitPlan plan, memory::SwapStore* swap, UnitProbe probe = {});

  /// Runs the units in order from `input` and returns the last one's output. The plan must have
  /// one entry per unit (std::invalid_argument). Outside gradient mode the plan is ignored: the
  /// units just run.
  at::Tensor forward(const std::vector<Unit>& units, const at::Tensor& input);

  const UnitPlan& plan() const { return plan_; }
  /// Of the last forward() (and its backward, as far as it has run).
  UnitTimings timings() const;

 private:
  UnitPlan plan_;
  memory::SwapStore* swap_;
  std::shared_ptr<const UnitProbe> probe_;  // shared with the backward hooks
  std::shared_ptr<UnitTimings> timings_;  // shared with the backward hooks
};

/// Nanoseconds of the steady clock the timings use.
std::int64_t steady_now_ns();

}  // namespace engram::nn
