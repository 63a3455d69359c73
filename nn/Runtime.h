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

struct Runtime {
  memory::ActivationStore* store = nullptr;
  GradScheduler* scheduler = nullptr;
};

/// The calling thread's runtime (never null members).
Runtime current_runtime();

/// Sets the calling thread's store and/or scheduler for its scope.
class RuntimeGuard {
 public:
  RuntimeGuard(memory::ActivationStore* store, GradScheduler* scheduler);
  ~RuntimeGuard();
  RuntimeGuard(const RuntimeGuard&) = delete;
  RuntimeGuard& operator=(const RuntimeGuard&) = delete;

 private:
  Runtime previous_;
};

}  // namespace engram::nn
