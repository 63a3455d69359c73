#include "nn/GradScheduler.h"

#include "memory/MemoryTracker.h"

#include <ATen/core/grad_mode.h>
#include <c10/cuda/CUDAFunctions.h>

#include <chrono>
#include <utility>

namespace engram::nn {

void GradScheduler::on_ready(ReadyCallback callback) { callbacks_.push_back(std::move(callback)); }

void GradScheduler::run(WeightGradTask& task) {
  {
    memory::SpanGuard span(task.layer.c_str(), "weight_grad");
    // Working buffers are workspace; what stays as a .grad is retagged as a gradient when it is
    // stored (detail::accumulate_grad).
    memory::TagGuard tag(memory::Tag::workspace);
    at::NoGradGuard no_grad;
    const bool on_device =
        time_kernels_ && !task.parameters.empty() && task.parameters.front().is_cuda();
    if (on_device) c10::cuda::device_synchronize();
    const auto start = std::chrono::steady_clock::now();
    task.compute();
    if (on_device) c10::cuda::device_synchronize();
    task.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  for (const auto& callback : callbacks_) callback(task);
}

void DeferredScheduler::finish() {
  if (order_ == Order::submission) {
    while (!queue_.empty()) {
      WeightGradTask task = std::move(queue_.front());
      queue_.pop_front();
      run(task);
    }
    return;
  }
  // Reverse: the layers (a task's first parameter) in the reverse of their last submission, and
  // each layer's tasks in submission order, so that every gradient adds up in the order it would
  // have without deferring.
  std::deque<WeightGradTask> queue = std::move(queue_);
  queue_.clear();
  std::vector<char> done(queue.size(), 0);
  for (std::size_t i = queue.size(); i-- > 0;) {
    if (done[i]) continue;
    const auto* layer =
        queue[i].parameters.empty() ? nullptr : queue[i].parameters.front().unsafeGetTensorImpl();
    for (std::size_t j = 0; j <= i; ++j) {
      const bool same = j == i || (layer != nullptr && !done[j] && !queue[j].parameters.empty() &&
                                   queue[j].parameters.front().unsafeGetTensorImpl() == layer);
      if (!same || done[j]) continue;
      done[j] = 1;
      run(queue[j]);
      queue[j] = WeightGradTask();  // what it captured goes now
    }
  }
}

ThreadedScheduler::ThreadedScheduler(std::function<void()> on_worker_start)
    : worker_([this, start = std::move(on_worker_start)] { loop(start); }) {}

ThreadedScheduler::~ThreadedScheduler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  worker_.join();
}

void ThreadedScheduler::submit(WeightGradTask task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  work_.notify_one();
}

void ThreadedScheduler::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return queue_.empty() && !running_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

std::size_t ThreadedScheduler::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size() + (running_ ? 1 : 0);
}

void ThreadedScheduler::loop(const std::function<void()>& on_start) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (on_start) {
    try {
      lock.unlock();
      on_start();
      lock.lock();
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();  // every task is dropped; finish() reports it
    }
  }
  while (true) {
    work_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    WeightGradTask task = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    const bool failed = error_ != nullptr;  // after a failure the rest are dropped
    lock.unlock();
    try {
      if (!failed) run(task);
    } catch (...) {
      std::lock_guard<std::mutex> relock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    task = WeightGradTask();  // what it captured goes here, on the worker
    lock.lock();
    running_ = false;
    if (queue_.empty()) done_.notify_all();
  }
}

}  // namespace engram::nn
