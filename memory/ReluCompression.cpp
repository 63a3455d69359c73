#include "memory/ReluCompression.h"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#ifdef ENGRAM_MEMORY_CUDA
#include "memory/cuda/ReluCompressionCuda.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace engram::memory {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the bitmap is read and written as little-endian 64-bit words");

using relu_format::kBlockElements;
constexpr std::int64_t kWordElements = 64;
static_assert(kBlockElements % kWordElements == 0, "blocks hold whole bitmap words");

/// Bitmap word `word` (elements [64 * word, 64 * word + 64)); the bytes past the bitmap's end
/// read as zeros.
inline std::uint64_t load_word(const std::uint8_t* bitmap, std::int64_t word,
                               std::int64_t bitmap_bytes) {
  const std::int64_t first = word * 8;
  std::uint64_t w = 0;
  std::memcpy(&w, bitmap + first,
              static_cast<std::size_t>(std::min<std::int64_t>(8, bitmap_bytes - first)));
  return w;
}

inline void store_word(std::uint8_t* bitmap, std::int64_t word, std::int64_t bitmap_bytes,
                       std::uint64_t w) {
  const std::int64_t first = word * 8;
  std::memcpy(bitmap + first, &w,
              static_cast<std::size_t>(std::min<std::int64_t>(8, bitmap_bytes - first)));
}

/// Bit j set iff x[j] is not +0.0 (its bits are not all zero), for j < count <= 64.
inline std::uint64_t nonzero_bits(const std::uint32_t* x, std::int64_t count) {
  std::uint64_t w = 0;
#if defined(__SSE2__)
  if (count == kWordElements) {
    const __m128i zero = _mm_setzero_si128();
    for (int j = 0; j < kWordElements; j += 4) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + j));
      const int is_zero = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, zero)));
      w |= static_cast<std::uint64_t>(~is_zero & 0xF) << j;
    }
    return w;
  }
#endif
  for (std::int64_t j = 0; j < count; ++j) w |= static_cast<std::uint64_t>(x[j] != 0) << j;
  return w;
}

/// Pass 1 for block b: writes its bitmap words and returns its nonzero count.
std::int64_t bitmap_block(const std::uint32_t* x, std::int64_t n, std::int64_t b,
                          std::uint8_t* bitmap, std::int64_t bitmap_bytes) {
  const std::int64_t begin = b * kBlockElements, end = std::min(n, begin + kBlockElements);
  std::int64_t count = 0;
  for (std::int64_t i = begin; i < end; i += kWordElements) {
    const std::uint64_t w = nonzero_bits(x + i, std::min(kWordElements, end - i));
    store_word(bitmap, i / kWordElements, bitmap_bytes, w);
    count += __builtin_popcountll(w);
  }
  return count;
}

/// Pass 3 for block b: its nonzero elements, in order, to values[start...].
void compact_block(const std::uint32_t* x, std::int64_t n, std::int64_t b,
                   const std::uint8_t* bitmap, std::int64_t bitmap_bytes, std::uint32_t* values,
                   std::int64_t start) {
  const std::int64_t begin = b * kBlockElements, end = std::min(n, begin + kBlockElements);
  std::uint32_t* out = values + start;
  for (std::int64_t i = begin; i < end; i += kWordElements) {
    std::uint64_t w = load_word(bitmap, i / kWordElements, bitmap_bytes);
    if (w == ~std::uint64_t{0}) {
      std::memcpy(out, x + i, kWordElements * sizeof(std::uint32_t));
      out += kWordElements;
      continue;
    }
    while (w != 0) {
      *out++ = x[i + __builtin_ctzll(w)];
      w &= w - 1;
    }
  }
}

