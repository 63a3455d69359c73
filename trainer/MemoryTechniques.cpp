#include "trainer/MemoryTechniques.h"

#include "common/Errors.h"
#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "trainer/Stepper.h"

#include <ATen/ops/randn.h>

#include <algorithm>
#include <chrono>

namespace engram::trainer {
namespace {

constexpr std::int64_t kRateProbeBytes = std::int64_t{32} << 20;

void reset_gradients(Workload& workload) {
  for (auto& p : workload.parameters()) p.mutable_grad().reset();
}

/// One forward and backward with `runner` (gradients reset before and after), in a tracker
/// window; returns the window, and in `backward_end_ns` (if given) when backward ended.
memory::MemoryWindow measured_step(Workload& workload, const std::vector<std::size_t>& batch,
                                   nn::UnitRunner* runner, memory::ActivationStore* store,
                                   memory::SwapStore* swap,
                                   std::int64_t* backward_end_ns = nullptr) {
  auto& tracker = memory::MemoryTracker::install();
  workload.set_unit_runner(runner);
  reset_gradients(workload);
  tracker.begin_window();
  {
    nn::RuntimeGuard use(store, nullptr);
    forward_backward(workload, batch);
  }
  if (backward_end_ns != nullptr) *backward_end_ns = nn::steady_now_ns();
  if (swap != nullptr) swap->wait_for_transfers();
  memory::MemoryWindow w = tracker.end_window();
  reset_gradients(workload);
  workload.set_unit_runner(nullptr);
  return w;
}

/// Bytes per millisecond of a write and read back through a swap store.
double measure_swap_rate(const MemoryOptions& o) {
  memory::SwapStoreOptions so;
  so.spill_directory = o.spill_directory;
  memory::SwapStore store(so);
  at::Tensor probe = at::randn({kRateProbeBytes / 4});
  const auto start = std::chrono::steady_clock::now();
  store.begin_unit(0, true);
  auto saved = store.save(probe, memory::SavedKind::activation);
  probe.reset();
  store.end_forward();
  store.wait_for_transfers();
  saved->load();
  saved->release();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * static_cast<double>(kRateProbeBytes) / std::max(ms, 1e-3);
}

}  // namespace

MemoryTechniques::MemoryTechniques(MemoryOptions options) : options_(std::move(options)) {
  validate(options_);
  const TechniqueChoice chosen = chosen_techniques(options_.techniques);
  relu_ = chosen.relu;
  recompute_ = chosen.recompute;
  swap_ = chosen.swap;
  if (relu_) {
    compressing_ = std::make_unique<memory::CompressingStore>(
        memory::CompressingStoreOptions{/*cache_decompressed=*/true});
  }
  if (swap_) {
    memory::SwapStoreOptions so;
    so.inner = compressing_.get();
    so.spill_directory = options_.spill_directory;
    so.bandwidth_bytes_per_second = options_.swap_bandwidth;
    swap_store_ = std::make_unique<memory::SwapStore>(so);
  }
}

MemoryTechniques::~MemoryTechniques() = default;

std::string MemoryTechniques::name() const {
  std::string s;
  for (const auto& [on, n] :
       {std::pair<bool, const char*>{relu_, "relu"}, {recompute_, "recompute"}, {swap_, "swap"}}) {
    if (on) s += (s.empty() ? "" : "+") + std::string(n);
  }
  return s.empty() ? "none" : s;
}

memory::ActivationStore* MemoryTechniques::store() {
  if (swap_store_) return swap_store_.get();
  return compressing_.get();
}

std::vector<memory::UnitCosts> profile_units(Workload& workload,
                                             const std::vector<std::size_t>& batch,
                                             double& head_ms) {
  const std::vector<std::string> names = workload.unit_names();
  if (names.empty()) throw UsageError("recompute and swap need a model cut into units");
  nn::UnitRunner runner(nn::UnitPlan(names.size()), nullptr);
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

void MemoryTechniques::plan(Workload& workload, const std::vector<std::size_t>& batch) {
  if (!uses_units()) return;
  double head_ms = 0;
  {
    // Profile with the compressing store when ReLU compression is on: the bytes a unit saves
    // are then the compressed ones.
    nn::RuntimeGuard use(compressing_.get(), nullptr);
    costs_ = profile_units(workload, batch, head_ms);
  }
  swap_bytes_per_ms_ = 0;
  if (swap_) {
    swap_bytes_per_ms_ = options_.swap_bandwidth > 0 ? options_.swap_bandwidth / 1000.0
                                                     : measure_swap_rate(options_);
  }
  const double rate = swap_bytes_per_ms_ > 0 ? swap_bytes_per_ms_ : 1e6;
  if (options_.budget_bytes == 0) {
    // Everything allowed, on every unit.
    plan_ = memory::plan_every_unit(costs_, memory::UnitChoice{recompute_, swap_}, rate, head_ms);
  } else {
    memory::PlannerOptions po;
    po.budget_bytes = options_.budget_bytes;
    po.allow_recompute = recompute_;
    po.allow_swap = swap_;
    po.swap_bytes_per_ms = rate;
    po.head_ms = head_ms;
    const memory::PeakMeasure measure = [&](const std::vector<memory::UnitChoice>& choices,
                                            const memory::SwapInSchedule& schedule) {
      nn::UnitRunner trial(choices, swap_store_.get());
      if (swap_store_) {
        swap_store_->set_prefetch_schedule(
            options_.slack_schedule ? schedule.prefetch_at : std::vector<std::vector<int>>{});
      }
      // Synchronous transfers: the most memory this schedule can hold (see SwapStore).
      if (swap_store_) swap_store_->set_synchronous(true);
      const std::int64_t peak =
          measured_step(workload, batch, &trial, store(), swap_store_.get()).activation_peak_bytes;
      if (swap_store_) swap_store_->set_synchronous(false);
      return peak;
    };
    plan_ = memory::plan_units(costs_, po, measure);
  }
  runner_ = std::make_unique<nn::UnitRunner>(plan_.choices, swap_store_.get());
  set_slack_schedule(options_.slack_schedule);
  if (swap_store_) swap_store_->reset_stats();
  if (compressing_) compressing_->reset_stats();
}

void MemoryTechniques::apply(Workload& workload) {
  if (!uses_units()) return;
  if (!runner_) throw std::logic_error("MemoryTechniques::apply before plan()");
  workload.set_unit_runner(runner_.get());
}

void MemoryTechniques::set_slack_schedule(bool on) {
  options_.slack_schedule = on;
  if (swap_store_) {
    swap_store_->set_prefetch_schedule(on ? plan_.schedule.prefetch_at
                                          : std::vector<std::vector<int>>{});
  }
}

std::string MemoryTechniques::explain() const {
  if (!uses_units()) return "memory plan: " + name() + " (no units to plan)\n";
  return memory::explain(plan_, costs_);
}

}  // namespace engram::trainer
