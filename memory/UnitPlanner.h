#pragma once
/// \file
/// The swap/recompute planner (docs/ARCHITECTURE.md): given the measured costs of a network's
/// units and a bound on activation_peak_bytes, chooses for each unit whether to keep, recompute
/// or swap what it saves, and checks the choice by measuring. No torch and no models here: the
/// caller measures (nn/Units.h runs a plan; a workload's training step measures it).
///
/// \code
///   engram::memory::PlannerOptions o;
///   o.budget_bytes = 80 << 20;  o.allow_swap = true;  o.allow_recompute = true;
///   o.swap_rates = {4e6, 2e6};      // bytes/ms out and in: measured, or --swap-bandwidth
///   engram::memory::MemoryPlan plan = engram::memory::plan_units(costs, o, measure);
///   plan.choices;              // one UnitChoice per unit
///   plan.schedule.prefetch_at; // swap-in start points (memory/SlackAnalysis.h)
///   engram::memory::explain(plan, costs);   // the plan as text (engram bench memory --explain)
/// \endcode
///
/// How it chooses. Every upgrade of a unit has an estimated cost in milliseconds and an
/// estimated saving in bytes:
///   keep -> recompute       costs the unit's forward time, frees what only it saves;
///   keep -> swap            costs the waits the slack schedule predicts for the swapped set
///                           with this unit added (memory/SlackAnalysis.h; transfers take
///                           bytes / the direction's rate): the forward's for the swap-outs and
///                           the backward's for the swap-ins, minus those predicted without it;
///                           frees what only it saves;
///   recompute -> recompute+swap  (both allowed) costs the predicted waits of moving its input,
///                           frees its input.
/// Starting from every unit kept, it measures the activation peak; while the peak is above the
/// budget it applies the cheapest upgrades per byte until the estimated peak fits, then measures
/// again. Estimates only order the upgrades: the budget is checked on measured peaks. Swap-ins
/// follow the slack schedule (memory/SlackAnalysis.h). When every unit has its last upgrade and
/// the measured peak is still above the budget, the planner first measures each recomputed unit
/// without its recompute (recompute+swap -> swap, recompute -> keep): a rerun brings the unit's
/// forward tensors back beside the backward's and can raise the peak it was meant to lower. A
/// unit that measures lower without it keeps that choice and is not offered recompute again.
/// Then, if some unit swaps, it moves the swap-ins later, measures again and checks the
/// recomputes again (a swap frees more the later its tensors return): just in time (each unit's
/// tensors come back when its own backward begins), then on demand (each tensor when backward
/// loads it): less memory, longer stalls. When none of these fits, no
/// plan of this planner reaches the budget: plan_units() throws InfeasibleBudget naming the
/// smallest measured peak, the smallest feasible budget.

#include "common/Errors.h"
#include "memory/SlackAnalysis.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace engram::memory {

/// What happens to one unit (nn/Units.h runs it).
struct UnitChoice {
  bool recompute = false;  ///< rerun its forward in backward, keeping only its input
  bool swap = false;       ///< move what it saves to the spill file between forward and backward
  bool operator==(const UnitChoice& o) const { return recompute == o.recompute && swap == o.swap; }
  bool operator!=(const UnitChoice& o) const { return !(*this == o); }
};
/// "keep", "recompute", "swap" or "recompute+swap".
std::string choice_name(const UnitChoice& c);

/// One unit as measured in a step with every unit kept.
struct UnitCosts {
  std::string name;
  double forward_ms = 0;
  double backward_ms = 0;
  std::int64_t saved_bytes = 0;  ///< bytes of the tensors only this unit saves
  std::int64_t input_bytes = 0;  ///< bytes of the unit's input
};

/// The swap store's transfer rates, one per direction, as measured: a spill file's writes go
/// through the page cache and its reads do not, and a GPU's pinned copies differ by direction.
struct SwapRates {
  double out_bytes_per_ms = 1e6;  ///< swap-outs (write to the file, device to host)
  double in_bytes_per_ms = 1e6;   ///< swap-ins (read from the file, host to device)
  /// The same rate both ways (--swap-bandwidth throttles every transfer to one rate).
  static SwapRates both(double bytes_per_ms) { return {bytes_per_ms, bytes_per_ms}; }
};

struct PlannerOptions {
  std::int64_t budget_bytes = 0;  ///< the bound on activation_peak_bytes
  bool allow_recompute = true;
  bool allow_swap = true;
  SwapRates swap_rates;  ///< transfer rates for the slack schedule (each > 0)
  double head_ms = 0;    ///< the step's time outside the units (head, loss)
};

struct MemoryPlan {
  std::vector<UnitChoice> choices;
  std::int64_t budget_bytes = 0;
  std::int64_t activation_peak_bytes = 0;  ///< measured with `choices`
  std::int64_t baseline_peak_bytes = 0;    ///< measured with every unit kept
  int measurements = 0;                    ///< steps the planner measured
  /// Recompute time plus the predicted waits for transfers: the backward's stalls for the
  /// swap-ins and the forward's waits for the swap-outs.
  double estimated_overhead_ms = 0;
  SwapInSchedule schedule;                    ///< for the swapped units
  SwapInTiming timing = SwapInTiming::slack;  ///< how `schedule` places the swap-ins
  std::vector<std::string> log;               ///< each decision and measurement, in order
};

/// A budget below what any plan reaches (a usage error: exit code 2).
class InfeasibleBudget : public UsageError {
 public:
  InfeasibleBudget(std::int64_t budget_bytes, std::int64_t smallest_feasible_bytes);
  std::int64_t budget_bytes, smallest_feasible_bytes;
};

/// Measures the activation peak of one training step run with the given choices, the swapped
/// units' tensors coming back at the schedule's triggers.
using PeakMeasure =
    std::function<std::int64_t(const std::vector<UnitChoice>&, const SwapInSchedule&)>;

/// Chooses (see the file comment). Throws std::invalid_argument for a non-positive budget or
/// transfer rate or no units, InfeasibleBudget when no plan fits.
MemoryPlan plan_units(const std::vector<UnitCosts>& costs, const PlannerOptions& options,
                      const PeakMeasure& measure);

/// The plan without a budget: every unit gets `choice`, swap-ins by the slack schedule; nothing is
/// measured (measurements 0), the overhead is estimated as plan_units() estimates it.
MemoryPlan plan_every_unit(const std::vector<UnitCosts>& costs, const UnitChoice& choice,
                           const SwapRates& rates, double head_ms);

/// The slack schedule of `choices` under `costs` (swapped units transfer what they save, or
/// their input when also recomputed, out and back at `rates`).
SwapInSchedule schedule_for(const std::vector<UnitCosts>& costs,
                            const std::vector<UnitChoice>& choices, const SwapRates& rates,
                            double head_ms, SwapInTiming timing = SwapInTiming::slack);

/// Bytes as the planners' texts write them: "2.9 MiB".
std::string mib(std::int64_t bytes);

/// The plan as a table: each unit's costs, choice and swap-in start point, then the planner's
/// log.
std::string explain(const MemoryPlan& plan, const std::vector<UnitCosts>& costs);

}  // namespace engram::memory
