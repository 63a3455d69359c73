#pragma once
/// \file
/// The layout of a compressed ReLU output (docs/ARCHITECTURE.md), shared by the CPU kernels
/// (memory/ReluCompression.h) and the CUDA kernels (memory/cuda/ReluCompressionCuda.h), so that
/// both produce the same bytes. No torch here: the CUDA side includes it.
///
/// \code
///   const std::int64_t n = 1000000;                                  // elements of the tensor
///   std::int64_t bitmap = engram::memory::relu_format::bitmap_bytes(n);   // ceil(n / 8)
///   std::int64_t offsets = engram::memory::relu_format::stored_offsets(n); // num_blocks(n) - 1
///   // compressed bytes = bitmap + 8 * offsets + 4 * nonzeros
/// \endcode
///
/// A tensor of n 32-bit elements, taken in memory order, is stored as:
///   bitmap   ceil(n / 8) bytes; bit (i % 8) of byte i / 8 (least significant bit first) is 1 iff
///            element i is *nonzero*, meaning its bit pattern is not all zeros: +0.0 is the only
///            zero, while -0.0, NaN (any payload), infinities and negatives are values. So the
///            format is lossless bit for bit for any float32 tensor; it saves memory in proportion
///            to the +0.0 elements, which is what a ReLU output is full of.
///   values   the nonzero elements' 32-bit patterns, in element order.
///   offsets  for blocks 1 .. num_blocks - 1 (block b is elements [b * kBlockElements,
///            (b + 1) * kBlockElements)), the index in `values` of the block's first value: the
///            exclusive prefix sum of the blocks' nonzero counts. Block 0 starts at 0 and is not
///            stored. They let decompression (and compaction) run one block per thread.
/// The offsets cost 8 bytes per 8192 elements beyond the first block, at most 8 / 1024 of the
/// bitmap: compressed bytes exceed bitmap-plus-values (ceil(n / 8) + 4 * nonzeros) by at most
/// 0.79% at any sparsity and any n, and not at all when n <= 8192.

#include <cstdint>

namespace engram::memory::relu_format {

/// Elements per block: a multiple of 64 (whole bitmap words per block) and of 256 (one CUDA
/// block of 256 threads, 32 elements each).
inline constexpr std::int64_t kBlockElements = 8192;

/// Blocks of a tensor of `n` elements (0 for an empty tensor).
constexpr std::int64_t num_blocks(std::int64_t n) {
  return (n + kBlockElements - 1) / kBlockElements;
}
/// Bytes of the bitmap: ceil(n / 8).
constexpr std::int64_t bitmap_bytes(std::int64_t n) { return (n + 7) / 8; }
/// Block offsets that are stored (every block's but the first).
constexpr std::int64_t stored_offsets(std::int64_t n) { return n > 0 ? num_blocks(n) - 1 : 0; }
/// What the stored format costs for `nonzeros` values: bitmap, offsets and values.
constexpr std::int64_t compressed_bytes(std::int64_t n, std::int64_t nonzeros) {
  return bitmap_bytes(n) + 8 * stored_offsets(n) + 4 * nonzeros;
}
/// The ideal the format is measured against: bitmap plus values.
constexpr std::int64_t bitmap_plus_values_bytes(std::int64_t n, std::int64_t nonzeros) {
  return bitmap_bytes(n) + 4 * nonzeros;
}

}  // namespace engram::memory::relu_format
