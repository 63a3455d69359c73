#pragma once
/// \file
/// Where weight gradients are computed (docs/ARCHITECTURE.md). Every layer of nn/ splits its
/// backward in two: the input gradient (dX), which the next layer's backward waits for, is
/// computed at once; the weight gradient (dW) of each parameter group becomes a WeightGradTask
/// handed to a GradScheduler, which decides when it runs. After running a task the scheduler
/// tells every ready-callback which parameters now hold their gradient, which is what a
/// gradient reducer listens to (data-parallel training: parallel/GradReducer.h).
///
/// \code
///   // reducer: an engram::parallel::GradReducer (parallel/GradReducer.h)
///   engram::nn::DeferredScheduler scheduler(engram::nn::DeferredScheduler::Order::reverse);
///   scheduler.on_ready([&](const engram::nn::WeightGradTask& t) { reducer.ready(t.parameters); });
///   engram::nn::RuntimeGuard use(nullptr, &scheduler);   // the layers' tasks go here
///   loss.backward();                                     // dX chain only; dW tasks queued
///   scheduler.finish();                                  // runs the queued dW tasks
/// \endcode
///
/// A task accumulates into `parameter.mutable_grad()` (defining it if undefined), so gradients are
/// identical whatever the order. A task keeps alive what it captures (saved activations) until it
/// runs.

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace engram::nn {

/// The weight-gradient work of one layer's backward for one parameter group.
struct WeightGradTask {
  std::string layer;                   ///< the layer kind, for traces ("linear", "conv2d", ...)
  std::vector<at::Tensor> parameters;  ///< the tensors whose .grad the task writes
  std::function<void()> compute;       ///< computes and accumulates the gradients
  double seconds = 0;                  ///< how long compute() took; set before the callbacks
};

class GradScheduler {
 public:
  using ReadyCallback = std::function<void(const WeightGradTask&)>;
  virtual ~GradScheduler() = default;

  /// Called from a layer's backward with its weight-gradient work.
  virtual void submit(WeightGradTask task) = 0;
  /// Called once backward returns: runs every task still pending. The default has none.
  virtual void finish() {}
  /// Tasks submitted and not yet run.
  virtual std::size_t pending() const { return 0; }
  virtual const char* name() const = 0;

  /// Registers a callback run after each task, in the thread that ran it.
  void on_ready(ReadyCallback callback);
  /// With `on` (a profiling step on CUDA), a task's `seconds` are its kernels' time: the device
  /// is synchronised before and after its compute(), where otherwise only the launches would be
  /// timed. Off by default: no synchronisation.
  void time_kernels(bool on) { time_kernels_ = on; }

 protected:
  /// Runs `task` (its allocations tagged as workspace, the gradients it stores as gradients;
  /// inside a trace span), then the callbacks.
  void run(WeightGradTask& task);

 private:
  std::vector<ReadyCallback> callbacks_;
  bool time_kernels_ = false;
};

/// Runs each task as soon as it is submitted: the plain backward pass.
class ImmediateScheduler : public GradScheduler {
 public:
  void submit(WeightGradTask task) override { run(task); }
  const char* name() const override { return "immediate"; }
};

/// Queues tasks and runs them in finish(), in submission order or reversed: by layer (a task's
/// first parameter), the layers in the reverse of their last submission and each layer's tasks
/// in submission order, so every gradient accumulates in the same order as without deferring.
/// With a selector,
/// only the tasks it picks are queued and the others run at once: out-of-order backprop defers
/// the weight gradients of the layers nearest the input until the input-gradient chain is done,
/// then runs them input-first (Order::reverse).
class DeferredScheduler : public GradScheduler {
 public:
  enum class Order { submission, reverse };
  using Selector = std::function<bool(const WeightGradTask&)>;
  explicit DeferredScheduler(Order order = Order::submission, Selector defer = {})
      : order_(order), defer_(std::move(defer)) {}
  void submit(WeightGradTask task) override {
    if (defer_ && !defer_(task))
      run(task);
    else
      queue_.push_back(std::move(task));
  }
  void finish() override;
  std::size_t pending() const override { return queue_.size(); }
  const char* name() const override {
    return order_ == Order::reverse ? "deferred-reverse" : "deferred";
  }

 private:
  Order order_;
  Selector defer_;
  std::deque<WeightGradTask> queue_;
};

/// Runs the tasks on a worker thread of its own, in submission order, while the submitting
/// thread goes on with the input-gradient chain: one process's second core (out-of-order
/// backprop's `--ooo-threads 2`). The gradients are the immediate scheduler's bit for bit: the
/// same tasks accumulate in the same order. finish() waits for every task and rethrows the first
/// task's exception. The callbacks run on the worker.
class ThreadedScheduler : public GradScheduler {
 public:
  /// `on_worker_start` runs first on the worker (e.g. to set its intra-op threads).
  explicit ThreadedScheduler(std::function<void()> on_worker_start = {});
  ~ThreadedScheduler() override;
  ThreadedScheduler(const ThreadedScheduler&) = delete;
  ThreadedScheduler& operator=(const ThreadedScheduler&) = delete;
  void submit(WeightGradTask task) override;
  void finish() override;
  std::size_t pending() const override;
  const char* name() const override { return "threaded"; }

 private:
  void loop(const std::function<void()>& on_start);

  mutable std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<WeightGradTask> queue_;
  bool running_ = false;  ///< the worker is running a task
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace engram::nn
