#include "trainer/Stepper.h"

#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "trainer/FusedAdam.h"

#include <torch/nn/utils/clip_grad.h>

namespace engram::trainer {
namespace {

memory::Phase tracker_phase(StepPhase phase) {
  switch (phase) {
    case StepPhase::batch:
    case StepPhase::forward:
      return memory::Phase::forward;
    case StepPhase::backward:
      return memory::Phase::backward;
    case StepPhase::clip:
    case StepPhase::optimizer:
      return memory::Phase::optimizer;
  }
  return memory::Phase::idle;
}

/// Runs batch, forward and backward; `before` and `after` are called around each phase.
template <typename Before, typename After>
StepOutput run_forward_backward(Workload& workload, std::vector<std::size_t> indices,
                                Before&& before, After&& after) {
  StepOutput out;
  {
    memory::PhaseGuard phase(tracker_phase(StepPhase::forward));
    std::unique_ptr<Batch> batch;
    {
      memory::SpanGuard span("batch", "phase");
      before(StepPhase::batch);
      batch = workload.make_batch(std::move(indices));
      after(StepPhase::batch);
    }
    {
      memory::SpanGuard span("forward", "phase");
      before(StepPhase::forward);
      out = workload.forward(*batch);
      batch.reset();  // what forward did not save for backward goes now
      after(StepPhase::forward);
    }
  }
  memory::PhaseGuard phase(tracker_phase(StepPhase::backward));
  memory::SpanGuard span("backward", "phase");
  before(StepPhase::backward);
  out.loss.backward();
  // Weight gradients a scheduler held back (nn/GradScheduler.h) are due before the optimizer.
  nn::current_runtime().scheduler->finish();
  after(StepPhase::backward);
  return out;
}

}  // namespace

const char* step_phase_name(StepPhase phase) {
  static constexpr std::array<const char*, kNumStepPhases> names{"batch", "forward", "backward",
                                                                  "clip", "optimizer"};
  return names.at(static_cast<std::size_t>(phase));
}

Stepper::Stepper(Workload& workload, StepperOptions options)
    : workload_(workload), options_(options), parameters_(workload.parameters()) {
  memory::TagGuard tag(memory::Tag::optimizer_state);  // FusedAdam allocates its moments here
  optimizer_ = std::make_unique<FusedAdam>(parameters_, options_.learning_rate);
}

Stepper::~Stepper() = default;

void Stepper::add_hooks(StepHooks* hooks) {
  if (hooks != nullptr) hooks_.push_back(hooks);
}

void Stepper::before(StepPhase phase) {
  for (StepHooks* h : hooks_) h->before(phase);
}

void Stepper::after(StepPhase phase) {
  for (auto it = hooks_.rbegin(); it != hooks_.rend(); ++it) (*it)->after(phase);
}

StepOutput Stepper::step(std::vector<std::size_t> indices) {
  optimizer_->zero_grad();
  StepOutput out = run_forward_backward(
      workload_, std::move(indices), [this](StepPhase p) { before(p); },
      [this](StepPhase p) { after(p); });
  memory::PhaseGuard phase(memory::Phase::optimizer);
  {
    memory::SpanGuard span("clip", "phase");
    before(StepPhase::clip);
    if (options_.grad_clip > 0) torch::nn::utils::clip_grad_norm_(parameters_, options_.grad_clip);
    after(StepPhase::clip);
  }
  memory::SpanGuard span("optimizer", "phase");
  before(StepPhase::optimizer);
  {
    memory::TagGuard tag(memory::Tag::optimizer_state);
    optimizer_->step();
  }
  after(StepPhase::optimizer);
  return out;
}

StepOutput forward_backward(Workload& workload, std::vector<std::size_t> indices) {
  const auto none = [](StepPhase) {};
  return run_forward_backward(workload, std::move(indices), none, none);
}

}  // namespace engram::trainer
