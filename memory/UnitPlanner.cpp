#include "memory/UnitPlanner.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <numeric>
#include <sstream>

namespace engram::memory {

std::string mib(std::int64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024.0)
    << " MiB";
  return s.str();
}

namespace {

std::string choices_text(const std::vector<UnitChoice>& choices) {
  std::string s;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) s += ",";
    s += choice_name(choices[i]);
  }
  return s;
}

/// The compute's waits for transfers: the forward's for the swap-outs, the backward's (the
/// predicted stalls) for the swap-ins.
double total_stall(const SwapInSchedule& s) {
  return std::accumulate(s.predicted_stall_ms.begin(), s.predicted_stall_ms.end(), 0.0) +
         std::accumulate(s.forward_wait_ms.begin(), s.forward_wait_ms.end(), 0.0);
}

/// What a plan is estimated to cost: recompute time plus the waits for transfers the schedule
/// predicts.
double overhead_ms(const std::vector<UnitCosts>& costs, const std::vector<UnitChoice>& choices,
                   const PlannerOptions& o) {
  double ms = 0;
  for (std::size_t i = 0; i < costs.size(); ++i) {
    if (choices[i].recompute) ms += costs[i].forward_ms;
  }
  return ms + total_stall(schedule_for(costs, choices, o.swap_rates, o.head_ms));
}

/// The upgrades of a unit from its current choice `c` (see the file comment of the header);
/// `may_recompute` is false for a unit that measured lower without its recompute.
std::vector<UnitChoice> upgrades(const UnitChoice& c, const PlannerOptions& o, bool may_recompute) {
  std::vector<UnitChoice> next;
  if (!c.recompute && !c.swap) {
    if (o.allow_recompute && may_recompute) next.push_back({true, false});
    if (o.allow_swap) next.push_back({false, true});
  } else if (c.recompute && !c.swap && o.allow_swap) {
    next.push_back({true, true});
  }
  return next;
}

/// Bytes an upgrade is estimated to free.
std::int64_t freed(const UnitCosts& cost, const UnitChoice& from, const UnitChoice& to) {
  if (!from.recompute && !from.swap) return cost.saved_bytes;
  if (from.recompute && to.swap) return cost.input_bytes;
  return 0;
}

}  // namespace

std::string choice_name(const UnitChoice& c) {
  if (c.recompute && c.swap) return "recompute+swap";
  if (c.recompute) return "recompute";
  if (c.swap) return "swap";
  return "keep";
}

InfeasibleBudget::InfeasibleBudget(std::int64_t budget, std::int64_t smallest)
    : UsageError("memory budget " + std::to_string(budget) +
                 " bytes is below the smallest feasible budget, " + std::to_string(smallest) +
                 " bytes (" + mib(smallest) + ": the activation peak measured with every unit " +
                 "swapped or recomputed as far as the allowed techniques go)"),
      budget_bytes(budget),
      smallest_feasible_bytes(smallest) {}

SwapInSchedule schedule_for(const std::vector<UnitCosts>& costs,
                            const std::vector<UnitChoice>& choices, const SwapRates& rates,
                            double head_ms, SwapInTiming timing) {
  StepTimeline t;
  t.head_ms = head_ms;
  for (std::size_t i = 0; i < costs.size(); ++i) {
    const UnitChoice& c = choices[i];
    t.forward_ms.push_back(costs[i].forward_ms);
    // A recomputed unit's backward includes its rerun.
    t.backward_ms.push_back(costs[i].backward_ms + (c.recompute ? costs[i].forward_ms : 0.0));
    double out = 0, in = 0;
    if (c.swap) {
      const auto bytes =
          static_cast<double>(c.recompute ? costs[i].input_bytes : costs[i].saved_bytes);
      // A swapped unit always has a (possibly tiny) transfer, so the schedule sees it.
      out = std::max(bytes / rates.out_bytes_per_ms, 1e-6);
      in = std::max(bytes / rates.in_bytes_per_ms, 1e-6);
    }
    t.swap_out_ms.push_back(out);
    t.swap_in_ms.push_back(in);
  }
  return schedule_swap_ins(t, timing);
}

