// The CUDA kernels of ReLU compression (memory/cuda/ReluCompressionCuda.h) against the CPU kernels
// (memory/ReluCompression.h), bit for bit: bitmap, offsets, values and the decompressed tensor.
// Built only with nvcc, linked with the shared CUDA runtime; every test skips without a device.
#include "memory/ReluCompression.h"
#include "memory/cuda/ReluCompressionCuda.h"

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace engram::memory {
namespace {

/// Whether a CUDA device is visible; if not, `why` says what the runtime answered.
bool have_device(std::string& why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    why = cudaGetErrorString(e);
    return false;
  }
  why = "no CUDA device";
  return count > 0;
}

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

/// A device buffer of `bytes` (at least 1, so that empty tensors get a valid pointer).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&data_, bytes > 0 ? bytes : 1) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void upload(const void* host) const {
    ASSERT_EQ(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> host(bytes_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

std::vector<std::uint8_t> bytes_of(const at::Tensor& t) {
  std::vector<std::uint8_t> out(t.nbytes());
  if (!out.empty()) std::memcpy(out.data(), t.data_ptr(), out.size());
  return out;
}

at::Tensor with_zeros(std::int64_t n, double zeros) {
  at::Generator gen = at::detail::createCPUGenerator(3);
  at::Tensor x = at::rand({n}, gen) + 1e-3;
  const auto count = static_cast<std::int64_t>(std::llround(zeros * static_cast<double>(n)));
  if (count > 0) x.index_put_({at::randperm(n, gen).slice(0, 0, count)}, 0.0f);
  return x;
}

TEST(ReluCompressionCuda, MatchesTheCpuKernelsBitForBit) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  const std::int64_t block = relu_format::kBlockElements;
  // Above one scan pass of blocks the offsets' scan carries its sum from pass to pass.
  const std::int64_t one_scan_pass = cuda::kScanBlocksPerPass * block;
  for (const std::int64_t n :
       {std::int64_t{0}, std::int64_t{1}, std::int64_t{31}, std::int64_t{33}, block - 1, block,
        block + 1, 5 * block + 100, std::int64_t{1} << 20, one_scan_pass + block + 17}) {
    for (const double zeros : {0.0, 0.01, 0.5, 0.99, 1.0}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", zeros " + std::to_string(zeros));
      at::Tensor x = with_zeros(n, zeros);
      if (n > 2) {  // special values are values
        auto* bits = static_cast<std::uint32_t*>(x.data_ptr());
        bits[0] = 0x80000000u;  // -0.0
        bits[1] = 0x7fc12345u;  // NaN with a payload
      }
      const CompressedRelu cpu = compress_relu(x);

      DeviceBuffer input(x.nbytes());
      input.upload(x.data_ptr());
      DeviceBuffer bitmap(static_cast<std::size_t>(relu_format::bitmap_bytes(n)));
      DeviceBuffer starts(static_cast<std::size_t>(relu_format::num_blocks(n) + 1) * 8);
      CUDA_OK(cuda::relu_bitmap_and_starts(input.as<float>(), n, bitmap.as<std::uint8_t>(),
                                           starts.as<std::int64_t>()));
      std::int64_t nonzeros = -1;
      CUDA_OK(cuda::relu_nonzeros(starts.as<std::int64_t>(), n, &nonzeros));
      ASSERT_EQ(nonzeros, cpu.nonzeros());
      DeviceBuffer values(static_cast<std::size_t>(nonzeros) * 4);
      CUDA_OK(cuda::relu_compact(input.as<float>(), n, bitmap.as<std::uint8_t>(),
                                 starts.as<std::int64_t>(), values.as<float>()));
      CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(bitmap.download(), bytes_of(cpu.bitmap));
      EXPECT_EQ(values.download(), bytes_of(cpu.values));
      const std::vector<std::uint8_t> all_starts = starts.download();
      const std::vector<std::uint8_t> stored(all_starts.begin() + 8,
                                             all_starts.begin() + 8 + cpu.offsets.nbytes());
      EXPECT_EQ(stored, bytes_of(cpu.offsets));

      // Decompression on the device of what the CPU compressed.
      DeviceBuffer cpu_bitmap(cpu.bitmap.nbytes()), cpu_offsets(cpu.offsets.nbytes()),
          cpu_values(cpu.values.nbytes()), out(x.nbytes());
      cpu_bitmap.upload(cpu.bitmap.data_ptr());
      cpu_offsets.upload(cpu.offsets.data_ptr());
      cpu_values.upload(cpu.values.data_ptr());
      CUDA_OK(cuda::relu_decompress(cpu_bitmap.as<std::uint8_t>(), cpu_offsets.as<std::int64_t>(),
                                    cpu_values.as<float>(), n, out.as<float>()));
      CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(out.download(), bytes_of(x));
    }
  }
}

}  // namespace
}  // namespace engram::memory
