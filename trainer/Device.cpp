#include "trainer/Device.h"

#include "common/Errors.h"
#include "trainer/MemoryCap.h"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

namespace engram::trainer {
namespace {

/// The device index of "cuda:N" (N digits only, at most 3), -1 for "cuda", -2 when malformed.
int parse_cuda_index(const std::string& name) {
  if (name == "cuda") return -1;
  const std::string prefix = "cuda:";
  if (name.rfind(prefix, 0) != 0) return -2;
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 3) return -2;
  for (char c : digits)
    if (c < '0' || c > '9') return -2;
  return std::stoi(digits);
}

/// Why this process sees no CUDA device, in c10's words (a missing driver, no GPU visible).
std::string why_no_cuda_device() {
  std::string why = "no CUDA device is visible to this process";
  try {
    c10::cuda::device_count_ensure_non_zero();
  } catch (const std::exception& e) {
    std::string message = e.what();
    const auto line = message.find('\n');
    if (line != std::string::npos) message.resize(line);
    if (!message.empty()) why += " (" + message + ")";
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"))
    why += std::string("; CUDA_VISIBLE_DEVICES is '") + visible + "'";
  return why;
}

}  // namespace

void check_device_name(const std::string& name, const std::string& field) {
  if (name == "cpu" || parse_cuda_index(name) >= -1) return;
  throw InvalidOption(field, "must be cpu, cuda or cuda:N (N a device index), not '" + name + "'");
}

int cuda_device_count() { return static_cast<int>(c10::cuda::device_count()); }

c10::Device resolve_device(const std::string& name, const std::string& field) {
  return resolve_device_among(name, name == "cpu" ? 0 : cuda_device_count(), field);
}

c10::Device resolve_device_among(const std::string& name, int count, const std::string& field) {
  check_device_name(name, field);
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (count == 0) throw InvalidOption(field, "is " + name + ", but " + why_no_cuda_device());
  const int index = parse_cuda_index(name);
  if (index >= count)
    throw InvalidOption(field, "is " + name + ", but this process sees " +
                                   std::to_string(count) + " CUDA device" +
                                   (count == 1 ? "" : "s") + " (cuda:0" +
                                   (count > 1 ? " to cuda:" + std::to_string(count - 1) : "") +
                                   ")");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index < 0 ? 0 : index));
}

std::string describe_device(const c10::Device& device) {
  if (!device.is_cuda()) return device.str();
  std::string name = device.str();
  try {
    name += " (" + std::string(at::cuda::getDeviceProperties(device.index())->name) + ")";
  } catch (const std::exception&) {
  }
  return name;
}

void synchronize(const c10::Device& device) {
  if (!device.is_cuda()) return;
  const c10::cuda::CUDAGuard on(device);
  c10::cuda::device_synchronize();
}

std::chrono::steady_clock::time_point device_now(const c10::Device& device) {
  synchronize(device);
  return std::chrono::steady_clock::now();
}

std::int64_t device_memory_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return 0;
  return static_cast<std::int64_t>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
}

std::int64_t limit_device_memory(const c10::Device& device, std::int64_t bytes) {
  if (!device.is_cuda())
    throw std::invalid_argument("limit_device_memory: " + device.str() + " is no CUDA device");
  const std::int64_t total = device_memory_bytes(device);
  // The allocator's limit is a fraction of the device's total global memory (one that throws
  // for bytes outside [0, total]). The allocator refuses both calls until torch's CUDA state is
  // initialised, which no tensor may have done yet.
  const double fraction = allocator_fraction(bytes, total);
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  const double before = c10::cuda::CUDACachingAllocator::getMemoryFraction(device.index());
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device.index());
  return allocator_limit_bytes(before, total);
}

void release_cached_device_memory(const c10::Device& device) {
  if (!device.is_cuda()) return;
  synchronize(device);
  c10::cuda::CUDACachingAllocator::emptyCache();
}

DeviceMemoryLimit::DeviceMemoryLimit(const c10::Device& device, std::int64_t bytes)
    : device_(device), before_(limit_device_memory(device, bytes)) {}

DeviceMemoryLimit::~DeviceMemoryLimit() {
  try {
    limit_device_memory(device_, before_);
  } catch (const std::exception&) {
    // The limit it replaced was valid on this device; nothing to restore otherwise.
  }
}

void make_deterministic() {
  // cuBLAS reads its workspace configuration when its handle is created: before the first
  // matrix product. overwrite = 0 keeps a user's own setting.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  auto& context = at::globalContext();
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
  context.setDeterministicAlgorithms(true, /*warn_only=*/false);
  // Deterministic algorithms alone would also fill every new tensor (NaN, or the largest integer)
  // before its first write, a kernel per buffer on the time of every step. The fill is a guard
  // against reading memory never written, which no Engram kernel does.
  context.setDeterministicFillUninitializedMemory(false);
}

}  // namespace engram::trainer
