#include "nn/GradScheduler.h"

#include "memory/MemoryTracker.h"

#include <ATen/core/grad_mode.h>

namespace engram::nn {

void GradScheduler::on_ready(ReadyCallback callback) { callbacks_.push_back(std::move(callback)); }

void GradScheduler::run(WeightGradTask& task) {
  {
    memory::SpanGuard span(task.layer.c_str(), "weight_grad");
    // Working buffers are workspace; what stays as a .grad is retagged as a gradient when it is
    // stored (detail::accumulate_grad).
    memory::TagGuard tag(memory::Tag::workspace);
    at::NoGradGuard no_grad;
    task.compute();
  }
  for (const auto& callback : callbacks_) callback(task);
}

void DeferredScheduler::finish() {
  while (!queue_.empty()) {
    WeightGradTask task;
    if (order_ == Order::reverse) {
      task = std::move(queue_.back());
      queue_.pop_back();
    } else {
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    run(task);
  }
}

}  // namespace engram::nn
