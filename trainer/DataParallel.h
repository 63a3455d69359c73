#pragma once
/// \file
/// A training session's data parallelism (docs/ARCHITECTURE.md), and every piece of rank-aware
/// training code: what the session does differently when options.job names a world of more than
/// one rank (torchrun's environment, parallel::DistEnv).
///
/// - Start: joins the job (parallel::join_job: the TCPStore rendezvous and the process group,
///   shared with anything else in the process that joined it), agrees with the other ranks on
///   the configuration (parameter shapes, examples, training options) and takes rank 0's initial
///   parameters.
/// - Sharding: every rank draws the same global batch of world x batch examples from the same
///   seeded sampler and trains on its contiguous slice; the loss is normalised over the global
///   batch (Workload::loss_denominators), so the summed gradients equal one process's on the
///   global batch.
/// - Exchange: the gradient schedule options.dist.grad_sync names (trainer/GradSchedule.h),
///   made once here and owned here: the layers' gradient scheduler, the Stepper's hooks around
///   backward, and under ooo the layers' gate.
/// - The loop's agreements (trainer::train): metrics combined over the ranks, the log callback run
///   on the rank with the least memory in use and its verdict shared, an interrupt signal any
///   rank got taken by all, barriers around checkpoints and at the end, and check_replicas()
///   comparing a hash of every rank's parameters.
///
/// \code
///   engram::trainer::DataParallel dp(workload, stepper.parameters(), options,
///                                    [&](const auto& which) { stepper.update_late(which); });
///   engram::nn::RuntimeGuard use(store, &dp.scheduler(), dp.replicas(), dp.gate());
///   stepper.add_hooks(&dp);
///   auto global = sampler.next();                      // world x batch indices
///   stepper.step(dp.shard(global), workload.loss_denominators(global));
/// \endcode

#include "trainer/GradSchedule.h"
#include "trainer/Stepper.h"
#include "trainer/TrainingOptions.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace engram::nn {
class GradScheduler;
class ParameterGate;
class ReplicaSum;
}  // namespace engram::nn
namespace engram::parallel {
class Communicator;
}  // namespace engram::parallel

namespace engram::trainer {

/// This rank's contiguous share of a global batch: `global` cut into `world` nearly equal runs.
std::vector<std::size_t> shard_of(const std::vector<std::size_t>& global, int rank, int world);

/// A hash of the parameters' bytes (FNV-1a over each tensor's contiguous data).
std::uint64_t parameter_hash(const std::vector<at::Tensor>& parameters);

/// Keeps this process in the data-parallel job of `options.job` while it lives, so that the
/// sessions made meanwhile share one communicator instead of each joining the job again (a
/// second rendezvous on the same store would read the first one's keys): whoever runs several
/// sessions in one job holds one around them (primitives::train_primitives, a session per
/// family; `bench dp` holds the communicator itself). Does nothing in one process.
class JobScope {
 public:
  explicit JobScope(const TrainingOptions& options);
  ~JobScope();
  JobScope(const JobScope&) = delete;
  JobScope& operator=(const JobScope&) = delete;

 private:
  std::shared_ptr<parallel::Communicator> comm_;
};

class DataParallel : public StepHooks {
 public:
  /// Joins the job of options.job, agrees on the configuration with the other ranks
  /// (std::runtime_error naming what differs) and broadcasts rank 0's parameters. `update_late`
  /// is the Stepper's late update (schedule ooo). `workload` must outlive it.
  DataParallel(Workload& workload, std::vector<at::Tensor> parameters,
               const TrainingOptions& options,
               std::function<void(const std::vector<std::size_t>&)> update_late);
  ~DataParallel() override;

  int rank() const;
  int world_size() const;
  std::vector<std::size_t> shard(const std::vector<std::size_t>& global) const;
  /// The scheduler the layers submit their weight-gradient tasks to while the session lasts.
  nn::GradScheduler& scheduler() { return schedule_->scheduler(); }
  /// The gate the layers call before their forward (the schedule's; nullptr: none).
  nn::ParameterGate* gate() { return schedule_->gate(); }
  /// The layers' sum over replicas (synchronised batch norm); nullptr unless
  /// options.dist.sync_batch_norm.
  nn::ReplicaSum* replicas() { return replicas_.get(); }
  const GradSchedule& schedule() const { return *schedule_; }
  parallel::Communicator& communicator() { return *comm_; }

  /// Applies what the schedule holds back (ooo's late updates): the parameters are then those
  /// after the last step (before they are saved, validated or compared).
  void settle() { schedule_->settle(); }
  /// Throws std::runtime_error (on every rank) when the ranks' parameters differ. Does nothing
  /// under a schedule that does not exchange (none), whose replicas drift apart by design.
  /// Settles first.
  void check_replicas(long step);
  /// The schedule's entries for a step's metrics (host: the chunk).
  void add_step_metrics(std::map<std::string, double>& metrics) const {
    schedule_->add_metrics(metrics);
  }

  /// Makes `mean` (each rank's metrics averaged over a log window) the job's: each rank's loss
  /// is its share of the global batch's (the global denominators), so losses add up; other
  /// metrics are averaged over the ranks.
  void combine_metrics(std::map<std::string, double>& mean);
  /// Runs `on_log` on the rank with the least tracked memory in use while the others wait, and
  /// gives every rank its verdict (the return value) and the entries it added to `mean`.
  bool log_on_one_rank(const std::function<bool(long, std::map<std::string, double>&)>& on_log,
                       long step, std::map<std::string, double>& mean);
  /// The interrupt signal any rank noted (`local`: this rank's, or 0), SIGTERM before SIGINT:
  /// the same on every rank, so that all stop after the same step.
  int agreed_signal(int local);
  /// Returns when every rank has called it.
  void barrier();

  void before(StepPhase phase) override { schedule_->before(phase); }
  void after(StepPhase phase) override { schedule_->after(phase); }

 private:
  std::shared_ptr<parallel::Communicator> comm_;
  std::vector<at::Tensor> parameters_;
  std::unique_ptr<GradSchedule> schedule_;
  std::unique_ptr<nn::ReplicaSum> replicas_;
};

}  // namespace engram::trainer
