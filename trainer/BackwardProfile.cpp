#include "trainer/BackwardProfile.h"

#include "nn/GradScheduler.h"
#include "nn/Runtime.h"
#include "trainer/Device.h"
#include "trainer/Stepper.h"
#include "trainer/Trainer.h"

#include <chrono>
#include <stdexcept>

namespace engram::trainer {
namespace {

using Clock = std::chrono::steady_clock;

/// The forward's and the backward's ends, with the device's work so far done.
class PhaseEnds : public StepHooks {
 public:
  explicit PhaseEnds(const c10::Device& device) : device_(device) {}
  void before(StepPhase phase) override {
    if (phase == StepPhase::forward) forward_begin = now();
    if (phase == StepPhase::backward) begin = now();
  }
  void after(StepPhase phase) override {
    if (phase == StepPhase::forward) forward_end = now();
    if (phase == StepPhase::backward) end = now();
  }
  Clock::time_point now() const { return device_now(device_); }
  Clock::time_point forward_begin, forward_end, begin, end;

 private:
  c10::Device device_;
};

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

BackwardProfile profile_backward(TrainingSession& session, std::vector<std::size_t> examples) {
  if (session.data_parallel() != nullptr)
    throw std::logic_error("profile_backward: a data-parallel session's backward is its job's");
  const auto& parameters = session.stepper().parameters();
  PhaseEnds ends(parameters_device(parameters));
  nn::ImmediateScheduler timeline;
  timeline.time_kernels(true);
  struct Task {
    Clock::time_point end;
    double seconds;
    std::size_t bytes;
  };
  std::vector<Task> tasks;
  timeline.on_ready([&](const nn::WeightGradTask& task) {
    std::size_t bytes = 0;
    for (const auto& t : task.parameters) bytes += t.numel() * t.element_size();
    tasks.push_back({ends.now(), task.seconds, bytes});
  });
  session.stepper().add_hooks(&ends);
  Clock::time_point start, stop;
  try {
    const nn::RuntimeGuard use(nullptr, &timeline);
    start = ends.now();
    session.step(std::move(examples));
    stop = ends.now();
  } catch (...) {
    session.stepper().remove_hooks(&ends);
    throw;
  }
  session.stepper().remove_hooks(&ends);
  BackwardProfile p;
  Clock::time_point previous = ends.begin;
  for (const Task& t : tasks) {
    const double span = seconds(previous, t.end);
    p.segments.push_back({std::max(0.0, span - t.seconds), t.seconds, t.bytes});
    previous = t.end;
  }
  p.tail_chain = seconds(previous, ends.end);
  p.backward_seconds = seconds(ends.begin, ends.end);
  p.forward_seconds = seconds(ends.forward_begin, ends.forward_end);
  p.step_seconds = seconds(start, stop);
  return p;
}

}  // namespace engram::trainer
