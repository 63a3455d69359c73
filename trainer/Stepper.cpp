#include "trainer/Stepper.h"

#include "memory/DeviceArenaReuse.h"
#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "trainer/Optimizer.h"

// clip_grad.h needs torch::Tensor declared before it.
#include <torch/types.h>

#include <torch/nn/utils/clip_grad.h>

#include <algorithm>

namespace engram::trainer {
namespace {

using Hooks = std::vector<StepHooks*>;

/// Announces a phase's beginning to the hooks, in the order they were added; its end, in reverse.
void phase_begins(const Hooks& hooks, StepPhase phase) {
  for (StepHooks* h : hooks) h->before(phase);
}

void phase_ends(const Hooks& hooks, StepPhase phase) {
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)->after(phase);
}

/// The batch, forward and backward phases, announced to `hooks`.
StepOutput run_forward_backward(Workload& workload, std::vector<std::size_t> indices,
                                std::vector<double> loss_denominators, const Hooks& hooks) {
  StepOutput out;
  {
    memory::PhaseGuard phase(memory::Phase::forward);
    std::unique_ptr<Batch> batch;
    {
      memory::SpanGuard span(step_phase_name(StepPhase::batch), "phase");
      phase_begins(hooks, StepPhase::batch);
      batch = workload.make_batch(std::move(indices));
      batch->loss_denominators = std::move(loss_denominators);
      phase_ends(hooks, StepPhase::batch);
    }
    {
      memory::SpanGuard span(step_phase_name(StepPhase::forward), "phase");
      phase_begins(hooks, StepPhase::forward);
      out = workload.forward(*batch);
      batch.reset();  // what forward did not save for backward goes now
      phase_ends(hooks, StepPhase::forward);
    }
  }
  memory::PhaseGuard phase(memory::Phase::backward);
  memory::SpanGuard span(step_phase_name(StepPhase::backward), "phase");
  phase_begins(hooks, StepPhase::backward);
  nn::GradScheduler* scheduler = nn::current_runtime().scheduler;
  try {
    out.loss.backward();
  } catch (...) {
    // No task may still be running (a worker thread's) or queued when the failure unwinds.
    try {
      scheduler->finish();
    } catch (...) {
      // The backward's own failure is the one to report.
    }
    throw;
  }
  // Weight gradients a scheduler held back (nn/GradScheduler.h) are due before the optimizer.
  scheduler->finish();
  phase_ends(hooks, StepPhase::backward);
  return out;
}

}  // namespace

const char* step_phase_name(StepPhase phase) {
  static constexpr std::array<const char*, kNumStepPhases> names{"batch", "forward", "backward",
                                                                 "clip", "optimizer"};
  return names.at(static_cast<std::size_t>(phase));
}

namespace {

/// One reuse step around a training step, ended on every way out of it: on the host's
/// allocator, or on the CUDA device of the parameters (`device` >= 0).
class ReuseScope {
 public:
  ReuseScope(bool on, int device, std::uint64_t signature, memory::ReuseStep& out) : out_(out) {
    if (!on) return;
    if (device >= 0) {
      on_device_ = &memory::DeviceArenaReuse::install(device);
      on_device_->begin_step(signature);
    } else {
      on_host_ = &memory::ArenaReuse::install();
      on_host_->begin_step(signature);
    }
  }
  ~ReuseScope() {
    try {
      if (on_device_ != nullptr) out_ = on_device_->end_step();
      if (on_host_ != nullptr) out_ = on_host_->end_step();
    } catch (...) {
      // The step is closed before anything that can fail (the arena's growth on a device in
      // error): the step that failed throws its own error, and the next step begins anew.
    }
  }
  ReuseScope(const ReuseScope&) = delete;
  ReuseScope& operator=(const ReuseScope&) = delete;

 private:
  memory::ArenaReuse* on_host_ = nullptr;
  memory::DeviceArenaReuse* on_device_ = nullptr;
  memory::ReuseStep& out_;
};

}  // namespace

Stepper::Stepper(Workload& workload, StepperOptions options)
    : workload_(workload), options_(options), parameters_(workload.parameters()) {
  memory::TagGuard tag(memory::Tag::optimizer_state);  // the optimizer allocates its state here
  optimizer_ =
      make_optimizer({options_.optimizer, options_.learning_rate, options_.momentum}, parameters_);
  if (const c10::Device device = parameters_device(parameters_); device.is_cuda())
    reuse_device_ = device.index();
}

Stepper::~Stepper() {
  // A device arena is device memory the next session should have: it goes back with its plans.
  if (options_.reuse && reuse_device_ >= 0) {
    if (auto* reuse = memory::DeviceArenaReuse::installed()) {
      try {
        reuse->release();
      } catch (...) {
        // Another stepper's step is open on the device (its end keeps the arena), or the
        // device is in error: the arena stays with the process.
      }
    }
  }
}

void Stepper::add_hooks(StepHooks* hooks) {
  if (hooks != nullptr) hooks_.push_back(hooks);
}

void Stepper::remove_hooks(StepHooks* hooks) {
  hooks_.erase(std::remove(hooks_.begin(), hooks_.end(), hooks), hooks_.end());
}

StepOutput Stepper::step(std::vector<std::size_t> indices, std::vector<double> loss_denominators) {
  StepOutput out;
  {
    ReuseScope reuse(options_.reuse, reuse_device_,
                     options_.reuse ? workload_.step_signature(indices) : 0, last_reuse_);
    out = optimize(std::move(indices), std::move(loss_denominators));
  }
  if (options_.reuse && last_reuse_.allocations > 0) {
    out.metrics["reuse_hit_rate"] =
        static_cast<double>(last_reuse_.hits) / static_cast<double>(last_reuse_.allocations);
  }
  return out;
}

StepOutput Stepper::optimize(std::vector<std::size_t> indices,
                             std::vector<double> loss_denominators) {
  optimizer_->zero_grad();
  StepOutput out =
      run_forward_backward(workload_, std::move(indices), std::move(loss_denominators), hooks_);
  memory::PhaseGuard phase(memory::Phase::optimizer);
  {
    memory::SpanGuard span(step_phase_name(StepPhase::clip), "phase");
    phase_begins(hooks_, StepPhase::clip);
    if (options_.grad_clip > 0) torch::nn::utils::clip_grad_norm_(parameters_, options_.grad_clip);
    phase_ends(hooks_, StepPhase::clip);
  }
  memory::SpanGuard span(step_phase_name(StepPhase::optimizer), "phase");
  phase_begins(hooks_, StepPhase::optimizer);
  {
    memory::TagGuard tag(memory::Tag::optimizer_state);
    optimizer_->step();
  }
  phase_ends(hooks_, StepPhase::optimizer);
  return out;
}

void Stepper::update_late(const std::vector<std::size_t>& which) {
  if (which.empty()) return;
  memory::SpanGuard span("late update", "phase");
  {
    memory::TagGuard tag(memory::Tag::optimizer_state);
    optimizer_->step(which);
  }
  for (std::size_t i : which) parameters_.at(i).mutable_grad() = at::Tensor();
}

StepOutput forward_backward(Workload& workload, std::vector<std::size_t> indices) {
  return run_forward_backward(workload, std::move(indices), {}, {});
}

}  // namespace engram::trainer
