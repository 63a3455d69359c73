#include "memory/PinnedCopy.h"

#include <ATen/ATen.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::memory {

struct StreamPoint::State {
  c10::cuda::CUDAStream stream;
  std::shared_ptr<c10::cuda::CUDAEvent> event;
};

namespace {

void check_cuda(const c10::Device& device, const char* what) {
  if (!device.is_cuda())
    throw std::invalid_argument(std::string(what) + ": " + device.str() + " is no CUDA device");
  if (c10::cuda::device_count() == 0)
    throw std::runtime_error(std::string(what) + ": no CUDA device is visible");
}

StreamPoint record_on(const c10::cuda::CUDAStream& stream) {
  auto event = std::make_shared<c10::cuda::CUDAEvent>(cudaEventDisableTiming);
  event->record(stream);
  return StreamPoint(std::make_shared<StreamPoint::State>(StreamPoint::State{stream, event}));
}

}  // namespace

StreamPoint StreamPoint::now(const c10::Device& device) {
  check_cuda(device, "StreamPoint");
  return record_on(c10::cuda::getCurrentCUDAStream(device.index()));
}

c10::Device StreamPoint::device() const { return state_->stream.device(); }

struct PinnedCopier::State {
  c10::Device device;
  c10::cuda::CUDAStream copy;
};

PinnedCopier::PinnedCopier(const c10::Device& device) {
  check_cuda(device, "PinnedCopier");
  state_ = std::make_unique<State>(
      State{device, c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())});
}

PinnedCopier::~PinnedCopier() = default;

namespace {

/// Runs `copy` on `stream` between two timing events and waits for it to land; the copy's own
/// nanoseconds into `copy_ns` (if given).
template <typename Copy>
void timed_copy(const c10::cuda::CUDAStream& stream, std::int64_t* copy_ns, Copy&& copy) {
  c10::cuda::CUDAEvent start(cudaEventDefault), landed(cudaEventDefault);
  start.record(stream);
  {
    const c10::cuda::CUDAStreamGuard on(stream);
    copy();
  }
  landed.record(stream);
  landed.synchronize();
  if (copy_ns != nullptr)
    *copy_ns = static_cast<std::int64_t>(static_cast<double>(start.elapsed_time(landed)) * 1e6);
}

}  // namespace

at::Tensor PinnedCopier::to_host(const at::Tensor& buffer, const StreamPoint& after,
                                 std::int64_t* copy_ns) {
  if (!buffer.is_cuda() || buffer.device() != state_->device)
    throw std::invalid_argument("PinnedCopier::to_host: a tensor on " + buffer.device().str() +
                                ", the copier is for " + state_->device.str());
  const c10::cuda::CUDAGuard on(state_->device);
  at::Tensor host = at::empty_strided(
      buffer.sizes(), buffer.strides(),
      at::TensorOptions().dtype(buffer.scalar_type()).pinned_memory(true));
  after.state().event->block(state_->copy);
  timed_copy(state_->copy, copy_ns, [&] { host.copy_(buffer, /*non_blocking=*/true); });
  return host;
}

at::Tensor PinnedCopier::to_device(const at::Tensor& host, const StreamPoint& on,
                                   std::int64_t* copy_ns) {
  if (!host.device().is_cpu())
    throw std::invalid_argument("PinnedCopier::to_device: a tensor on " + host.device().str());
  const c10::cuda::CUDAGuard guard(state_->device);
  at::Tensor buffer;
  {
    const c10::cuda::CUDAStreamGuard stream(state_->copy);
    buffer =
        at::empty_strided(host.sizes(), host.strides(),
                          at::TensorOptions().dtype(host.scalar_type()).device(state_->device));
  }
  timed_copy(state_->copy, copy_ns, [&] { buffer.copy_(host, /*non_blocking=*/true); });
  // Read on the compute stream from now on: its block is reused only after that stream's work.
  c10::cuda::CUDACachingAllocator::recordStream(buffer.storage().data_ptr(), on.state().stream);
  return buffer;
}

void release_cached_pinned_memory() {
  if (c10::cuda::device_count() == 0) return;
  at::getHostAllocator(at::kCUDA)->empty_cache();
}

BusBandwidth measure_bus_bandwidth(const c10::Device& device, std::int64_t bytes, int repeats) {
  check_cuda(device, "measure_bus_bandwidth");
  if (bytes <= 0 || repeats < 1)
    throw std::invalid_argument("measure_bus_bandwidth: bytes and repeats must be positive");
  const c10::cuda::CUDAGuard guard(device);
  const c10::cuda::CUDAStream copy = c10::cuda::getStreamFromPool(false, device.index());
  at::Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  at::Tensor on_device = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  c10::cuda::device_synchronize();
  auto time = [&](bool to_host) {
    std::vector<double> rates;
    const c10::cuda::CUDAStreamGuard stream(copy);
    for (int i = 0; i < repeats; ++i) {
      c10::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
      start.record(copy);
      if (to_host) {
        host.copy_(on_device, /*non_blocking=*/true);
      } else {
        on_device.copy_(host, /*non_blocking=*/true);
      }
      end.record(copy);
      end.synchronize();
      const double ms = start.elapsed_time(end);
      rates.push_back(static_cast<double>(bytes) / (std::max(ms, 1e-6) / 1000.0));
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
  };
  BusBandwidth b;
  b.device_to_host = time(true);
  b.host_to_device = time(false);
  b.bytes = bytes;
  b.repeats = repeats;
  return b;
}

}  // namespace engram::memory