MemoryPlan plan_units(const std::vector<UnitCosts>& costs, const PlannerOptions& o,
                      const PeakMeasure& measure) {
  if (costs.empty()) throw UsageError("memory planner: no units to plan");
  if (o.budget_bytes <= 0) {
    throw UsageError("memory budget must be a positive number of bytes, not " +
                     std::to_string(o.budget_bytes));
  }
  for (const double rate : {o.swap_rates.out_bytes_per_ms, o.swap_rates.in_bytes_per_ms}) {
    if (!(rate > 0) || !std::isfinite(rate)) {
      throw UsageError("memory planner: the swap transfer rates must be positive");
    }
  }
  if (!o.allow_recompute && !o.allow_swap) {
    throw UsageError("memory planner: neither recompute nor swap is allowed");
  }
  MemoryPlan plan;
  plan.budget_bytes = o.budget_bytes;
  plan.choices.assign(costs.size(), UnitChoice{});
  const auto measured = [&](const std::string& why) {
    const std::int64_t peak = measure(
        plan.choices, schedule_for(costs, plan.choices, o.swap_rates, o.head_ms, plan.timing));
    ++plan.measurements;
    plan.log.push_back(std::string("measured ") + why + ": activation peak " +
                       std::to_string(peak) + " bytes (" + mib(peak) + ") with " +
                       choices_text(plan.choices));
    return peak;
  };
  std::int64_t peak = measured("every unit kept");
  plan.baseline_peak_bytes = peak;
  std::int64_t smallest = peak;
  std::vector<bool> recompute_refused(costs.size(), false);
  bool recomputes_checked = false;
  while (peak > o.budget_bytes) {
    // Upgrade, cheapest per byte first, until the estimate fits; then measure.
    std::int64_t estimate = peak;
    bool any = false;
    while (estimate > o.budget_bytes) {
      const double before = overhead_ms(costs, plan.choices, o);
      double best_score = std::numeric_limits<double>::infinity();
      std::size_t best_unit = 0;
      UnitChoice best_choice;
      std::int64_t best_freed = 0;
      double best_cost = 0;
      for (std::size_t i = 0; i < costs.size(); ++i) {
        for (const UnitChoice& next : upgrades(plan.choices[i], o, !recompute_refused[i])) {
          const std::int64_t bytes = freed(costs[i], plan.choices[i], next);
          std::vector<UnitChoice> trial = plan.choices;
          trial[i] = next;
          const double cost = std::max(0.0, overhead_ms(costs, trial, o) - before);
          // Upgrades that free nothing measurable still count, behind all others.
          const double score =
              bytes > 0 ? cost / static_cast<double>(bytes) : std::numeric_limits<double>::max();
          if (score < best_score) {
            best_score = score;
            best_unit = i;
            best_choice = next;
            best_freed = bytes;
            best_cost = cost;
          }
        }
      }
      if (std::isinf(best_score)) break;  // every unit has its last upgrade
      std::ostringstream line;
      line << "upgrade " << costs[best_unit].name << ": " << choice_name(plan.choices[best_unit])
           << " -> " << choice_name(best_choice) << " (estimated " << std::fixed
           << std::setprecision(2) << best_cost << " ms for " << mib(best_freed) << ")";
      plan.log.push_back(line.str());
      plan.choices[best_unit] = best_choice;
      estimate -= best_freed;
      any = true;
    }
    if (any) {
      peak = measured("after upgrades");
    } else if (!recomputes_checked) {
      // Every unit has its last upgrade. A recompute's rerun can raise the peak it was meant to
      // lower (the unit's forward tensors live again beside the backward's), so each recomputed
      // unit is measured without its recompute, and keeps it only if that measures no lower.
      // Again after each move of the swap-ins: a swap frees more the later its tensors return.
      recomputes_checked = true;
      for (std::size_t i = 0; i < costs.size() && peak > o.budget_bytes; ++i) {
        if (!plan.choices[i].recompute) continue;
        const UnitChoice was = plan.choices[i];
        plan.choices[i].recompute = false;
        const std::int64_t p = measured(costs[i].name + " without its recompute");
        smallest = std::min(smallest, p);
        if (p < peak) {
          peak = p;
          recompute_refused[i] = true;
          plan.log.push_back("undo " + costs[i].name + "'s recompute: " + choice_name(was) +
                             " -> " + choice_name(plan.choices[i]) + " measures lower");
        } else {
          plan.choices[i] = was;
        }
      }
    } else {
      const bool swaps = std::any_of(plan.choices.begin(), plan.choices.end(),
                                     [](const UnitChoice& c) { return c.swap; });
      if (!swaps || plan.timing == SwapInTiming::on_demand) {
        throw InfeasibleBudget(o.budget_bytes, smallest);
      }
      plan.timing =
          plan.timing == SwapInTiming::slack ? SwapInTiming::just_in_time : SwapInTiming::on_demand;
      plan.log.push_back(std::string("every unit has its last upgrade: swap-ins ") +
                         timing_name(plan.timing));
      peak = measured("with the later swap-ins");
      recomputes_checked = false;
    }
    smallest = std::min(smallest, peak);
  }
  plan.activation_peak_bytes = peak;
  plan.schedule = schedule_for(costs, plan.choices, o.swap_rates, o.head_ms, plan.timing);
  plan.estimated_overhead_ms =
      overhead_ms(costs, plan.choices, o) +
      (plan.timing != SwapInTiming::slack
           ? total_stall(plan.schedule) -
                 total_stall(schedule_for(costs, plan.choices, o.swap_rates, o.head_ms))
           : 0.0);
  return plan;
}

