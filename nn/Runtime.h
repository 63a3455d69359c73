#pragma once
/// \file
/// The activation store and gradient scheduler that layers of nn/ use. A layer reads the calling
/// thread's current runtime in its forward pass and keeps it for its backward, so a graph built
/// under one runtime is differentiated under it wherever backward runs. The default is the plain
/// store (memory/ActivationStore.h) and the immediate scheduler (nn/GradScheduler.h).
///
/// \code
///   engram::memory::PlainStore store;
///   engram::nn::DeferredScheduler scheduler;
///   {
///     engram::nn::RuntimeGuard use(&store, &scheduler);  // nullptr keeps the current one
///     auto loss = model->forward(x).sum();
///     loss.backward();
///   }
///   scheduler.finish();
/// \endcode
///
/// The pointed-to store and scheduler must outlive the backward passes of graphs built under the
/// guard.

#include "memory/ActivationStore.h"
#include "nn/GradScheduler.h"

namespace engram::nn {

/// Sums tensors over the replicas of data-parallel training, for layers whose forward or
/// backward needs statistics of the global batch (synchronised batch normalisation). The trainer
/// implements it on its communicator; every replica calls it in the same order.
class ReplicaSum {
 public:
  virtual ~ReplicaSum() = default;
  /// Replaces `tensor` (contiguous) by its sum over the replicas.
  virtual void sum(at::Tensor& tensor) = 0;
};

/// What a layer calls before its forward reads its parameters. Out-of-order backprop
/// (trainer/DataParallel.h, parallel::GradSync::ooo) updates some parameters late, during the next
/// step's forward: the gate applies a parameter's pending update there, so that each layer waits
/// only for its own reduced gradient.
class ParameterGate {
 public:
  virtual ~ParameterGate() = default;
  /// `parameters`: the layer's defined parameters, about to be read.
  virtual void before_forward(const std::vector<at::Tensor>& parameters) = 0;
};

struct Runtime {
  memory::ActivationStore* store = nullptr;
  GradScheduler* scheduler = nullptr;
  ReplicaSum* replicas = nullptr;  ///< nullptr: one replica (layers use their local batch)
  ParameterGate* gate = nullptr;   ///< nullptr: parameters are always up to date
};

/// The calling thread's runtime (store and scheduler never null; replicas null in one process).
Runtime current_runtime();

/// Sets the calling thread's store, scheduler, replica sum and/or gate for its scope (nullptr
/// keeps the current one).
class RuntimeGuard {
 public:
  RuntimeGuard(memory::ActivationStore* store, GradScheduler* scheduler,
               ReplicaSum* replicas = nullptr, ParameterGate* gate = nullptr);
  ~RuntimeGuard();
  RuntimeGuard(const RuntimeGuard&) = delete;
  RuntimeGuard& operator=(const RuntimeGuard&) = delete;

 private:
  Runtime previous_;
};

}  // namespace engram::nn
