#include "cli/Version.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#include <cudnn_version.h>
#include <nccl.h>
#include <torch/csrc/cuda/nccl.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <sstream>

namespace engram::cli {
namespace {

/// CUDA's and cuDNN's version numbers as "13.0" and "9.19.0".
std::string cuda_version(long code) {
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}
std::string cudnn_version(long code) {
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." +
         std::to_string(code % 100);
}
std::string nccl_version(std::uint64_t code) {
  // torch::cuda::nccl::version() packs major << 32 | minor << 16 | patch.
  return std::to_string(code >> 32) + "." + std::to_string((code >> 16) & 0xffff) + "." +
         std::to_string(code & 0xffff);
}

/// "1 (NVIDIA H100 80GB HBM3)", or "none (CUDA driver version is insufficient ...)".
std::string visible_gpus() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // The runtime says "insufficient driver" also when there is no driver at all.
    if (void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD | RTLD_LOCAL);
        driver == nullptr &&
        (driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) == nullptr) {
      cudaGetLastError();
      return "none (no NVIDIA driver: libcuda.so.1 is not installed)";
    } else {
      ::dlclose(driver);
    }
    std::string reason = cudaGetErrorString(status);
    cudaGetLastError();  // clear the error so later CUDA calls do not inherit it
    return "none (" + reason + ")";
  }
  if (count == 0) return "none";
  std::ostringstream text;
  text << count << " (";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp properties{};
    if (i > 0) text << ", ";
    if (cudaGetDeviceProperties(&properties, i) == cudaSuccess)
      text << "cuda:" << i << " " << properties.name;
    else
      text << "cuda:" << i;
  }
  text << ")";
  return text.str();
}

}  // namespace

std::string version_text() {
  const auto& hooks = at::detail::getCUDAHooks();
  std::ostringstream text;
  text << "engram " << build_commit() << "\n";
  text << "libtorch: " << TORCH_VERSION << "\n";
  text << "cuda: " << cuda_version(hooks.versionCUDART()) << " (libtorch), "
       << cuda_version(CUDART_VERSION) << " (engram's CUDA sources)\n";
  text << "cudnn: " << cudnn_version(hooks.versionCuDNN()) << " (libtorch), "
       << cudnn_version(CUDNN_VERSION) << " (engram's CUDA sources)\n";
  text << "nccl: " << nccl_version(torch::cuda::nccl::version()) << " (libtorch), "
       << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH << " (headers)\n";
  text << "gpus visible: " << visible_gpus() << "\n";
  return text.str();
}

}  // namespace engram::cli