MemoryPlan plan_every_unit(const std::vector<UnitCosts>& costs, const UnitChoice& choice,
                           const SwapRates& rates, double head_ms) {
  PlannerOptions o;
  o.swap_rates = rates;
  o.head_ms = head_ms;
  MemoryPlan plan;
  plan.choices.assign(costs.size(), choice);
  plan.schedule = schedule_for(costs, plan.choices, rates, head_ms);
  plan.estimated_overhead_ms = overhead_ms(costs, plan.choices, o);
  plan.log.push_back("no budget: every unit " + choice_name(choice));
  return plan;
}

std::string explain(const MemoryPlan& plan, const std::vector<UnitCosts>& costs) {
  std::ostringstream s;
  if (plan.measurements > 0) {
    s << "memory plan: budget " << plan.budget_bytes << " bytes (" << mib(plan.budget_bytes)
      << "), activation peak measured " << plan.activation_peak_bytes << " bytes ("
      << mib(plan.activation_peak_bytes) << "), every unit kept " << plan.baseline_peak_bytes
      << " bytes; " << plan.measurements << " measured steps;";
  } else {
    s << "memory plan: no budget, every unit treated;";
  }
  s << " swap-ins "
    << (plan.timing == SwapInTiming::slack          ? "by the slack schedule"
        : plan.timing == SwapInTiming::just_in_time ? "just in time (each unit at its backward)"
                                                    : "on demand (each tensor when loaded)")
    << "; estimated overhead " << std::fixed << std::setprecision(1) << plan.estimated_overhead_ms
    << " ms per step\n";
  s << "  unit          forward ms  backward ms  saves MiB  input MiB  choice           "
       "swap-in starts at         slack ms  predicted stall ms  forward wait ms\n";
  const std::size_t n = costs.size();
  for (std::size_t i = 0; i < n; ++i) {
    const UnitChoice& c = plan.choices[i];
    std::string start = "-";
    if (c.swap && i < plan.schedule.trigger.size()) {
      const int t = plan.schedule.trigger[i];
      start = t == static_cast<int>(n) ? "end of forward"
                                       : "backward of " + costs[static_cast<std::size_t>(t)].name;
    }
    const auto at = [&](const std::vector<double>& v) { return i < v.size() ? v[i] : 0.0; };
    s << "  " << std::left << std::setw(14) << costs[i].name << std::right << std::setw(10)
      << std::setprecision(2) << costs[i].forward_ms << std::setw(13) << costs[i].backward_ms
      << std::setw(11) << static_cast<double>(costs[i].saved_bytes) / 1048576.0 << std::setw(11)
      << static_cast<double>(costs[i].input_bytes) / 1048576.0 << "  " << std::left << std::setw(17)
      << choice_name(c) << std::setw(26) << start << std::right << std::setw(8)
      << (c.swap ? at(plan.schedule.slack_ms) : 0.0) << std::setw(20)
      << (c.swap ? at(plan.schedule.predicted_stall_ms) : 0.0) << std::setw(17)
      << (c.swap ? at(plan.schedule.forward_wait_ms) : 0.0) << "\n";
  }
  s << "  how the planner got there:\n";
  for (const auto& line : plan.log) s << "    " << line << "\n";
  return s.str();
}

}  // namespace engram::memory
