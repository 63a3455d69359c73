#pragma once
/// \file
/// Sums the weight gradients of every rank, bucket by bucket, while backward goes on
/// (docs/ARCHITECTURE.md): PyTorch DDP's scheme on c10d's asynchronous all-reduce. Gradients are
/// grouped into buckets in the order backward produces them (learned on the first step and taken
/// from rank 0, so every rank has the same buckets); a bucket is all-reduced the moment the last of
/// its gradients is ready, in bucket order on every rank; end_backward() sends what is left,
/// waits for every bucket and puts the sums back into .grad.
///
/// How the reducer groups gradients is its Layout, which the gradient schedule that owns it
/// chooses (trainer/GradSchedule.h): one bucket sent after backward, DDP's buckets, or chunks of
/// layers in host memory.
///
/// With deferred layers (out-of-order backprop, set_deferred()) those layers are each a bucket
/// of their own, sent after the others; their sums are not waited for by end_backward(): the
/// parameters' .grad is emptied when their bucket is sent, and take() waits for a parameter's
/// sum and puts it into .grad when the next step's forward needs the parameter.
///
/// Under Layout::layer_chunks the buckets are chunks of consecutive layers (a layer: the parameters
/// one weight-gradient task reports), in backward order, set_chunk() layers each; each is copied
/// into its host buffer when its last layer is ready and summed over the CPU process group while
/// backward goes on.
///
/// A parameter is ready when the layer that owns it has reported it (the ready callbacks of
/// nn::GradScheduler) as often as it did on the first step. Parameters no callback reports
/// (layers outside nn/) are sent by end_backward(). The first step sends everything in one
/// all-reduce after backward, as Layout::one_bucket always does.
///
/// \code
///   engram::parallel::GradReducer reducer(comm, parameters, {});  // DDP's buckets, 25 MiB
///   scheduler.on_ready([&](const auto& task) { reducer.ready(task.parameters); });
///   reducer.begin_step();
///   loss.backward();           // buckets go out as they fill
///   reducer.end_backward();    // every .grad holds the sum over ranks
/// \endcode

#include "parallel/DistOptions.h"

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace engram::parallel {

class Communicator;
class PendingCollective;

/// Consecutive runs of `order` (parameter indices), cut as PyTorch DDP cuts its buckets: each
/// parameter joins the open bucket, which closes once it holds at least its cap (`first_cap`
/// bytes for the first bucket, `cap` for the others), so a bucket may exceed its cap by its last
/// parameter. Pure, for tests and for the reducer.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& order,
                                                     const std::vector<std::size_t>& bytes,
                                                     std::size_t first_cap, std::size_t cap);

class GradReducer {
 public:
  enum class Layout {
    one_bucket,    ///< every gradient in one all-reduce after backward
    buckets,       ///< DDP's buckets in backward order, each sent when its gradients are ready
    layer_chunks,  ///< chunks of consecutive layers (set_chunk()), summed in host memory
  };
  struct Options {
    Layout layout = Layout::buckets;
    /// Layout::buckets: bucket capacities in bytes (DistOptions' bucket_bytes and
    /// first_bucket_bytes: 25 MiB, the first 1 MiB, as DDP).
    std::size_t bucket_bytes = 25u << 20;
    std::size_t first_bucket_bytes = 1u << 20;
  };

  /// `parameters` in the workload's order, all of one floating type. `comm` must outlive it.
  GradReducer(Communicator& comm, std::vector<at::Tensor> parameters, Options options);
  ~GradReducer();

  /// Before backward: forget the last step's readiness.
  void begin_step();
  /// These parameters' gradients are complete for this step (a layer's weight-gradient task ran).
  void ready(const std::vector<at::Tensor>& parameters);
  /// After backward: sends the buckets not yet sent, waits for all of them (but the deferred
  /// layers') and writes the sums into .grad (a parameter without a gradient gets one: the
  /// others' sum).
  void end_backward();

  /// Out-of-order backprop, before the first step's end_backward(): the layers to defer, each a
  /// list of parameter indices, in the order their buckets are sent (input first). Rank 0's choice
  /// is the one every rank takes (end_backward() shares it).
  void set_deferred(std::vector<std::vector<std::size_t>> layers);
  /// Whether any of these parameters belongs to a deferred layer.
  bool deferred(const std::vector<at::Tensor>& parameters) const;
  /// Whether some deferred sum has not been taken yet.
  bool has_pending() const { return pending_parameters_ > 0; }
  /// For each of `parameters` whose deferred sum is pending: waits for its bucket and writes the
  /// bucket's sums into .grad. Returns the indices of the parameters written.
  std::vector<std::size_t> take(const std::vector<at::Tensor>& parameters);
  /// take() of every pending parameter.
  std::vector<std::size_t> take_all();
  /// Layout::layer_chunks, after the first step: makes the buckets chunks of `layers`
  /// consecutive layers (at least 1; more than there are: one chunk). Between steps only.
  void set_chunk(std::size_t layers);
  /// Layout::layer_chunks: the layers (parameter indices) in backward order, as every rank has
  /// them.
  const std::vector<std::vector<std::size_t>>& layers() const { return layers_; }
  /// The deferred layers (parameter indices), in send order, as every rank has them.
  const std::vector<std::vector<std::size_t>>& deferred_layers() const { return deferred_layers_; }

  /// Parameter indices per bucket, in send order (one bucket before the first step).
  const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }
  /// Buckets sent during backward (before end_backward) in the last step.
  std::size_t sent_during_backward() const { return sent_early_; }
  /// Bytes all-reduced per step.
  std::size_t bytes_per_step() const { return total_bytes_; }
  /// Bytes of each bucket, in send order.
  std::vector<std::size_t> bucket_bytes() const;

 private:
  void launch(std::size_t bucket);
  void launch_in_order();
  void learn_buckets();
  /// Waits for bucket `b` and writes its sums into .grad; appends the indices to `written`.
  void write_sums(std::size_t b, std::vector<std::size_t>* written);
  std::size_t index_of(const at::Tensor& parameter) const;  ///< npos when not trained

  Communicator& comm_;
  std::vector<at::Tensor> parameters_;
  Options options_;
  std::unordered_map<const void*, std::size_t> index_of_;  ///< TensorImpl* -> parameter index
  std::vector<std::size_t> bytes_;                         ///< per parameter
  std::size_t total_bytes_ = 0;
  long steps_ = 0;

  std::mutex mutex_;
  // First step: the order and count of ready reports.
  std::vector<std::size_t> ready_order_;
  std::vector<int> expected_;  ///< reports per parameter that make it ready (0: end_backward)
  std::vector<int> seen_;

  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::vector<std::size_t> waiting_;  ///< per bucket: parameters not yet ready
  std::vector<at::Tensor> buffers_;
  std::vector<std::unique_ptr<PendingCollective>> pending_;
  std::vector<char> bucket_deferred_;                   ///< per bucket (deferred layers)
  std::vector<std::vector<std::size_t>> ready_groups_;  ///< first step: each report's indices
  std::vector<std::vector<std::size_t>> layers_;        ///< layer_chunks: backward order
  std::vector<std::size_t> unreported_;                 ///< layer_chunks: in no layer
  std::vector<std::vector<std::size_t>> deferred_layers_;
  std::vector<char> pending_parameter_;   ///< per parameter: a deferred sum not yet taken
  std::vector<char> parameter_deferred_;  ///< per parameter: in a deferred layer
  std::size_t pending_parameters_ = 0;
  std::size_t next_launch_ = 0;
  std::size_t sent_early_ = 0;
  bool in_backward_ = false;
};

}  // namespace engram::parallel
