#pragma once
/// \file
/// ReLU compression on the CPU (docs/ARCHITECTURE.md): a float32 tensor full of +0.0 (a ReLU
/// output) kept as a nonzero bitmap plus the nonzero values, losslessly, in the layout of
/// memory/ReluFormat.h. Multi-threaded through ATen's intra-op pool (at::parallel_for).
///
/// \code
///   at::Tensor y = at::relu(at::randn({32, 64, 32, 32}));
///   engram::memory::CompressedRelu c = engram::memory::compress_relu(y);
///   c.sparsity();                 // about 0.5: the fraction of elements that are +0.0
///   c.nbytes();                   // bitmap + block offsets + values, about 0.53 x y.nbytes()
///   at::Tensor back = engram::memory::decompress_relu(c);   // bit for bit y, same strides
/// \endcode
///
/// The algorithm, one ATen task per block of relu_format::kBlockElements elements:
///   1. per block (in parallel): the bitmap words and the block's nonzero count (a reduction);
///   2. the blocks' offsets into the values: an exclusive prefix sum of the counts;
///   3. per block (in parallel): compaction, the nonzero elements written from the block's offset.
/// Decompression scatters each block's values back (in parallel) from its offset. The result does
/// not depend on the number of threads.
///
/// Every buffer is an at::Tensor allocated through c10's CPU allocator, so the memory tracker
/// (memory/MemoryTracker.h) counts them, under the allocating thread's tag. Any float32 tensor
/// round-trips bit for bit (NaN payloads and -0.0 included: only +0.0 is a zero, see
/// memory/ReluFormat.h); the saving comes from its +0.0 elements.

#include "memory/ReluFormat.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace engram::memory {

/// A compressed tensor: what compress_relu() returns and decompress_relu() takes.
struct CompressedRelu {
  at::Tensor bitmap;   ///< uint8 [relu_format::bitmap_bytes(numel)]
  at::Tensor offsets;  ///< int64 [relu_format::stored_offsets(numel)]: blocks 1.. start here
  at::Tensor values;   ///< float32 [nonzeros], in memory order
  std::vector<std::int64_t> sizes;    ///< of the original tensor
  std::vector<std::int64_t> strides;  ///< of the original tensor (restored by decompression)
  std::int64_t numel = 0;

  std::int64_t nonzeros() const { return values.defined() ? values.numel() : 0; }
  std::int64_t zeros() const { return numel - nonzeros(); }
  /// Fraction of the elements that are +0.0; 0 for an empty tensor.
  double sparsity() const;
  /// Bytes held: bitmap, offsets and values (0 once reset()).
  std::int64_t nbytes() const;
  /// Bytes of the dense tensor: 4 * numel.
  std::int64_t dense_bytes() const { return 4 * numel; }
  /// The ideal: ceil(numel / 8) + 4 * nonzeros.
  std::int64_t bitmap_plus_values_bytes() const;
  /// Frees the buffers.
  void reset();
};

/// Compresses `x`: float32, non-overlapping and dense (contiguous in some order of its
/// dimensions: contiguous, channels-last, a transposed contiguous tensor...). Throws c10::Error
/// otherwise. `x` is read, never modified. A CUDA tensor is compressed on its device, on the
/// current stream, by the kernels of memory/cuda/ into the same bytes, its buffers on the same
/// device (the stream is synchronised once, to size the values); decompress_relu() then
/// decompresses there too.
CompressedRelu compress_relu(const at::Tensor& x);

/// A fresh tensor with the original's sizes, strides and bits. Throws c10::Error if `c` was
/// reset().
at::Tensor decompress_relu(const CompressedRelu& c);

}  // namespace engram::memory
