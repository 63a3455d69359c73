#pragma once
/// \file
/// One training step, the only one in Engram: `engram train` (trainer/Trainer.h), `bench npi`
/// and `bench memory` all step through it, so a benchmark times the real step. Phases, in order:
///
///   batch      Workload::make_batch (e.g. traces packed into tensors)
///   forward    Workload::forward; the batch is released when it returns
///   backward   loss.backward(), then the gradient scheduler's finish() (nn/GradScheduler.h):
///              every weight gradient is in .grad after it
///   clip       the global gradient norm clipped to grad_clip (skipped when grad_clip is 0)
///   optimizer  the optimizer's update (trainer/Optimizer.h: Adam or SGD); gradients reset to
///              undefined before the next step's backward
///
/// Each phase runs inside memory-tracker phase and span guards (memory/MemoryTracker.h), with
/// the optimizer's allocations tagged optimizer_state. Hooks see every phase begin and end:
/// timers, gradient retagging and the data-parallel gradient exchange plug in there. The
/// activation store the layers use is the session's (trainer/Trainer.h), not the Stepper's.
///
/// \code
///   engram::trainer::Stepper stepper(workload, {/*learning_rate=*/1e-3, /*grad_clip=*/1.0});
///   PhaseTimer timer;                              // a StepHooks
///   stepper.add_hooks(&timer);
///   engram::trainer::StepOutput out = stepper.step({0, 1, 2, 3});
///   double loss = out.loss.item<double>();
/// \endcode

#include "memory/ArenaReuse.h"
#include "trainer/Workload.h"

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace engram::trainer {

class Optimizer;

enum class StepPhase { batch, forward, backward, clip, optimizer };
inline constexpr std::size_t kNumStepPhases = 5;
/// "batch", "forward", "backward", "clip", "optimizer".
const char* step_phase_name(StepPhase phase);

/// Called around every phase of every step, in the order hooks were added (after: reversed).
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  virtual void before(StepPhase phase) { (void)phase; }
  virtual void after(StepPhase phase) { (void)phase; }
};

struct StepperOptions {
  double learning_rate = 1e-3;
  double grad_clip = 1.0;  ///< max global gradient norm; 0: no clipping
  /// Fixed-structure memory reuse: each step's allocations, from make_batch to the optimizer,
  /// are one reuse step of the workload's step_signature(), served from the host's arena
  /// (memory/ArenaReuse.h: this thread's allocations) or, with the parameters on a CUDA device,
  /// from that device's (memory/DeviceArenaReuse.h: the allocations on the step's stream, which
  /// the Stepper's end gives back); the step's figures go to its metrics ("reuse_hit_rate").
  bool reuse = false;
  std::string optimizer = "adam";  ///< trainer/Optimizer.h: "adam" or "sgd"
  double momentum = 0.9;           ///< SGD's
};

class Stepper {
 public:
  /// Creates the optimizer over workload.parameters() (its state tagged optimizer_state).
  /// `workload` must outlive the Stepper.
  Stepper(Workload& workload, StepperOptions options);
  ~Stepper();
  Stepper(const Stepper&) = delete;
  Stepper& operator=(const Stepper&) = delete;

  /// `hooks` must outlive its use; nullptr is ignored.
  void add_hooks(StepHooks* hooks);
  /// Stops calling `hooks` (added before); others keep their order.
  void remove_hooks(StepHooks* hooks);

  /// One whole step over the examples with these indices; returns the forward's output (the
  /// loss still attached to its graph's values, the graph itself freed by backward).
  /// `loss_denominators` (trainer/Workload.h): empty, the batch's own counts; a data-parallel
  /// session passes the global batch's.
  StepOutput step(std::vector<std::size_t> indices, std::vector<double> loss_denominators = {});

  /// The optimizer's update of these parameters (indices into parameters()) from their .grad,
  /// which is then reset: out-of-order backprop's late update of a layer, during the next
  /// step's forward (trainer/DataParallel.h). Each parameter's update is the one step() makes.
  void update_late(const std::vector<std::size_t>& which);

  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  Workload& workload() { return workload_; }
  /// The optimizer over parameters() (its state is saved by trainer/TrainingState.h).
  Optimizer& optimizer() { return *optimizer_; }
  /// The last step's use of the arena (StepperOptions::reuse), else nullptr.
  const memory::ReuseStep* last_reuse() const { return options_.reuse ? &last_reuse_ : nullptr; }

 private:
  Workload& workload_;
  StepperOptions options_;
  std::vector<at::Tensor> parameters_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<StepHooks*> hooks_;
  memory::ReuseStep last_reuse_;
  int reuse_device_ = -1;  ///< the CUDA device of the parameters, else -1 (the host)

  /// The step without the reuse around it.
  StepOutput optimize(std::vector<std::size_t> indices, std::vector<double> loss_denominators);
};

/// The batch, forward and backward phases of a step without clip or optimizer (gradients are
/// accumulated into .grad): what the memory planner measures (trainer/MemoryTechniques.h).
StepOutput forward_backward(Workload& workload, std::vector<std::size_t> indices);

}  // namespace engram::trainer
