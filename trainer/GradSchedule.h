#pragma once
/// \file
/// How the ranks of a data-parallel session exchange weight gradients (docs/ARCHITECTURE.md, "A
/// data-parallel step"): one GradSchedule per name of --grad-sync, each in its own file under
/// trainer/schedules/, made once by make_grad_schedule() and owned by trainer::DataParallel, as
/// c10d's communication hooks or flashlight's reducers plug into a trainer.
///
/// A schedule is the layers' gradient scheduler (where each weight-gradient task runs, and the
/// ready callbacks that follow it), a StepHooks of the session's Stepper (what it does around
/// each phase: start an exchange before backward, wait for it after), and optionally the gate the
/// layers call before their forward (out-of-order backprop's late updates). It knows the
/// communicator and the parameters, never the model or the Stepper: a late update goes through
/// the function it is given (Setup::update_late).
///
///   none     parallel::GradSync::none: no exchange (`bench dp`'s compute-only baseline)
///   after    one all-reduce of every gradient after backward      (schedules/AfterBackward.cpp)
///   overlap  DDP's buckets, each sent when ready, during backward (schedules/Overlap.cpp)
///   ooo      out-of-order backprop, reverse first-k               (schedules/OutOfOrder.cpp)
///   host     chunks of layers summed in host memory, chunk searched (schedules/HostChunks.cpp)
///
/// \code
///   auto schedule = engram::trainer::make_grad_schedule(
///       {comm, parameters, options, [&](const auto& which) { stepper.update_late(which); }, 0});
///   engram::nn::RuntimeGuard use(store, &schedule->scheduler(), nullptr, schedule->gate());
///   stepper.add_hooks(schedule.get());
/// \endcode

#include "parallel/OooPlan.h"
#include "trainer/Stepper.h"
#include "trainer/TrainingOptions.h"

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace engram::nn {
class GradScheduler;
class ParameterGate;
}  // namespace engram::nn
namespace engram::parallel {
class Communicator;
}  // namespace engram::parallel

namespace engram::trainer {

/// What out-of-order backprop chose on the first step (schedule ooo).
struct OooChoice {
  bool made = false;       ///< the first step has ended
  bool automatic = false;  ///< k from the model (options.dist.ooo_k = -1), not the options
  std::size_t k = 0;       ///< layers deferred
  std::size_t layers = 0;  ///< layers the forward passed through the gate
  /// The model's predicted step (seconds) for k = 0..layers, from the first step's measurements.
  std::vector<double> predicted_seconds;
  /// Those measurements, per layer in forward order: the model's inputs.
  std::vector<parallel::LayerCost> costs;
};

/// The chunk of schedule host and how it was found (parallel/ChunkSearch.h).
struct ChunkChoice {
  bool settled = false;    ///< the chunk no longer changes (searched, or fixed by the options)
  bool automatic = false;  ///< searched (options.dist.chunk_layers = -1)
  std::size_t chunk = 0;   ///< layers per chunk now (0 before the first step has ended)
  std::size_t layers = 0;
  /// Each size tried and its step (seconds, the mean over the ranks), in order.
  std::vector<std::pair<std::size_t, double>> path;
};

/// What a schedule sends, for reports (`bench dp`): all zero for none.
struct ExchangeFigures {
  std::size_t bytes_per_step = 0;
  std::size_t buckets = 0;
  std::size_t sent_during_backward = 0;  ///< buckets sent before backward ended, last step
  std::vector<std::size_t> bucket_bytes;
};

class GradSchedule : public StepHooks {
 public:
  /// What a schedule is made from (it copies what it keeps of `options`). `comm` and the
  /// parameters' tensors outlive it.
  struct Setup {
    parallel::Communicator& comm;
    std::vector<at::Tensor> parameters;  ///< the workload's, in its order
    const TrainingOptions& options;
    /// Applies the optimizer's update to these parameters (indices; their sums are in .grad)
    /// now, out of the step: the Stepper's late update (schedule ooo).
    std::function<void(const std::vector<std::size_t>&)> update_late;
    /// Seconds the broadcast of every initial parameter took: a measured link, which ooo's step
    /// model takes where no emulated link says more.
    double broadcast_seconds = 0;
  };

  ~GradSchedule() override;
  virtual const char* name() const = 0;
  /// Where the layers submit their weight-gradient tasks while the session lasts.
  virtual nn::GradScheduler& scheduler() = 0;
  /// The gate the layers call before their forward; nullptr: none.
  virtual nn::ParameterGate* gate() { return nullptr; }
  /// Applies what the schedule holds back (late updates), so that the parameters are those after
  /// the last step: before they are saved, evaluated or compared.
  virtual void settle() {}
  /// Whether the replicas stay equal (every schedule but none, whose replicas drift apart).
  virtual bool exchanges() const { return true; }
  /// Entries for the step's metrics (host: "chunk_layers").
  virtual void add_metrics(std::map<std::string, double>& metrics) const { (void)metrics; }
  virtual ExchangeFigures figures() const { return {}; }
  virtual OooChoice ooo_choice() const { return {}; }
  virtual ChunkChoice chunk_choice() const { return {}; }
};

/// The schedule options.dist.grad_sync names.
std::unique_ptr<GradSchedule> make_grad_schedule(GradSchedule::Setup setup);

}  // namespace engram::trainer
