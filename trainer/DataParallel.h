#pragma once
/// \file
/// A training session's data parallelism (DESIGN.md section 5): what the session does
/// differently when its options carry a Communicator of more than one rank.
///
/// - Start: the ranks agree on the configuration (parameter shapes, examples, training options)
///   and take rank 0's initial parameters.
/// - Sharding: every rank draws the same global batch of world x batch examples from the same
///   seeded sampler and trains on its contiguous slice; the loss is normalised over the global
///   batch (Workload::loss_denominators), so the summed gradients equal one process's on the
///   global batch.
/// - Exchange: the layers' weight-gradient ready callbacks (nn/GradScheduler.h) feed a
///   dist::GradReducer; as a StepHooks it starts a step's exchange before backward and waits
///   for it after backward, before the clip and the optimizer.
/// - Checks: replicas_equal() compares a hash of every rank's parameters.
///
/// \code
///   engram::trainer::DataParallel dp(comm, workload, stepper.parameters(), options);
///   engram::nn::RuntimeGuard use(store, dp.scheduler());
///   stepper.add_hooks(&dp);
///   auto global = sampler.next();                      // world x batch indices
///   stepper.step(dp.shard(global), workload.loss_denominators(global));
/// \endcode

#include "trainer/Stepper.h"
#include "trainer/TrainingOptions.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engram::nn {
class GradScheduler;
class ReplicaSum;
}  // namespace engram::nn
namespace engram::dist {
class Communicator;
class GradReducer;
}  // namespace engram::dist

namespace engram::trainer {

/// This rank's contiguous share of a global batch: `global` cut into `world` nearly equal runs.
std::vector<std::size_t> shard_of(const std::vector<std::size_t>& global, int rank, int world);

/// A hash of the parameters' bytes (FNV-1a over each tensor's contiguous data).
std::uint64_t parameter_hash(const std::vector<at::Tensor>& parameters);

class DataParallel : public StepHooks {
 public:
  /// Agrees on the configuration with the other ranks (std::runtime_error naming what differs)
  /// and broadcasts rank 0's parameters. `comm` and `workload` must outlive it.
  DataParallel(dist::Communicator& comm, Workload& workload, std::vector<at::Tensor> parameters,
               const TrainingOptions& options);
  ~DataParallel() override;

  std::vector<std::size_t> shard(const std::vector<std::size_t>& global) const;
  /// The scheduler the layers submit their weight-gradient tasks to while the session lasts.
  nn::GradScheduler* scheduler();
  /// The layers' sum over replicas (synchronised batch norm); nullptr unless
  /// options.dist.sync_batch_norm.
  nn::ReplicaSum* replicas();
  dist::GradReducer& reducer() { return *reducer_; }
  dist::Communicator& communicator() { return comm_; }

  /// Throws std::runtime_error (on every rank) when the ranks' parameters differ. Does nothing
  /// under GradSync::none, whose replicas drift apart by design.
  void check_replicas(long step);

  void before(StepPhase phase) override;
  void after(StepPhase phase) override;

 private:
  dist::Communicator& comm_;
  std::vector<at::Tensor> parameters_;
  bool exchanges_;  ///< gradients are exchanged (not GradSync::none)
  std::unique_ptr<dist::GradReducer> reducer_;
  std::unique_ptr<nn::GradScheduler> scheduler_;
  std::unique_ptr<nn::ReplicaSum> replicas_;
};

}  // namespace engram::trainer
