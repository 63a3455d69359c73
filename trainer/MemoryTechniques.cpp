#include "trainer/MemoryTechniques.h"

#include "common/Errors.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "trainer/Device.h"
#include "trainer/MemoryCap.h"
#include "trainer/Stepper.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace engram::trainer {
namespace {

void reset_gradients(Workload& workload) {
  for (auto& p : workload.parameters()) p.mutable_grad().reset();
}

/// The device `workload`'s parameters are on (the CPU without parameters).
c10::Device workload_device(Workload& workload) { return parameters_device(workload.parameters()); }

/// The tracker of `device`'s memory: the CPU's, or the CUDA allocator's (installed if it is
/// not; figures from before its install are not counted, which leaves a step's own peaks exact).
/// Throws std::runtime_error when the CUDA allocator's trace hook is not attached: the device's
/// peaks could not be measured then.
memory::CudaMemoryTracker& cuda_tracker(const c10::Device& device) {
  memory::CudaMemoryTracker& tracker = memory::CudaMemoryTracker::install(device.index());
  if (!memory::CudaMemoryTracker::hooked())
    throw std::runtime_error("planning on " + device.str() +
                             " measures the CUDA allocator's peaks, and its trace hook is not "
                             "attached (" +
                             memory::CudaMemoryTracker::hook_status() + ")");
  return tracker;
}

/// Where a unit runner reads live bytes and waits for kernels on `device` (nn::UnitProbe): the
/// CPU's defaults, or the CUDA tracker's live bytes and a device synchronize.
nn::UnitProbe probe_for(const c10::Device& device) {
  if (!device.is_cuda()) return {};
  memory::CudaMemoryTracker* tracker = &cuda_tracker(device);
  return nn::UnitProbe{[tracker] { return tracker->live_bytes(); },
                       [device] { synchronize(device); }};
}

/// One forward and backward with `runner` (gradients reset before and after), in a window of the
/// tracker of the workload's device; returns the window, in `backward_end_ns` (if given) when
/// backward ended (its kernels, on a device), and in `reserved_at_peak` (if given, on a device)
/// the allocator's reserved bytes at the step's live peak.
memory::MemoryWindow measured_step(Workload& workload, const std::vector<std::size_t>& batch,
                                   nn::UnitRunner* runner, memory::ActivationStore* store,
                                   memory::SwapStore* swap, std::int64_t* backward_end_ns = nullptr,
                                   std::int64_t* reserved_at_peak = nullptr) {
  const c10::Device device = workload_device(workload);
  memory::CudaMemoryTracker* on_device = device.is_cuda() ? &cuda_tracker(device) : nullptr;
  auto& tracker = memory::MemoryTracker::install();
  workload.set_unit_runner(runner);
  reset_gradients(workload);
  if (on_device != nullptr) {
    on_device->begin_window();
  } else {
    tracker.begin_window();
  }
  {
    nn::RuntimeGuard use(store, nullptr);
    forward_backward(workload, batch);
  }
  synchronize(device);
  if (backward_end_ns != nullptr) *backward_end_ns = nn::steady_now_ns();
  if (swap != nullptr) swap->wait_for_transfers();
  memory::MemoryWindow w;
  if (on_device != nullptr) {
    // Autograd allocates the gradients, which the layers' retag reaches on the CPU only: each
    // is counted as a gradient from its first byte (the window applies the final tag).
    for (const auto& p : workload.parameters()) {
      if (p.grad().defined()) on_device->retag(p.grad(), memory::Tag::gradient);
    }
    memory::DeviceMemoryWindow d = on_device->end_window();
    if (reserved_at_peak != nullptr) *reserved_at_peak = d.reserved_at_peak_bytes;
    w = std::move(d);
  } else {
    w = tracker.end_window();
  }
  reset_gradients(workload);
  workload.set_unit_runner(nullptr);
  return w;
}

}  // namespace

MemoryTechniques::MemoryTechniques(MemoryOptions options) : options_(std::move(options)) {
  validate(options_);
  const TechniqueChoice chosen(options_.techniques);
  recompute_ = chosen.has("recompute");
  swap_ = chosen.has("swap");
  algo_ = chosen.has(TechniqueKind::algorithms);
  name_ = chosen.name();
  if (const MemoryTechniqueInfo* t = chosen.store()) {
    own_store_ = t->make_store(options_);
    if (!own_store_) throw std::logic_error("memory technique '" + t->name + "' made no store");
    compressing_ = dynamic_cast<memory::CompressingStore*>(own_store_.get());
  }
  if (swap_) {
    memory::SwapStoreOptions so;
    so.inner = own_store_.get();
    so.spill_directory = options_.spill_directory;
    so.bandwidth_bytes_per_second = options_.swap_bandwidth;
    swap_store_ = std::make_unique<memory::SwapStore>(so);
  }
}

