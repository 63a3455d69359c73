#pragma once
/// \file
/// The training session shared by every model. A session owns everything about training that is
/// not the model: the options' validation, compute threads, the batch order
/// (trainer/BatchSampler.h), the memory techniques (trainer/MemoryTechniques.h: planned, applied
/// to the workload's units and installed as the layers' activation store for the session's
/// lifetime, undone when it ends) and the one training step (trainer/Stepper.h). trainer::train
/// runs a session's loop with metrics, a progress bar and a callback every `log_every` steps;
/// benchmarks hold a session and call its step themselves.
///
/// \code
///   engram::trainer::TrainingOptions opt;
///   opt.steps = 2000;  opt.batch = 32;  opt.metrics_path = "metrics.jsonl";
///   opt.memory.techniques = {"relu"};
///   engram::trainer::TrainSummary s = engram::trainer::train(workload, opt);
///
///   engram::trainer::TrainingSession session(workload, opt);   // a benchmark's own loop
///   for (int i = 0; i < 10; ++i) session.step();
/// \endcode

#include "trainer/TrainingOptions.h"
#include "trainer/Workload.h"

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace engram::trainer {}  // namespace engram::trainer
namespace engram::nn {
class GradScheduler;
}  // namespace engram::nn
namespace engram::trainer {

class BatchSampler;
class DeviceMemoryLimit;
class DataParallel;
class MemoryTechniques;
class Stepper;

class TrainingSession {
 public:
  /// Validates `options` (InvalidOption), checks what its device supports
  /// (trainer/TrainingOptions.h's check_device_support), moves the workload there
  /// (Workload::to_device; std::invalid_argument for a model that cannot move), makes
  /// that device the current one for the session (and CUDA deterministic with
  /// options.deterministic), sets the compute threads, sets up the memory
  /// techniques and creates the Stepper. Recompute and swap are planned by measuring steps on
  /// `planning` (a scratch copy of the model, for models whose state a step moves) or, when it
  /// is nullptr, on `workload` itself, over its first `options.batch` examples; InvalidOption
  /// when the workload is not cut into units, memory::InfeasibleBudget when the budget is below
  /// every plan. Throws std::runtime_error when the workload has no examples. In a job of several
  /// ranks (options.job), also joins them (trainer/DataParallel.h): parallel::PeerFailure when
  /// they do not come, std::runtime_error when their configurations differ. With
  /// options.memory.cap (a CUDA device only), recompute, swap and algo without a budget are
  /// planned under the budget the cap leaves beside the parameters, their gradients and the
  /// optimizer's state (trainer/MemoryCap.h; InvalidOption when it leaves none), then the
  /// allocator's cached segments go back to the device and the allocator is limited to the cap
  /// for the session's life: a step that needs more throws c10::OutOfMemoryError. Planning's
  /// measured steps run before the limit (one with every unit kept among them).
  TrainingSession(Workload& workload, const TrainingOptions& options, Workload* planning = nullptr);
  /// Restores the activation store and detaches the workload from the units' runner.
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  /// One step over the sampler's next batch (data-parallel: this rank's share of it).
  StepOutput step();
  /// One step over these examples (benchmarks that train on a fixed batch); data-parallel:
  /// `indices` is the global batch and this rank trains on its share.
  StepOutput step(std::vector<std::size_t> indices);

  /// Brings the parameters up to date after the last step: under out-of-order backprop
  /// (schedule ooo, trainer/GradSchedule.h) the first layers' last updates wait for the next
  /// forward; this applies them now. Before the parameters are saved, evaluated or compared;
  /// nothing otherwise.
  void settle();

  /// The data parallelism of the session; nullptr in one process (options.job of one rank).
  DataParallel* data_parallel() { return data_parallel_.get(); }

  Stepper& stepper() { return *stepper_; }
  MemoryTechniques& memory() { return *memory_; }
  /// The device-memory cap in bytes (options.memory.cap resolved on the device), 0 for none.
  std::int64_t memory_cap_bytes() const { return cap_bytes_; }
  BatchSampler& sampler() { return *sampler_; }
  const TrainingOptions& options() const { return options_; }

 private:
  struct RuntimeScope;
  struct DeviceScope;
  Workload& workload_;
  TrainingOptions options_;
  std::unique_ptr<DeviceScope> device_;
  std::int64_t cap_bytes_ = 0;
  std::unique_ptr<DeviceMemoryLimit> cap_limit_;  ///< the cap on the allocator, for the session
  std::unique_ptr<MemoryTechniques> memory_;
  std::unique_ptr<RuntimeScope> runtime_;
  std::unique_ptr<BatchSampler> sampler_;
  std::unique_ptr<Stepper> stepper_;
  std::unique_ptr<DataParallel> data_parallel_;
  /// The weight gradients on a second thread (ooo_threads 2) or CUDA stream (ooo_streams 2).
  std::unique_ptr<nn::GradScheduler> reordered_;
  long steps_ = 0;
};

struct TrainSummary {
  long steps = 0;
  double final_loss = 0;
  double seconds = 0;  ///< training only: not the callbacks' time
  double examples_per_second = 0;
  long compressed_tensors = 0;  ///< ReLU outputs stored compressed (memory technique relu)
  /// With recompute or swap: the plan the session trained under, as text (memory::explain:
  /// each unit's choice and how the planner got there); empty otherwise.
  std::string memory_plan;
};

/// Called every `log_every` steps (and at the last) with the step number and the metrics
/// averaged since the previous call, before the metrics line is written: entries it adds (a
/// validation score, say) go into that line. Returning true stops training (e.g. once the
/// training set is solved). Its time is not training time.
using LogCallback = std::function<bool(long step, std::map<std::string, double>& metrics)>;

/// Runs a session's loop for options.steps steps; throws std::runtime_error if the loss becomes
/// non-finite or the metrics file cannot be written.
///
/// Resumable (trainer/TrainingState.h): with options.checkpoint_path, the session's state is
/// written there every options.checkpoint_every steps; with options.resume, the loop starts from
/// the state there (the metrics file keeps the lines of the steps it covers), and ends with the
/// bytes an uninterrupted run ends with. A SIGINT or SIGTERM while the loop runs stops it after
/// the current step (data-parallel: every rank after the same step), writes the state when there
/// is a checkpoint path, and throws Interrupted (common/Errors.h). A second signal within a second
/// of the first is taken for the same request delivered twice (timeout, torchrun and a terminal
/// each deliver one to the process and one to its group); a later one kills at once.
TrainSummary train(Workload& workload, const TrainingOptions& options,
                   const LogCallback& on_log = {});

}  // namespace engram::trainer
