#include "nn/StreamScheduler.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>
#include <utility>

namespace engram::nn {
namespace {

class CudaStreams : public StreamScheduler::Streams {
 public:
  CudaStreams() : side_(c10::cuda::getStreamFromPool()) {}

  void side_waits_for_compute() override {
    at::cuda::CUDAEvent written;
    written.record(c10::cuda::getCurrentCUDAStream());
    written.block(side_);
  }

  void on_side(const std::function<void()>& fn) override {
    const c10::cuda::CUDAStreamGuard guard(side_);
    fn();
  }

  void compute_waits_for_side() override {
    at::cuda::CUDAEvent done;
    done.record(side_);
    done.block(c10::cuda::getCurrentCUDAStream());
  }

  std::size_t record_on_side() override {
    at::cuda::CUDAEvent event;
    event.record(side_);
    return recorded_.add(std::move(event));
  }

  bool side_passed(std::size_t number) override { return recorded_.passed(number); }

 private:
  c10::cuda::CUDAStream side_;
  PassedEvents<at::cuda::CUDAEvent> recorded_;
};

std::unique_ptr<StreamScheduler::Streams> cuda_streams() {
  if (c10::cuda::device_count() == 0)
    throw std::runtime_error(
        "a second CUDA stream for the weight gradients needs a CUDA device, and this process "
        "sees none");
  return std::make_unique<CudaStreams>();
}

}  // namespace

StreamScheduler::StreamScheduler() : StreamScheduler(cuda_streams()) {}

StreamScheduler::StreamScheduler(std::unique_ptr<Streams> streams) : streams_(std::move(streams)) {}

StreamScheduler::~StreamScheduler() {
  // Tasks still held (a backward that threw) may have kernels in flight that read what they
  // captured: the compute stream waits for them before those blocks can be reused there.
  if (!held_.empty()) {
    try {
      finish();
    } catch (const std::exception&) {
      // A failed device: nothing left to order.
    }
  }
}

void StreamScheduler::submit(WeightGradTask task) {
  // What earlier tasks captured goes once the side stream has finished reading it.
  while (!held_.empty() && streams_->side_passed(held_.front().event)) held_.pop_front();
  streams_->side_waits_for_compute();
  try {
    streams_->on_side([&] { run(task); });
  } catch (...) {
    // Some of its kernels may be enqueued: what it captured is held as a finished task's.
    hold(std::move(task));
    throw;
  }
  hold(std::move(task));
}

void StreamScheduler::hold(WeightGradTask task) {
  const std::size_t event = streams_->record_on_side();
  held_.push_back({std::move(task), event});
}

void StreamScheduler::finish() {
  streams_->compute_waits_for_side();
  held_.clear();
}

}  // namespace engram::nn
