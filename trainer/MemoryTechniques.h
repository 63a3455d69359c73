#pragma once
/// \file
/// The memory techniques of a training run, set up in one place for `engram train` and
/// `engram bench memory` (DESIGN.md section 4): ReLU compression (memory/CompressingStore.h),
/// recompute (nn/Recompute.h) and swap (memory/SwapStore.h) of the units a workload is cut into
/// (nn/Units.h), chosen per unit by the planner (memory/UnitPlanner.h) under a memory budget.
///
/// \code
///   engram::trainer::MemoryOptions o;
///   o.techniques = {"relu", "recompute", "swap"};
///   o.budget_bytes = 64 << 20;                    // bound on activation_peak_bytes; 0: none
///   engram::trainer::MemoryTechniques memory(o);  // InvalidOption for unknown names
///   memory.plan(workload, batch);                 // measures steps; InfeasibleBudget if too low
///   memory.apply(workload);
///   {
///     engram::nn::RuntimeGuard use(memory.store(), nullptr);
///     ... training steps ...
///   }
///
/// A training session (trainer/Trainer.h) does exactly this around its steps; models never do.
/// \endcode
///
/// Without a budget every unit gets everything allowed: recompute, swap, or recompute+swap (the
/// input a recomputed unit keeps is swapped). With a budget the planner chooses per unit from
/// measured costs: profile_units() runs one step with every unit kept and measures each unit's
/// forward and backward time, the bytes it leaves alive (live bytes after its forward minus
/// before: what it saves for backward) and its input's bytes; the transfer rate is
/// --swap-bandwidth when given, else measured by writing and reading back 32 MiB through a swap
/// store. Planning runs forward and backward passes on the workload it is given (gradients
/// reset afterwards, no optimizer step; state such as BatchNorm running statistics does move:
/// pass a scratch copy where that matters) inside memory-tracker windows (the tracker is
/// installed if it is not), with the swap store's transfers synchronous, so that a plan is
/// judged by the most memory its schedule can hold. The swap store's prefetch schedule is the
/// plan's (memory/UnitPlanner.h: the slack schedule, or just in time when only that fits).

#include "memory/CompressingStore.h"
#include "memory/SwapStore.h"
#include "memory/UnitPlanner.h"
#include "nn/Units.h"
#include "trainer/TrainingOptions.h"
#include "trainer/Workload.h"

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace engram::trainer {


class MemoryTechniques {
 public:
  /// Throws InvalidOption (validate(MemoryOptions)) for an unknown technique, a negative budget
  /// or bandwidth, or a budget without recompute or swap.
  explicit MemoryTechniques(MemoryOptions options);
  ~MemoryTechniques();
  MemoryTechniques(const MemoryTechniques&) = delete;
  MemoryTechniques& operator=(const MemoryTechniques&) = delete;

  bool relu() const { return relu_; }
  bool recompute() const { return recompute_; }
  bool swap() const { return swap_; }
  /// Recompute or swap: the workload must be cut into units, and plan() must run.
  bool uses_units() const { return recompute_ || swap_; }
  /// "none", or the techniques joined with '+' ("relu+recompute").
  std::string name() const;

  /// The store for nn::RuntimeGuard (nullptr: the plain store of the runtime).
  memory::ActivationStore* store();
  memory::CompressingStore* compressing() { return compressing_.get(); }
  memory::SwapStore* swap_store() { return swap_store_.get(); }

  /// Chooses the plan by measuring steps of `workload` on `batch` (see the file comment). Throws
  /// UsageError when the workload is not cut into units, memory::InfeasibleBudget when the
  /// budget is below every plan's peak. Does nothing when !uses_units().
  void plan(Workload& workload, const std::vector<std::size_t>& batch);
  /// Runs `workload`'s units under the plan from now on (plan() first).
  void apply(Workload& workload);

  const memory::MemoryPlan& memory_plan() const { return plan_; }
  const std::vector<memory::UnitCosts>& unit_costs() const { return costs_; }
  double swap_bytes_per_ms() const { return swap_bytes_per_ms_; }
  nn::UnitRunner* runner() { return runner_.get(); }
  /// Switches between the slack schedule and on-demand swap-in for the next steps.
  void set_slack_schedule(bool on);
  /// The plan as text (memory::explain).
  std::string explain() const;

 private:
  MemoryOptions options_;
  bool relu_ = false, recompute_ = false, swap_ = false;
  std::unique_ptr<memory::CompressingStore> compressing_;
  std::unique_ptr<memory::SwapStore> swap_store_;
  std::unique_ptr<nn::UnitRunner> runner_;
  memory::MemoryPlan plan_;
  std::vector<memory::UnitCosts> costs_;
  double swap_bytes_per_ms_ = 0;
};

/// One step with every unit of `workload` kept, measured per unit (see the file comment); also
/// returns the step's time outside the units in `head_ms`.
std::vector<memory::UnitCosts> profile_units(Workload& workload,
                                             const std::vector<std::size_t>& batch,
                                             double& head_ms);

}  // namespace engram::trainer