/// Decompression of block b from values[start...].
void scatter_block(const std::uint32_t* values, std::int64_t start, std::int64_t n, std::int64_t b,
                   const std::uint8_t* bitmap, std::int64_t bitmap_bytes, std::uint32_t* out) {
  const std::int64_t begin = b * kBlockElements, end = std::min(n, begin + kBlockElements);
  const std::uint32_t* in = values + start;
  for (std::int64_t i = begin; i < end; i += kWordElements) {
    std::uint64_t w = load_word(bitmap, i / kWordElements, bitmap_bytes);
    std::uint32_t* o = out + i;
    const std::int64_t count = std::min(kWordElements, end - i);
    if (w == ~std::uint64_t{0}) {
      std::memcpy(o, in, kWordElements * sizeof(std::uint32_t));
      in += kWordElements;
      continue;
    }
    std::memset(o, 0, static_cast<std::size_t>(count) * sizeof(std::uint32_t));
    while (w != 0) {
      o[__builtin_ctzll(w)] = *in++;
      w &= w - 1;
    }
  }
}

/// The start of block b in the values, from the stored offsets (block 0 starts at 0).
inline std::int64_t block_start(const std::int64_t* offsets, std::int64_t b) {
  return b == 0 ? 0 : offsets[b - 1];
}

}  // namespace

double CompressedRelu::sparsity() const {
  return numel > 0 ? static_cast<double>(zeros()) / static_cast<double>(numel) : 0.0;
}

std::int64_t CompressedRelu::nbytes() const {
  std::int64_t bytes = 0;
  for (const at::Tensor* t : {&bitmap, &offsets, &values}) {
    if (t->defined()) bytes += static_cast<std::int64_t>(t->nbytes());
  }
  return bytes;
}

std::int64_t CompressedRelu::bitmap_plus_values_bytes() const {
  return relu_format::bitmap_plus_values_bytes(numel, nonzeros());
}

void CompressedRelu::reset() {
  bitmap.reset();
  offsets.reset();
  values.reset();
}