MemoryTechniques::~MemoryTechniques() = default;

memory::ActivationStore* MemoryTechniques::store() {
  if (swap_store_) return swap_store_.get();
  return own_store_.get();
}

std::vector<memory::UnitCosts> profile_units(Workload& workload,
                                             const std::vector<std::size_t>& batch,
                                             double& head_ms) {
  const std::vector<std::string> names = workload.unit_names();
  if (names.empty()) throw UsageError("recompute and swap need a model cut into units");
  nn::UnitRunner runner(nn::UnitPlan(names.size()), nullptr, probe_for(workload_device(workload)));
  std::int64_t backward_end = 0;
  // The second step is measured: the first warms up allocations and caches. The caller's store
  // stays current (nullptr keeps it).
  for (int step = 0; step < 2; ++step) {
    measured_step(workload, batch, &runner, nullptr, nullptr, &backward_end);
  }
  const nn::UnitTimings t = runner.timings();

  const std::size_t n = names.size();
  std::vector<memory::UnitCosts> costs(n);
  for (std::size_t u = 0; u < n; ++u) {
    memory::UnitCosts& c = costs[u];
    c.name = names[u];
    c.forward_ms = static_cast<double>(t.forward_ns[u]) / 1e6;
    const std::int64_t end = u == 0 ? backward_end : t.backward_begin_ns[u - 1];
    c.backward_ms =
        t.backward_begin_ns[u] >= 0 ? std::max<double>(0, end - t.backward_begin_ns[u]) / 1e6 : 0;
    const std::int64_t before = u == 0 ? t.live_bytes_before : t.live_bytes_after[u - 1];
    c.saved_bytes = std::max<std::int64_t>(0, t.live_bytes_after[u] - before);
    c.input_bytes = t.input_bytes[u];
  }
  head_ms = t.backward_begin_ns[n - 1] >= 0
                ? std::max<double>(0, t.backward_begin_ns[n - 1] - t.forward_end_ns) / 1e6
                : 0;
  return costs;
}

namespace {

double total_ms(const nn::AlgorithmCost& c) { return c.forward_ms + c.backward_ms; }

/// Workspace bytes a layer's least-workspace algorithm saves over its default (0: none).
std::int64_t saving(const MemoryTechniques::LayerAlgorithms& l) {
  return l.costs[0].workspace_bytes - l.costs[l.least].workspace_bytes;
}

/// Milliseconds per step that replacing the layer's default costs (may be negative).
double extra_ms(const MemoryTechniques::LayerAlgorithms& l) {
  return total_ms(l.costs[l.least]) - total_ms(l.costs[0]);
}

/// Puts every layer whose least-workspace algorithm saves workspace on it, the others on their
/// default; returns whether any layer was replaced.
bool replace_every_saving_layer(std::vector<MemoryTechniques::LayerAlgorithms>& layers) {
  bool any = false;
  for (auto& l : layers) {
    l.chosen = saving(l) > 0 ? l.least : 0;
    any = any || l.chosen != 0;
  }
  return any;
}

}  // namespace

void MemoryTechniques::profile_algorithms(Workload& workload,
                                          const std::vector<std::size_t>& batch) {
  const auto named = workload.algorithm_layers();
  if (named.empty()) {
    throw InvalidOption("memory.techniques",
                        "algo replaces the algorithms of layers that have several (the "
                        "convolutions of nn/Conv2d), and this model has none");
  }
  algorithms_ = AlgorithmPlan{};
  for (const auto& named_layer : named) {
    named_layer.layer->set_algorithm(named_layer.layer->algorithms().front());
  }
  {
    // One step records each layer's input shape.
    nn::RuntimeGuard use(own_store_.get(), nullptr);
    measured_step(workload, batch, nullptr, own_store_.get(), nullptr);
  }
  for (const auto& [name, layer] : named) {
    LayerAlgorithms l;
    l.name = name;
    l.costs = layer->measure_algorithms(/*repeats=*/3);
    for (std::size_t a = 1; a < l.costs.size(); ++a) {
      const auto& c = l.costs[a];
      const auto& best = l.costs[l.least];
      if (c.workspace_bytes < best.workspace_bytes ||
          (c.workspace_bytes == best.workspace_bytes && total_ms(c) < total_ms(best))) {
        l.least = a;
      }
    }
    algorithms_.layers.push_back(std::move(l));
  }
}

