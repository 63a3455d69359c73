#pragma once
/// \file
/// The memory techniques of a training run, set up in one place for `engram train` and
/// `engram bench memory` (docs/ARCHITECTURE.md) from the list of trainer/MemoryTechnique.h: the
/// store technique's store (ReLU compression, memory/CompressingStore.h, or a registered one),
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
/// before: what it saves for backward) and its input's bytes; the transfer rates, one per
/// direction, are --swap-bandwidth when given, else measured on the workload's own tensors in a
/// step with every unit swapped (measure_swap_rates). Planning runs forward and backward passes
/// on the workload it is given (gradients reset afterwards, no optimizer step; state such as
/// BatchNorm running statistics does move: pass a scratch copy where that matters) inside
/// memory-tracker windows (the tracker is installed if it is not), with the swap store's transfers
/// synchronous, so that a plan is judged by the most memory its schedule can hold. The swap store's
/// prefetch schedule is the plan's (memory/UnitPlanner.h: the slack schedule, or just in time when
/// only that fits).
///
/// Lower-memory algorithm replacement ("algo"): each layer the workload lists
/// (Workload::algorithm_layers, nn/Algorithms.h: the ResNet's convolutions) is measured in
/// isolation with each of its algorithms on the input shape of one step (workspace bytes, forward
/// and backward time, largest difference from the default's results). Without a budget every
/// layer runs its least-workspace algorithm. With a budget, layers keep their default as long as
/// the budget is met without replacing them:
///   algo alone       the default step is measured; while its peak is above the budget, the
///                    layer whose replacement costs the fewest milliseconds per workspace byte
///                    saved is replaced, and the step measured again; once within it, each
///                    replaced layer is given back its default, the costliest first, wherever
///                    the step still measures within the budget (the peak moves between layers
///                    as they are replaced, so early replacements may turn out unneeded);
///   algo with units  the unit planner runs with default algorithms; only when no unit plan
///                    meets the budget (InfeasibleBudget) is every layer replaced and the unit
///                    planner run again, and then each layer is given back its default, the
///                    costliest replacement first, wherever the plan's measured peak stays
///                    within the budget.
/// The replaced layers and the planner's decisions are in explain().
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

  bool recompute() const { return recompute_; }
  bool swap() const { return swap_; }
  bool algo() const { return algo_; }
  /// Recompute or swap: the workload must be cut into units, and plan() must run.
  bool uses_units() const { return recompute_ || swap_; }
  /// Recompute, swap or algo: plan() must run, and apply() changes the workload.
  bool plans() const { return uses_units() || algo_; }
  /// "none", or the techniques joined with '+' ("relu+recompute"; TechniqueChoice::name()).
  const std::string& name() const { return name_; }

  /// The store for nn::RuntimeGuard: the swap store (wrapping the store technique's), else the
  /// store technique's (trainer/MemoryTechnique.h), else nullptr (the plain store).
  memory::ActivationStore* store();
  /// The store technique's store when it is relu's (its statistics), else nullptr.
  memory::CompressingStore* compressing() { return compressing_; }
  memory::SwapStore* swap_store() { return swap_store_.get(); }

  /// Chooses the plan by measuring steps of `workload` on `batch` (see the file comment). Throws
  /// UsageError when the workload is not cut into units (recompute, swap) or has no replaceable
  /// layers (algo), memory::InfeasibleBudget when the budget is below every plan's peak. Does
  /// nothing when !plans(). Leaves `workload`'s layers on their default algorithms.
  void plan(Workload& workload, const std::vector<std::size_t>& batch);
  /// Runs `workload`'s units and layers under the plan from now on (plan() first; `workload`
  /// may be another instance of the planned model).
  void apply(Workload& workload);
  /// Undoes apply(): no unit runner, every layer on its default algorithm.
  void release(Workload& workload);

  /// One replaceable layer as measured and as planned (technique algo).
  struct LayerAlgorithms {
    std::string name;
    std::vector<nn::AlgorithmCost> costs;  ///< one per algorithm, the default first
    std::size_t least = 0;   ///< index in costs of the least workspace (then the least time)
    std::size_t chosen = 0;  ///< index in costs of what the plan runs
  };
  /// The algorithm plan (technique algo).
  struct AlgorithmPlan {
    std::vector<LayerAlgorithms> layers;
    /// Measured steps of the algo planner (with a budget), the activation peak with every
    /// layer on its default and with the plan (0 where not measured).
    int measurements = 0;
    std::int64_t default_peak_bytes = 0, peak_bytes = 0;
    std::vector<std::string> log;  ///< each decision and measurement, in order
  };
  const AlgorithmPlan& algorithm_plan() const { return algorithms_; }
  /// The names of the layers the plan runs on another algorithm than the default.
  std::vector<std::string> replaced_layers() const;

  const memory::MemoryPlan& memory_plan() const { return plan_; }
  const std::vector<memory::UnitCosts>& unit_costs() const { return costs_; }
  /// The swap store's rates the planner used, per direction: --swap-bandwidth both ways, or
  /// measured on the workload's device before planning; zero without swap.
  const memory::SwapRates& swap_rates() const { return swap_rates_; }
  nn::UnitRunner* runner() { return runner_.get(); }
  /// Switches between the slack schedule and on-demand swap-in for the next steps.
  void set_slack_schedule(bool on);
  /// The plan as text (memory::explain).
  std::string explain() const;

 private:
  MemoryOptions options_;
  /// Measures each replaceable layer's algorithms (one step first records their input shapes).
  void profile_algorithms(Workload& workload, const std::vector<std::size_t>& batch);
  /// Sets each layer of `workload` to the plan's algorithm (`defaults`: to its default).
  void set_algorithms(Workload& workload, bool defaults = false) const;
  /// The unit plan under a budget (plan_units with a measuring step), or every unit treated.
  memory::MemoryPlan plan_units_for(Workload& workload, const std::vector<std::size_t>& batch,
                                    double head_ms);
  /// The step's activation peak with the layers as set and `choices` (no units: nullptr).
  std::int64_t measure_peak(Workload& workload, const std::vector<std::size_t>& batch,
                            const std::vector<memory::UnitChoice>* choices,
                            const memory::SwapInSchedule& schedule);
  /// The swap store's rates on this workload's own tensors: the second of two steps with every
  /// unit swapped (the first grows the spill file or the pinned pool), each direction's bytes
  /// over its I/O-thread time (SwapStats), the transfers the slack schedule lays out.
  memory::SwapRates measure_swap_rates(Workload& workload, const std::vector<std::size_t>& batch);
  /// Gives each replaced layer back its default, the costliest replacement first, wherever the
  /// step (under `units`' plan, or without units) still measures within the budget; returns the
  /// last peak measured within it (`peak`: the current one's).
  std::int64_t restore_defaults(Workload& workload, const std::vector<std::size_t>& batch,
                                const memory::MemoryPlan* units, std::int64_t peak);
  /// Budget planning of algo without units, and after the unit planner found no plan.
  void plan_algorithms_alone(Workload& workload, const std::vector<std::size_t>& batch);
  void plan_algorithms_with_units(Workload& workload, const std::vector<std::size_t>& batch,
                                  double head_ms, const memory::InfeasibleBudget& alone);

  bool recompute_ = false, swap_ = false, algo_ = false;
  std::string name_;
  AlgorithmPlan algorithms_;
  std::unique_ptr<memory::ActivationStore> own_store_;  ///< the store technique's
  memory::CompressingStore* compressing_ = nullptr;     ///< own_store_ when it is relu's
  std::unique_ptr<memory::SwapStore> swap_store_;
  std::unique_ptr<nn::UnitRunner> runner_;
  memory::MemoryPlan plan_;
  std::vector<memory::UnitCosts> costs_;
  memory::SwapRates swap_rates_{0, 0};
};

/// One step with every unit of `workload` kept, measured per unit (see the file comment); also
/// returns the step's time outside the units in `head_ms`.
std::vector<memory::UnitCosts> profile_units(Workload& workload,
                                             const std::vector<std::size_t>& batch,
                                             double& head_ms);

}  // namespace engram::trainer
