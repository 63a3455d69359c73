#include "nn/GradScheduler.h"

#include "memory/MemoryTracker.h"

#include <ATen/core/grad_mode.h>

#include <chrono>

namespace engram::nn {

void GradScheduler::on_ready(ReadyCallback callback) { callbacks_.push_back(std::move(callback)); }

void GradScheduler::run(WeightGradTask& task) {
  {
    memory::SpanGuard span(task.layer.c_str(), "weight_grad");
    // Working buffers are workspace; what stays as a .grad is retagged as a gradient when it is
    // stored (detail::accumulate_grad).
    memory::TagGuard tag(memory::Tag::workspace);
    at::NoGradGuard no_grad;
    const auto start = std::chrono::steady_clock::now();
    task.compute();
    task.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