void MemoryTechniques::set_algorithms(Workload& workload, bool defaults) const {
  const auto named = workload.algorithm_layers();
  if (named.size() != algorithms_.layers.size())
    throw std::logic_error("MemoryTechniques: the workload's layers differ from the planned ones");
  for (std::size_t i = 0; i < named.size(); ++i) {
    const LayerAlgorithms& l = algorithms_.layers[i];
    if (named[i].name != l.name) {
      throw std::logic_error("MemoryTechniques: layer '" + named[i].name + "' where '" + l.name +
                             "' was planned");
    }
    named[i].layer->set_algorithm(l.costs[defaults ? 0 : l.chosen].algorithm);
  }
}

std::vector<std::string> MemoryTechniques::replaced_layers() const {
  std::vector<std::string> names;
  for (const auto& l : algorithms_.layers) {
    if (l.chosen != 0) names.push_back(l.name);
  }
  return names;
}

std::int64_t MemoryTechniques::measure_peak(Workload& workload,
                                            const std::vector<std::size_t>& batch,
                                            const std::vector<memory::UnitChoice>* choices,
                                            const memory::SwapInSchedule& schedule) {
  // Under a device cap (trainer/MemoryCap.h): each plan measured from an emptied cache, its
  // reserved bytes at the live peak held to the cap as well as its live bytes.
  const c10::Device device = workload_device(workload);
  const bool against_cap = options_.reserved_budget > 0 && device.is_cuda();
  if (against_cap) release_cached_device_memory(device);
  std::int64_t reserved = 0;
  std::int64_t* reserved_at_peak = against_cap ? &reserved : nullptr;
  std::int64_t peak = 0;
  if (choices == nullptr) {
    peak = measured_step(workload, batch, nullptr, store(), nullptr, nullptr, reserved_at_peak)
               .activation_peak_bytes;
  } else {
    nn::UnitRunner trial(*choices, swap_store_.get());
    if (swap_store_) {
      swap_store_->set_prefetch_schedule(options_.slack_schedule ? schedule.prefetch_at
                                                                 : std::vector<std::vector<int>>{});
      // Synchronous transfers: the most memory this schedule can hold (see SwapStore).
      swap_store_->set_synchronous(true);
    }
    peak = measured_step(workload, batch, &trial, store(), swap_store_.get(), nullptr,
                         reserved_at_peak)
               .activation_peak_bytes;
    if (swap_store_) swap_store_->set_synchronous(false);
  }
  return against_cap
             ? peak_against_cap(peak, reserved, options_.reserved_budget, options_.budget_bytes)
             : peak;
}

memory::MemoryPlan MemoryTechniques::plan_units_for(Workload& workload,
                                                    const std::vector<std::size_t>& batch,
                                                    double head_ms) {
  // Without swap no transfer is scheduled; any positive rates do.
  const memory::SwapRates rates = swap_ ? swap_rates_ : memory::SwapRates{};
  if (options_.budget_bytes == 0) {
    // Everything allowed, on every unit.
    return memory::plan_every_unit(costs_, memory::UnitChoice{recompute_, swap_}, rates, head_ms);
  }
  memory::PlannerOptions po;
  po.budget_bytes = options_.budget_bytes;
  po.allow_recompute = recompute_;
  po.allow_swap = swap_;
  po.swap_rates = rates;
  po.head_ms = head_ms;
  const memory::PeakMeasure measure = [&](const std::vector<memory::UnitChoice>& choices,
                                          const memory::SwapInSchedule& schedule) {
    return measure_peak(workload, batch, &choices, schedule);
  };
  return memory::plan_units(costs_, po, measure);
}

void MemoryTechniques::plan_algorithms_alone(Workload& workload,
                                             const std::vector<std::size_t>& batch) {
  AlgorithmPlan& a = algorithms_;
  const std::int64_t budget = options_.budget_bytes;
  set_algorithms(workload);
  std::int64_t peak = measure_peak(workload, batch, nullptr, {});
  ++a.measurements;
  a.default_peak_bytes = peak;
  a.log.push_back("every layer on its default: activation peak " + std::to_string(peak) +
                  " bytes (" + memory::mib(peak) + ")");
  // Cheapest milliseconds per byte saved first.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    if (saving(a.layers[i]) > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return extra_ms(a.layers[x]) / static_cast<double>(saving(a.layers[x])) <
           extra_ms(a.layers[y]) / static_cast<double>(saving(a.layers[y]));
  });
  for (std::size_t i : order) {
    if (peak <= budget) break;
    LayerAlgorithms& l = a.layers[i];
    l.chosen = l.least;
    set_algorithms(workload);
    peak = measure_peak(workload, batch, nullptr, {});
    ++a.measurements;
    std::ostringstream line;
    line << "above the budget: " << l.name << " " << l.costs[0].algorithm << " -> "
         << l.costs[l.least].algorithm << " (workspace -" << memory::mib(saving(l)) << ", "
         << (extra_ms(l) >= 0 ? "+" : "") << extra_ms(l) << " ms): activation peak " << peak
         << " bytes (" << memory::mib(peak) << ")";
    a.log.push_back(line.str());
  }
  if (peak > budget) {
    a.peak_bytes = peak;
    throw memory::InfeasibleBudget(budget, peak);
  }
  // The peak moves from layer to layer as they are replaced: some replacements may no longer be
  // needed once later ones are made.
  a.peak_bytes = restore_defaults(workload, batch, nullptr, peak);
}

