#include "memory/ReluFormat.h"
#include "memory/cuda/ReluCompressionCuda.h"

#include <cub/block/block_scan.cuh>

namespace engram::memory::cuda {
namespace {

using relu_format::kBlockElements;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kWarpElements = static_cast<int>(kBlockElements) / kWarps;  // 1024
constexpr int kWordsPerWarp = kWarpElements / 32;                         // 32
static_assert(kBlockElements % kThreads == 0 && kWordsPerWarp == 32,
              "a warp's lanes hold its block's bitmap words, one each");
constexpr int kScanThreads = kScanBlocksPerPass;
constexpr unsigned kFullMask = 0xffffffffu;

/// 32-bit bitmap word `word` (elements [32 * word, 32 * word + 32)); bytes past the end read 0.
__device__ __forceinline__ unsigned load_word(const std::uint8_t* bitmap, std::int64_t word,
                                              std::int64_t bitmap_bytes) {
  const std::int64_t first = 4 * word;
  if (first + 4 <= bitmap_bytes) return *reinterpret_cast<const unsigned*>(bitmap + first);
  unsigned w = 0;
  for (std::int64_t k = first; k < bitmap_bytes; ++k) w |= unsigned{bitmap[k]} << (8 * (k - first));
  return w;
}

__device__ __forceinline__ void store_word(std::uint8_t* bitmap, std::int64_t word,
                                           std::int64_t bitmap_bytes, unsigned w) {
  const std::int64_t first = 4 * word;
  if (first + 4 <= bitmap_bytes) {
    *reinterpret_cast<unsigned*>(bitmap + first) = w;
    return;
  }
  for (std::int64_t k = first; k < bitmap_bytes; ++k) {
    bitmap[k] = static_cast<std::uint8_t>(w >> (8 * (k - first)));
  }
}

/// One CUDA block per format block: bitmap words and the block's count, written to starts[b + 1].
__global__ void __launch_bounds__(kThreads)
    bitmap_count_kernel(const unsigned* __restrict__ x, std::int64_t n,
                        std::uint8_t* __restrict__ bitmap, std::int64_t bitmap_bytes,
                        std::int64_t* __restrict__ starts) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t warp_begin =
      static_cast<std::int64_t>(blockIdx.x) * kBlockElements + std::int64_t{warp} * kWarpElements;
  int count = 0;
#pragma unroll 8
  for (int w = 0; w < kWordsPerWarp; ++w) {
    const std::int64_t base = warp_begin + 32 * w;
    const std::int64_t i = base + lane;
    const unsigned word = __ballot_sync(kFullMask, i < n && x[i] != 0u);
    if (lane == 0 && base < n) store_word(bitmap, base / 32, bitmap_bytes, word);
    count += __popc(word);
  }
  __shared__ int warp_counts[kWarps];
  if (lane == 0) warp_counts[warp] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::int64_t total = 0;
    for (int k = 0; k < kWarps; ++k) total += warp_counts[k];
    starts[blockIdx.x + 1] = total;
  }
}

/// One CUDA block: starts[1..blocks] hold the blocks' counts; an inclusive scan of them in place
/// makes starts[b] the exclusive prefix sum (starts[0] = 0). The launch bound keeps the kernel
/// within 64 registers a thread: unbounded, nvcc gave the 64-bit block scan 90, and 1024 such
/// threads ask more than a block's 64K registers (cudaErrorLaunchOutOfResources on an H200).
__global__ void __launch_bounds__(kScanThreads)
    scan_kernel(std::int64_t* starts, std::int64_t blocks) {
  using Scan = cub::BlockScan<long long, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ long long carry;
  if (threadIdx.x == 0) {
    carry = 0;
    starts[0] = 0;
  }
  __syncthreads();
  for (std::int64_t chunk = 0; chunk < blocks; chunk += kScanThreads) {
    const std::int64_t i = chunk + threadIdx.x;
    const long long count = i < blocks ? starts[i + 1] : 0;
    long long inclusive = 0, total = 0;
    Scan(temp).InclusiveSum(count, inclusive, total);
    if (i < blocks) starts[i + 1] = carry + inclusive;
    __syncthreads();  // everyone has read `carry` and `temp`
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

/// The warp's bitmap words (lane k holds word k of the warp's 32) and the index in `values` of
/// its first value, from `block_start` and the popcounts of the block's earlier warps.
struct WarpStart {
  unsigned word;        // this lane's word
  std::int64_t values;  // first value index of the warp
};

__device__ __forceinline__ WarpStart warp_start(const std::uint8_t* bitmap,
                                                std::int64_t bitmap_bytes,
                                                std::int64_t block_start) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t first_word = (static_cast<std::int64_t>(blockIdx.x) * kBlockElements +
                                   std::int64_t{warp} * kWarpElements) /
                                  32;
  const std::int64_t words = (bitmap_bytes + 3) / 4;
  const std::int64_t my_word = first_word + lane;
  const unsigned word = my_word < words ? load_word(bitmap, my_word, bitmap_bytes) : 0u;
  int count = __popc(word);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) count += __shfl_xor_sync(kFullMask, count, offset);
  __shared__ int warp_counts[kWarps];
  if (lane == 0) warp_counts[warp] = count;
  __syncthreads();
  std::int64_t start = block_start;
  for (int k = 0; k < warp; ++k) start += warp_counts[k];
  return {word, start};
}