namespace {

#ifdef ENGRAM_MEMORY_CUDA
void check_launch(cudaError_t error, const char* what) {
  TORCH_CHECK(error == cudaSuccess, what, ": ", cudaGetErrorString(error));
}
#endif

/// The CUDA kernels of memory/cuda/ on the tensor's device and its current stream: the same
/// bytes as the CPU's. Sizing the values needs the count of nonzeros on the host, so the stream
/// is synchronised once, between the counting and the compaction.
void compress_on_device(const at::Tensor& x, CompressedRelu& c) {
#ifdef ENGRAM_MEMORY_CUDA
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  const std::int64_t n = c.numel;
  const auto on = x.options();
  c.bitmap = at::empty({relu_format::bitmap_bytes(n)}, on.dtype(at::kByte));
  if (n == 0) {
    c.offsets = at::empty({0}, on.dtype(at::kLong));
    c.values = at::empty({0}, on.dtype(at::kFloat));
    return;
  }
  at::Tensor starts = at::empty({relu_format::num_blocks(n) + 1}, on.dtype(at::kLong));
  const auto* data = x.data_ptr<float>();
  check_launch(cuda::relu_bitmap_and_starts(data, n, c.bitmap.data_ptr<std::uint8_t>(),
                                            starts.data_ptr<std::int64_t>(), stream),
               "compress_relu: the bitmap");
  std::int64_t nonzeros = 0;
  check_launch(cuda::relu_nonzeros(starts.data_ptr<std::int64_t>(), n, &nonzeros, stream),
               "compress_relu: the count");
  c.values = at::empty({nonzeros}, on.dtype(at::kFloat));
  check_launch(cuda::relu_compact(data, n, c.bitmap.data_ptr<std::uint8_t>(),
                                  starts.data_ptr<std::int64_t>(), c.values.data_ptr<float>(),
                                  stream),
               "compress_relu: the compaction");
  // The stored offsets are the starts of blocks 1..; the scratch of the others goes.
  c.offsets = starts.narrow(0, 1, relu_format::stored_offsets(n)).clone();
#else
  (void)x;
  (void)c;
  TORCH_CHECK(false,
              "compress_relu: this build has no CUDA kernels (configured with ENGRAM_CUDA=OFF)");
#endif
}

at::Tensor decompress_on_device(const CompressedRelu& c) {
#ifdef ENGRAM_MEMORY_CUDA
  const c10::cuda::CUDAGuard guard(c.values.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(c.values.device().index()).stream();
  at::Tensor out = at::empty_strided(c.sizes, c.strides, c.values.options());
  check_launch(cuda::relu_decompress(c.bitmap.data_ptr<std::uint8_t>(),
                                     c.offsets.data_ptr<std::int64_t>(), c.values.data_ptr<float>(),
                                     c.numel, out.data_ptr<float>(), stream),
               "decompress_relu");
  return out;
#else
  (void)c;
  TORCH_CHECK(false,
              "decompress_relu: this build has no CUDA kernels (configured with ENGRAM_CUDA=OFF)");
#endif
}

}  // namespace

CompressedRelu compress_relu(const at::Tensor& x) {
  TORCH_CHECK(x.defined() && x.scalar_type() == at::kFloat &&
                  (x.device().is_cpu() || x.device().is_cuda()),
              "compress_relu: a float32 CPU or CUDA tensor expected");
  TORCH_CHECK(x.is_non_overlapping_and_dense(),
              "compress_relu: the tensor must be non-overlapping and dense, got strides ",
              x.strides(), " for sizes ", x.sizes());
  CompressedRelu c;
  c.sizes = x.sizes().vec();
  c.strides = x.strides().vec();
  c.numel = x.numel();
  if (x.is_cuda()) {
    compress_on_device(x, c);
    return c;
  }
  const std::int64_t n = c.numel;
  const std::int64_t blocks = relu_format::num_blocks(n);
  const std::int64_t bitmap_bytes = relu_format::bitmap_bytes(n);
  const auto* data = static_cast<const std::uint32_t*>(x.data_ptr());

  // 1. Bitmap and per-block counts; 2. exclusive scan. The counts are scratch (std::vector):
  // 8 bytes per 32 KiB of input, not part of what is kept.
  c.bitmap = at::empty({bitmap_bytes}, at::kByte);
  auto* bitmap = c.bitmap.data_ptr<std::uint8_t>();
  std::vector<std::int64_t> starts(static_cast<std::size_t>(blocks) + 1, 0);
  at::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      starts[static_cast<std::size_t>(b) + 1] = bitmap_block(data, n, b, bitmap, bitmap_bytes);
    }
  });
  for (std::int64_t b = 0; b < blocks; ++b) {
    starts[static_cast<std::size_t>(b) + 1] += starts[static_cast<std::size_t>(b)];
  }
  const std::int64_t nonzeros = starts.back();
  c.offsets = at::empty({relu_format::stored_offsets(n)}, at::kLong);
  std::copy(starts.begin() + 1, starts.begin() + std::max<std::int64_t>(blocks, 1),
            c.offsets.data_ptr<std::int64_t>());

  // 3. Compaction.
  c.values = at::empty({nonzeros}, at::kFloat);
  auto* values = static_cast<std::uint32_t*>(c.values.data_ptr());
  at::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      compact_block(data, n, b, bitmap, bitmap_bytes, values, starts[static_cast<std::size_t>(b)]);
    }
  });
  return c;
}

at::Tensor decompress_relu(const CompressedRelu& c) {
  TORCH_CHECK(c.bitmap.defined() && c.offsets.defined() && c.values.defined(),
              "decompress_relu: the compressed tensor was reset()");
  const std::int64_t n = c.numel;
  TORCH_CHECK(c.bitmap.numel() == relu_format::bitmap_bytes(n) &&
                  c.offsets.numel() == relu_format::stored_offsets(n),
              "decompress_relu: buffers do not match ", n, " elements");
  if (c.values.is_cuda()) return decompress_on_device(c);
  at::Tensor out = at::empty_strided(c.sizes, c.strides, at::kFloat);
  const std::int64_t blocks = relu_format::num_blocks(n);
  const std::int64_t bitmap_bytes = c.bitmap.numel();
  const auto* bitmap = c.bitmap.data_ptr<std::uint8_t>();
  const auto* offsets = c.offsets.data_ptr<std::int64_t>();
  const auto* values = static_cast<const std::uint32_t*>(c.values.data_ptr());
  auto* dense = static_cast<std::uint32_t*>(out.data_ptr());
  at::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      scatter_block(values, block_start(offsets, b), n, b, bitmap, bitmap_bytes, dense);
    }
  });
  return out;
}

}  // namespace engram::memory