std::int64_t MemoryTechniques::restore_defaults(Workload& workload,
                                                const std::vector<std::size_t>& batch,
                                                const memory::MemoryPlan* units,
                                                std::int64_t peak) {
  AlgorithmPlan& a = algorithms_;
  const std::int64_t budget = options_.budget_bytes;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    if (a.layers[i].chosen != 0) order.push_back(i);
  }
  // The costliest replacement first.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return extra_ms(a.layers[x]) > extra_ms(a.layers[y]);
  });
  for (std::size_t i : order) {
    LayerAlgorithms& l = a.layers[i];
    l.chosen = 0;
    set_algorithms(workload);
    const std::int64_t p = units != nullptr
                               ? measure_peak(workload, batch, &units->choices, units->schedule)
                               : measure_peak(workload, batch, nullptr, {});
    ++a.measurements;
    const bool fits = p <= budget;
    a.log.push_back(l.name + " back on " + l.costs[0].algorithm + ": activation peak " +
                    std::to_string(p) + " bytes, " +
                    (fits ? "within the budget (kept default)"
                          : "above the budget (stays " + l.costs[l.least].algorithm + ")"));
    if (fits) {
      peak = p;
    } else {
      l.chosen = l.least;
    }
  }
  set_algorithms(workload);
  a.log.push_back("within the budget of " + std::to_string(budget) + " bytes");
  return peak;
}

void MemoryTechniques::plan_algorithms_with_units(Workload& workload,
                                                  const std::vector<std::size_t>& batch,
                                                  double head_ms,
                                                  const memory::InfeasibleBudget& alone) {
  AlgorithmPlan& a = algorithms_;
  const std::int64_t budget = options_.budget_bytes;
  a.default_peak_bytes = alone.smallest_feasible_bytes;
  a.log.push_back("recompute/swap with every layer on its default reach at best " +
                  std::to_string(alone.smallest_feasible_bytes) + " bytes (" +
                  memory::mib(alone.smallest_feasible_bytes) +
                  "), above the budget: every layer on its least-workspace algorithm, and the "
                  "units planned again");
  if (!replace_every_saving_layer(a.layers)) throw alone;  // none has a smaller algorithm
  set_algorithms(workload);
  plan_ = plan_units_for(workload, batch, head_ms);  // InfeasibleBudget if this fails too
  std::int64_t peak = plan_.activation_peak_bytes;
  a.log.push_back("units planned with every layer replaced: activation peak " +
                  std::to_string(peak) + " bytes (" + memory::mib(peak) + ")");
  // Give back defaults where the plan still fits.
  a.peak_bytes = restore_defaults(workload, batch, &plan_, peak);
  plan_.activation_peak_bytes = a.peak_bytes;
}

memory::SwapRates MemoryTechniques::measure_swap_rates(Workload& workload,
                                                       const std::vector<std::size_t>& batch) {
  const std::vector<memory::UnitChoice> every(costs_.size(), memory::UnitChoice{false, true});
  for (int step = 0; step < 2; ++step) {
    swap_store_->reset_stats();
    // No prefetch schedule: each tensor read when backward loads it.
    measure_peak(workload, batch, &every, memory::SwapInSchedule{});
  }
  const memory::SwapStats s = swap_store_->stats();
  swap_store_->reset_stats();
  const auto per_ms = [](std::int64_t bytes, std::int64_t ns, double otherwise) {
    return bytes > 0 && ns > 0 ? static_cast<double>(bytes) / (static_cast<double>(ns) / 1e6)
                               : otherwise;
  };
  // A workload whose units save nothing moves nothing: any rate schedules it.
  const memory::SwapRates unmoved;
  return {per_ms(s.swapped_out_bytes, s.swap_out_ns, unmoved.out_bytes_per_ms),
          per_ms(s.swapped_in_bytes, s.swap_in_ns, unmoved.in_bytes_per_ms)};
}

