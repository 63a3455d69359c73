#pragma once
/// \file
/// A training session's data parallelism (docs/ARCHITECTURE.md): what the session does
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
/// - Out-of-order backprop (dist::GradSync::ooo): the first step measures each layer's forward
///   and weight-gradient time (the layers' gate and ready callbacks) and chooses k
///   (dist/OooPlan.h) unless options.dist.ooo_k fixes it; from the second step the k layers
///   nearest the input have their weight gradients computed after the input-gradient chain and
///   their exchange left running, and the session's optimizer updates each of them when the next
///   forward reaches it (the gate, nn/Runtime.h). settle() applies what is still pending.
/// - Host-side accumulation in chunks (dist::GradSync::host): the buckets are chunks of
///   consecutive layers; with options.dist.chunk_layers = -1 the chunk is searched from the
///   second step (1, 2, 4, ... layers, two steps each, the second timed and averaged over the
///   ranks; growing while a step gets faster, stopping at the first slower one, keeping the best).
/// - Checks: check_replicas() compares a hash of every rank's parameters.
///
/// \code
///   engram::trainer::DataParallel dp(comm, workload, stepper.parameters(), options);
///   engram::nn::RuntimeGuard use(store, dp.scheduler());
///   stepper.add_hooks(&dp);
///   auto global = sampler.next();                      // world x batch indices
///   stepper.step(dp.shard(global), workload.loss_denominators(global));
/// \endcode

#include "nn/Runtime.h"
#include "trainer/Stepper.h"
#include "trainer/TrainingOptions.h"

#include <chrono>
#include <map>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace engram::nn {
class GradScheduler;
class ReplicaSum;
}  // namespace engram::nn
namespace engram::dist {
class ChunkSearch;
class Communicator;
class GradReducer;
}  // namespace engram::dist

namespace engram::trainer {

/// This rank's contiguous share of a global batch: `global` cut into `world` nearly equal runs.
std::vector<std::size_t> shard_of(const std::vector<std::size_t>& global, int rank, int world);

/// A hash of the parameters' bytes (FNV-1a over each tensor's contiguous data).
std::uint64_t parameter_hash(const std::vector<at::Tensor>& parameters);

/// What out-of-order backprop chose on the first step (GradSync::ooo).
struct OooChoice {
  bool made = false;       ///< the first step has ended
  bool automatic = false;  ///< k from the model (options.dist.ooo_k = -1), not the options
  std::size_t k = 0;       ///< layers deferred
  std::size_t layers = 0;  ///< layers the forward passed through the gate
  /// The model's predicted step (seconds) for k = 0..layers, from the first step's measurements.
  std::vector<double> predicted_seconds;
};

/// The chunk of GradSync::host and how it was found (dist/ChunkSearch.h).
struct ChunkChoice {
  bool settled = false;    ///< the chunk no longer changes (searched, or fixed by the options)
  bool automatic = false;  ///< searched (options.dist.chunk_layers = -1)
  std::size_t chunk = 0;   ///< layers per chunk now (0 before the first step has ended)
  std::size_t layers = 0;
  /// Each size tried and its step (seconds, the mean over the ranks), in order.
  std::vector<std::pair<std::size_t, double>> path;
};

class DataParallel : public StepHooks, public nn::ParameterGate {
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
  /// under GradSync::none, whose replicas drift apart by design. Settles first.
  void check_replicas(long step);

  /// The gate the layers call before their forward: this, under GradSync::ooo; else nullptr.
  nn::ParameterGate* gate();
  /// The session's Stepper, whose update_late() applies the late updates (GradSync::ooo needs
  /// it; the optimizer steps only in the Stepper).
  void set_stepper(Stepper* stepper) { stepper_ = stepper; }
  /// GradSync::ooo: waits for every deferred sum still pending and applies its update, so the
  /// parameters are those after the last step (before they are saved, evaluated or compared).
  void settle();
  const OooChoice& ooo_choice() const { return ooo_; }
  const ChunkChoice& chunk_search() const { return chunk_; }

  void before(StepPhase phase) override;
  void after(StepPhase phase) override;
  void before_forward(const std::vector<at::Tensor>& parameters) override;

 private:
  using Clock = std::chrono::steady_clock;
  /// The first step's measurements, per layer (the gate's parameter groups, in forward order).
  struct Profile {
    std::vector<std::vector<std::size_t>> layers;     ///< parameter indices
    std::map<std::size_t, std::size_t> layer_of;      ///< parameter index -> layer
    std::vector<double> forward, weight_grad;         ///< seconds
    std::size_t open = static_cast<std::size_t>(-1);  ///< the layer whose forward runs
    Clock::time_point opened, backward_start;
    double backward = 0;
  };
  void close_layer(Clock::time_point now);
  /// GradSync::host, after a step of `seconds`: the search's next chunk, or its end.
  void search_chunk(double seconds);
  void choose_deferred();
  /// The late update of these parameters (their sums are in .grad).
  void apply(const std::vector<std::size_t>& indices);

  dist::Communicator& comm_;
  std::vector<at::Tensor> parameters_;
  TrainingOptions options_;
  bool exchanges_;                               ///< gradients are exchanged (not GradSync::none)
  bool out_of_order_;                            ///< GradSync::ooo
  std::map<const void*, std::size_t> index_of_;  ///< TensorImpl* -> parameter index
  Stepper* stepper_ = nullptr;
  bool profiling_ = false;  ///< the first step of GradSync::ooo
  bool in_forward_ = false;
  Profile profile_;
  OooChoice ooo_;
  ChunkChoice chunk_;
  std::unique_ptr<dist::ChunkSearch> search_;
  bool chunked_;          ///< GradSync::host
  long chunk_steps_ = 0;  ///< steps taken with the current chunk
  Clock::time_point step_start_;
  double broadcast_seconds_ = 0;  ///< the initial parameters' broadcast (a link estimate)
  std::unique_ptr<dist::GradReducer> reducer_;
  std::unique_ptr<nn::GradScheduler> scheduler_;
  std::unique_ptr<nn::ReplicaSum> replicas_;
};

}  // namespace engram::trainer