__global__ void __launch_bounds__(kThreads)
    compact_kernel(const unsigned* __restrict__ x, const std::uint8_t* __restrict__ bitmap,
                   std::int64_t bitmap_bytes, const std::int64_t* __restrict__ starts,
                   unsigned* __restrict__ values) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpStart ws = warp_start(bitmap, bitmap_bytes, starts[blockIdx.x]);
  const std::int64_t warp_begin =
      static_cast<std::int64_t>(blockIdx.x) * kBlockElements + std::int64_t{warp} * kWarpElements;
  const unsigned below = (1u << lane) - 1u;
  std::int64_t next = ws.values;
#pragma unroll 4
  for (int w = 0; w < kWordsPerWarp; ++w) {
    const unsigned word = __shfl_sync(kFullMask, ws.word, w);
    const std::int64_t i = warp_begin + 32 * w + lane;
    if ((word >> lane) & 1u) values[next + __popc(word & below)] = x[i];
    next += __popc(word);
  }
}

__global__ void __launch_bounds__(kThreads)
    decompress_kernel(const std::uint8_t* __restrict__ bitmap, std::int64_t bitmap_bytes,
                      const std::int64_t* __restrict__ offsets, const unsigned* __restrict__ values,
                      std::int64_t n, unsigned* __restrict__ out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t block_start = blockIdx.x == 0 ? 0 : offsets[blockIdx.x - 1];
  const WarpStart ws = warp_start(bitmap, bitmap_bytes, block_start);
  const std::int64_t warp_begin =
      static_cast<std::int64_t>(blockIdx.x) * kBlockElements + std::int64_t{warp} * kWarpElements;
  const unsigned below = (1u << lane) - 1u;
  std::int64_t next = ws.values;
#pragma unroll 4
  for (int w = 0; w < kWordsPerWarp; ++w) {
    const unsigned word = __shfl_sync(kFullMask, ws.word, w);
    const std::int64_t i = warp_begin + 32 * w + lane;
    if (i < n) out[i] = ((word >> lane) & 1u) ? values[next + __popc(word & below)] : 0u;
    next += __popc(word);
  }
}

unsigned grid(std::int64_t n) { return static_cast<unsigned>(relu_format::num_blocks(n)); }

}  // namespace

cudaError_t relu_bitmap_and_starts(const float* x, std::int64_t n, std::uint8_t* bitmap,
                                   std::int64_t* starts, cudaStream_t stream) {
  if (n <= 0) return cudaMemsetAsync(starts, 0, sizeof(std::int64_t), stream);
  const std::int64_t blocks = relu_format::num_blocks(n);
  bitmap_count_kernel<<<grid(n), kThreads, 0, stream>>>(
      reinterpret_cast<const unsigned*>(x), n, bitmap, relu_format::bitmap_bytes(n), starts);
  scan_kernel<<<1, kScanThreads, 0, stream>>>(starts, blocks);
  return cudaGetLastError();
}

cudaError_t relu_nonzeros(const std::int64_t* starts, std::int64_t n, std::int64_t* nonzeros,
                          cudaStream_t stream) {
  const std::int64_t blocks = n > 0 ? relu_format::num_blocks(n) : 0;
  cudaError_t e = cudaMemcpyAsync(nonzeros, starts + blocks, sizeof(std::int64_t),
                                  cudaMemcpyDeviceToHost, stream);
  if (e != cudaSuccess) return e;
  return cudaStreamSynchronize(stream);
}

cudaError_t relu_compact(const float* x, std::int64_t n, const std::uint8_t* bitmap,
                         const std::int64_t* starts, float* values, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  compact_kernel<<<grid(n), kThreads, 0, stream>>>(reinterpret_cast<const unsigned*>(x), bitmap,
                                                   relu_format::bitmap_bytes(n), starts,
                                                   reinterpret_cast<unsigned*>(values));
  return cudaGetLastError();
}

cudaError_t relu_decompress(const std::uint8_t* bitmap, const std::int64_t* offsets,
                            const float* values, std::int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  decompress_kernel<<<grid(n), kThreads, 0, stream>>>(bitmap, relu_format::bitmap_bytes(n), offsets,
                                                      reinterpret_cast<const unsigned*>(values), n,
                                                      reinterpret_cast<unsigned*>(out));
  return cudaGetLastError();
}

}  // namespace engram::memory::cuda
