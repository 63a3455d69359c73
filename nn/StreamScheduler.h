#pragma once
/// \file
/// Out-of-order backprop on one GPU (`--ooo-streams 2`; Oh et al., EuroSys 2022): the weight
/// gradients' kernels run on a second CUDA stream while the input-gradient chain goes on on the
/// current one, so that they fill the GPU where the chain's kernels leave it under-occupied.
///
/// Ordering, by events only (no device-wide synchronize):
/// - each task's kernels wait for an event recorded on the compute stream when it is submitted
///   (what it reads, the layer's saved input and its output gradient, is written there);
/// - the task and its ready-callbacks run with the side stream current, so whatever a callback
///   launches (a gradient bucket's copy, a collective) is ordered after the gradients;
/// - finish() makes the compute stream wait for everything on the side stream, so the optimizer
///   reads complete gradients.
/// Memory: LibTorch's caching allocator may hand a freed block to the stream it was allocated
/// on before another stream has finished reading it; so every task is kept, with what it
/// captured, until the side stream has passed an event recorded after it (checked at each
/// submit) or the compute stream has waited for the side stream (finish()), and only then
/// released; a task that throws is kept the same way, since part of it may be enqueued.
/// Gradients are the immediate scheduler's bit for bit: the same tasks accumulate in the same
/// order, on one stream.
///
/// \code
///   engram::nn::StreamScheduler scheduler;                    // on the current CUDA device
///   engram::nn::RuntimeGuard use(nullptr, &scheduler);
///   loss.backward();                                          // dW kernels on the side stream
///   scheduler.finish();                                       // the compute stream waits
/// \endcode

#include "nn/GradScheduler.h"

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <utility>

namespace engram::nn {

/// Events recorded in order on one stream and numbered 1, 2, ...: whether the stream has passed
/// event n, each event forgotten once seen passed (a stream passes its events in order, so
/// those before it have been passed too). `Event` is movable and has `bool query() const`
/// (at::cuda::CUDAEvent); the CUDA side of StreamScheduler keeps its side stream's here.
template <class Event>
class PassedEvents {
 public:
  /// Keeps `event`, recorded after every event added before; returns its number.
  std::size_t add(Event event) {
    recorded_.push_back(std::move(event));
    return first_ + recorded_.size() - 1;
  }
  /// Whether the stream has passed event `number`; false for a number not added yet.
  bool passed(std::size_t number) {
    while (!recorded_.empty() && first_ <= number) {
      if (!recorded_.front().query()) return false;
      recorded_.pop_front();
      ++first_;
    }
    return first_ > number;
  }
  /// Events not yet seen passed.
  std::size_t kept() const { return recorded_.size(); }

 private:
  std::deque<Event> recorded_;  ///< not yet seen passed, in order
  std::size_t first_ = 1;       ///< the number of recorded_.front()
};

class StreamScheduler : public GradScheduler {
 public:
  /// What the scheduler asks of the device: the CUDA streams and events in use, or a recording
  /// in a test of the ordering without a GPU.
  class Streams {
   public:
    virtual ~Streams() = default;
    /// The side stream waits for what the compute (current) stream has enqueued so far.
    virtual void side_waits_for_compute() = 0;
    /// Runs `fn` with the side stream as the current stream.
    virtual void on_side(const std::function<void()>& fn) = 0;
    /// The compute stream waits for what the side stream has enqueued so far.
    virtual void compute_waits_for_side() = 0;
    /// Records an event on the side stream after what it has enqueued so far; returns its
    /// number (1, 2, ... in order).
    virtual std::size_t record_on_side() = 0;
    /// Whether the side stream has passed event `number` (and so every earlier one).
    virtual bool side_passed(std::size_t number) = 0;
  };

  /// A side stream from LibTorch's pool on the current CUDA device. Throws std::runtime_error
  /// when this process sees no CUDA device.
  StreamScheduler();
  explicit StreamScheduler(std::unique_ptr<Streams> streams);
  ~StreamScheduler() override;
  StreamScheduler(const StreamScheduler&) = delete;
  StreamScheduler& operator=(const StreamScheduler&) = delete;

  /// Enqueues the task's kernels on the side stream after the compute stream's work so far.
  void submit(WeightGradTask task) override;
  /// The compute stream waits for the side stream; the tasks kept since the last finish() go.
  void finish() override;
  /// Tasks kept (their kernels enqueued, what they captured held), those the side stream may
  /// not have finished reading.
  std::size_t held() const { return held_.size(); }
  const char* name() const override { return "streams"; }

 private:
  struct Held {
    WeightGradTask task;
    std::size_t event;  ///< recorded on the side stream after the task
  };
  /// Keeps `task` until the side stream has passed an event recorded now.
  void hold(WeightGradTask task);
  std::unique_ptr<Streams> streams_;
  std::deque<Held> held_;
};

}  // namespace engram::nn
