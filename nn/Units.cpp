#include "nn/Units.h"

#include "memory/MemoryTracker.h"
#include "memory/SwapStore.h"

#include <ATen/core/grad_mode.h>

#include <chrono>
#include <stdexcept>

namespace engram::nn {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

/// The clock reading after the probe's synchronize, if it has one.
std::int64_t probed_now_ns(const UnitProbe& probe) {
  if (probe.synchronize) probe.synchronize();
  return steady_now_ns();
}

}  // namespace

UnitRunner::UnitRunner(UnitPlan plan, memory::SwapStore* swap, UnitProbe probe)
    : plan_(std::move(plan)),
      swap_(swap),
      probe_(std::make_shared<const UnitProbe>(std::move(probe))),
      timings_(std::make_shared<UnitTimings>()) {
  for (const auto& t : plan_) {
    if (t.swap && swap_ == nullptr) {
      throw std::invalid_argument("UnitRunner: a swapped unit needs a swap store");
    }
  }
}

at::Tensor UnitRunner::forward(const std::vector<Unit>& units, const at::Tensor& input) {
  if (units.size() != plan_.size()) {
    throw std::invalid_argument("UnitRunner: " + std::to_string(units.size()) +
                                " units but a plan for " + std::to_string(plan_.size()));
  }
  at::Tensor h = input;
  if (!at::GradMode::is_enabled()) {
    for (const auto& unit : units) h = unit.forward(h);
    return h;
  }
  // A fresh record for this forward; hooks of an older graph keep the old one.
  timings_ = std::make_shared<UnitTimings>();
  timings_->forward_ns.assign(units.size(), 0);
  timings_->backward_begin_ns.assign(units.size(), -1);
  timings_->input_bytes.assign(units.size(), 0);
  timings_->live_bytes_after.assign(units.size(), 0);
  memory::MemoryTracker* tracker = memory::MemoryTracker::installed();
  const UnitProbe& probe = *probe_;
  const auto live_bytes = [&]() -> std::int64_t {
    if (probe.live_bytes) return probe.live_bytes();
    return tracker != nullptr ? tracker->live_bytes() : 0;
  };
  timings_->live_bytes_before = live_bytes();
  for (std::size_t u = 0; u < units.size(); ++u) {
    const UnitTreatment& t = plan_[u];
    const int index = static_cast<int>(u);
    if (swap_ != nullptr) {
      swap_->begin_unit(index, t.swap, u + 1 < units.size() && plan_[u + 1].swap);
    }
    timings_->input_bytes[u] = h.defined() ? static_cast<std::int64_t>(h.nbytes()) : 0;
    const std::int64_t start = probed_now_ns(probe);
    {
      memory::SpanGuard span("unit_forward", "forward");
      const auto input_kind = u > 0 && units[u - 1].output_is_relu ? memory::SavedKind::relu_output
                                                                   : memory::SavedKind::activation;
      h = t.recompute ? recompute(units[u].forward, h, units[u].parameters, input_kind)
                      : units[u].forward(h);
    }
    timings_->forward_ns[u] = probed_now_ns(probe) - start;
    timings_->live_bytes_after[u] = live_bytes();
    if (swap_ != nullptr) swap_->end_unit(h);
    if (h.requires_grad()) {
      // Fires when the gradient of this unit's output is ready: its backward begins.
      std::shared_ptr<UnitTimings> record = timings_;
      memory::SwapStore* swap = swap_;
      std::shared_ptr<const UnitProbe> hook_probe = probe_;
      h.register_hook([record, swap, index, hook_probe](const at::Tensor&) {
        record->backward_begin_ns[static_cast<std::size_t>(index)] = probed_now_ns(*hook_probe);
        { memory::SpanGuard span("unit_backward_begins", "backward"); }
        if (swap != nullptr) swap->backward_begins(index);
      });
    }
  }
  timings_->forward_end_ns = probed_now_ns(probe);
  if (swap_ != nullptr) swap_->end_forward();
  return h;
}

UnitTimings UnitRunner::timings() const { return *timings_; }

}  // namespace engram::nn