void MemoryTechniques::plan(Workload& workload, const std::vector<std::size_t>& batch) {
  if (!plans()) return;
  if (algo_) profile_algorithms(workload, batch);
  double head_ms = 0;
  if (uses_units()) {
    {
      // Profile with the store technique's store (ReLU compression's): the bytes a unit saves
      // are then the ones that store keeps.
      nn::RuntimeGuard use(own_store_.get(), nullptr);
      costs_ = profile_units(workload, batch, head_ms);
    }
    swap_rates_ = {0, 0};
    if (swap_) {
      swap_rates_ = options_.swap_bandwidth > 0
                        ? memory::SwapRates::both(options_.swap_bandwidth / 1000.0)
                        : measure_swap_rates(workload, batch);
    }
  }
  if (algo_ && options_.budget_bytes == 0) {
    // No budget: every layer on its least-workspace algorithm, where that saves workspace.
    replace_every_saving_layer(algorithms_.layers);
  }
  try {
    if (!uses_units()) {
      if (options_.budget_bytes > 0) plan_algorithms_alone(workload, batch);
    } else if (!algo_ || options_.budget_bytes == 0) {
      plan_ = plan_units_for(workload, batch, head_ms);
    } else {
      try {
        set_algorithms(workload);  // every layer on its default
        plan_ = plan_units_for(workload, batch, head_ms);
        algorithms_.log.push_back(
            "recompute/swap meet the budget with every layer on its default: nothing replaced");
      } catch (const memory::InfeasibleBudget& alone) {
        plan_algorithms_with_units(workload, batch, head_ms, alone);
      }
    }
  } catch (...) {
    // The planning workload's layers go back to their defaults, planned or not.
    if (algo_) set_algorithms(workload, /*defaults=*/true);
    throw;
  }
  if (algo_) set_algorithms(workload, /*defaults=*/true);
  if (uses_units()) {
    runner_ = std::make_unique<nn::UnitRunner>(plan_.choices, swap_store_.get());
    set_slack_schedule(options_.slack_schedule);
  }
  if (swap_store_) swap_store_->reset_stats();
  if (compressing_) compressing_->reset_stats();
}

void MemoryTechniques::apply(Workload& workload) {
  if (!plans()) return;
  if (algo_) set_algorithms(workload);
  if (!uses_units()) return;
  if (!runner_) throw std::logic_error("MemoryTechniques::apply before plan()");
  workload.set_unit_runner(runner_.get());
}

void MemoryTechniques::release(Workload& workload) {
  if (uses_units()) workload.set_unit_runner(nullptr);
  if (algo_ && !algorithms_.layers.empty()) set_algorithms(workload, /*defaults=*/true);
}

void MemoryTechniques::set_slack_schedule(bool on) {
  options_.slack_schedule = on;
  if (swap_store_) {
    swap_store_->set_prefetch_schedule(on ? plan_.schedule.prefetch_at
                                          : std::vector<std::vector<int>>{});
  }
}

std::string MemoryTechniques::explain() const {
  if (!plans()) return "memory plan: " + name() + " (no units to plan)\n";
  std::ostringstream s;
  if (uses_units()) s << memory::explain(plan_, costs_);
  if (!algo_) return s.str();
  const AlgorithmPlan& a = algorithms_;
  s << "algorithm plan: " << replaced_layers().size() << " of " << a.layers.size()
    << " layers replaced";
  if (options_.budget_bytes > 0) {
    s << "; budget " << options_.budget_bytes << " bytes, " << a.measurements << " measured steps";
  } else {
    s << "; no budget, every layer on its least-workspace algorithm";
  }
  s << "\n  layer                  algorithm  workspace MiB  forward ms  backward ms  max abs diff"
       "  max rel diff\n";
  char line[200];
  for (const auto& l : a.layers) {
    for (std::size_t i = 0; i < l.costs.size(); ++i) {
      const auto& c = l.costs[i];
      std::snprintf(line, sizeof line, "  %-22s %-9s %13.2f %11.2f %12.2f %13.2e %13.2e%s\n",
                    i == 0 ? l.name.c_str() : "", c.algorithm.c_str(),
                    static_cast<double>(c.workspace_bytes) / 1048576.0, c.forward_ms, c.backward_ms,
                    c.max_abs_diff, c.max_rel_diff, i == l.chosen ? "  <- chosen" : "");
      s << line;
    }
  }
  if (!a.log.empty()) {
    s << "  how the planner got there:\n";
    for (const auto& entry : a.log) s << "    " << entry << "\n";
  }
  return s.str();
}

}  // namespace engram::trainer
