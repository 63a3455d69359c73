#pragma once
/// \file
/// Where a model trains and runs: the device that options name as "cpu", "cuda" (the current
/// CUDA device, index 0 unless CUDA_VISIBLE_DEVICES says otherwise) or "cuda:N". Options hold
/// the name (plain strings, so that the command line needs no torch); a model's train, eval and
/// run functions resolve it once, before any work, and build their model and batches there.
///
/// \code
///   engram::trainer::check_device_name(options.device, "device");   // InvalidOption: syntax
///   c10::Device device = engram::trainer::resolve_device(options.device);  // UsageError: no GPU
///   model->to(device);
/// \endcode

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace engram::trainer {

/// Throws InvalidOption(`field`) unless `name` is "cpu", "cuda" or "cuda:N" (N a device index).
/// Needs no GPU: what `name` asks for is checked by resolve_device().
void check_device_name(const std::string& name, const std::string& field = "device");

/// The device `name` names (check_device_name's syntax). Throws UsageError naming what is
/// missing when `name` asks for CUDA and this process sees no CUDA device (none visible, or the
/// CUDA driver absent), or for an index beyond the devices it sees; InvalidOption(`field`) for a
/// malformed name. "cuda" resolves to an index (cuda:0).
c10::Device resolve_device(const std::string& name, const std::string& field = "device");
/// resolve_device() for a process that sees `visible_devices` CUDA devices (its checks, without
/// asking the driver how many there are unless there are none).
c10::Device resolve_device_among(const std::string& name, int visible_devices,
                                 const std::string& field = "device");

/// The number of CUDA devices this process sees (0 without a driver or GPU).
int cuda_device_count();

/// The device's name for reports: "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3)".
std::string describe_device(const c10::Device& device);

/// Waits for every kernel queued on `device`; nothing on the CPU. Before reading a clock that is
/// to time kernels rather than their launches.
void synchronize(const c10::Device& device);

/// The steady clock once `device`'s queued kernels have run (synchronize(), then the clock): a
/// reading that times kernels, not their launches.
std::chrono::steady_clock::time_point device_now(const c10::Device& device);

/// Bytes of memory `device` has in all: a CUDA device's total global memory (0 for the CPU).
std::int64_t device_memory_bytes(const c10::Device& device);

/// Limits what LibTorch's CUDA caching allocator may hold on `device` (its cudaMalloc'd
/// segments) to `bytes`, as torch.cuda.set_per_process_memory_fraction does: an allocation past
/// it, after the allocator has freed its cached blocks, throws c10::OutOfMemoryError. `bytes` 0
/// lifts the limit. Returns the limit it replaced (0: none), for restoring it. Throws
/// std::invalid_argument for the CPU or for more than the device has.
std::int64_t limit_device_memory(const c10::Device& device, std::int64_t bytes);

/// Waits for `device`'s kernels, then gives the CUDA caching allocator's unused cached segments
/// back to the device (torch.cuda.empty_cache()); nothing on the CPU.
void release_cached_device_memory(const c10::Device& device);

/// limit_device_memory() for a scope: the limit it replaced is back when it ends.
class DeviceMemoryLimit {
 public:
  DeviceMemoryLimit(const c10::Device& device, std::int64_t bytes);
  ~DeviceMemoryLimit();
  DeviceMemoryLimit(const DeviceMemoryLimit&) = delete;
  DeviceMemoryLimit& operator=(const DeviceMemoryLimit&) = delete;

 private:
  c10::Device device_;
  std::int64_t before_;
};

/// Makes CUDA computation repeat itself bit for bit where it can: cuDNN's deterministic
/// algorithms without benchmark mode, ATen's deterministic algorithms (an operation with none
/// throws, naming itself), and cuBLAS's fixed workspace (CUBLAS_WORKSPACE_CONFIG, set before
/// cuBLAS starts when the environment does not set it), but not ATen's filling of every new
/// tensor before its first write, which costs a kernel per buffer. On the CPU, computation
/// repeats itself already (one thread order per run); this changes nothing there but the flags.
void make_deterministic();

}  // namespace engram::trainer
