#include "trainer/BackwardProfile.h"

#include "nn/GradScheduler.h"
#include "nn/Runtime.h"
#include "trainer/Stepper.h"
#include "trainer/Trainer.h"

#include <c10/cuda/CUDAFunctions.h>

#include <chrono>
#include <stdexcept>

namespace engram::trainer {
namespace {

using Clock = std::chrono::steady_clock;

/// The backward's ends, with the device's work so far done.
class BackwardEnds : public StepHooks {
 public:
  explicit BackwardEnds(bool on_cuda) : on_cuda_(on_cuda) {}
  void before(StepPhase phase) override {
    if (phase == StepPhase::backward) begin = now();
  }
  void after(StepPhase phase) override {
    if (phase == StepPhase::backward) end = now();
  }
  Clock::time_point now() const {
    if (on_cuda_) c10::cuda::device_synchronize();
    return Clock::now();
  }
  Clock::time_point begin, end;

 private:
  bool on_cuda_;
};

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

BackwardProfile profile_backward(TrainingSession& session, std::vector<std::size_t> examples) {
  if (session.data_parallel() != nullptr)
    throw std::logic_error("profile_backward: a data-parallel session's backward is its job's");
  const auto& parameters = session.stepper().parameters();
  const bool on_cuda = !parameters.empty() && parameters.front().is_cuda();
  BackwardEnds ends(on_cuda);
  nn::ImmediateScheduler timeline;
  timeline.time_kernels(true);
  std::vector<std::pair<Clock::time_point, double>> tasks;  // each task's end and duration
  timeline.on_ready([&](const nn::WeightGradTask& task) {
    tasks.emplace_back(ends.now(), task.seconds);
  });
  session.stepper().add_hooks(&ends);
  try {
    const nn::RuntimeGuard use(nullptr, &timeline);
    session.step(std::move(examples));
  } catch (...) {
    session.stepper().remove_hooks(&ends);
    throw;
  }
  session.stepper().remove_hooks(&ends);
  BackwardProfile p;
  Clock::time_point previous = ends.begin;
  for (const auto& [end, duration] : tasks) {
    const double span = seconds(previous, end);
    p.segments.push_back({std::max(0.0, span - duration), duration});
    previous = end;
  }
  p.tail_chain = seconds(previous, ends.end);
  p.backward_seconds = seconds(ends.begin, ends.end);
  return p;
}

}  // namespace engram::trainer
