#pragma once
/// \file
/// ReLU compression on a CUDA device (docs/ARCHITECTURE.md): the algorithm of the CPU kernels
/// (memory/ReluCompression.h) on raw device buffers, producing the same bytes (the layout of
/// memory/ReluFormat.h). Built in every build; no torch: it is tested and benchmarked on its own
/// (tests/memory/ReluCompressionCudaTest.cpp, bench/ReluCudaBench.cpp).
///
/// \code
///   namespace rf = engram::memory::relu_format;
///   namespace rc = engram::memory::cuda;
///   // x: n floats on the device. starts: num_blocks(n) + 1 int64s, bitmap: bitmap_bytes(n).
///   rc::relu_bitmap_and_starts(x, n, bitmap, starts, stream);   // bitmap, counts, scan
///   std::int64_t nonzeros = 0;
///   rc::relu_nonzeros(starts, n, &nonzeros, stream);            // synchronizes the stream
///   // values: nonzeros floats on the device
///   rc::relu_compact(x, n, bitmap, starts, values, stream);
///   // The stored offsets (memory/ReluFormat.h) are starts + 1, stored_offsets(n) of them.
///   rc::relu_decompress(bitmap, starts + 1, values, n, out, stream);   // out: n floats
/// \endcode
///
/// Each kernel works on one 8192-element block (relu_format::kBlockElements) per CUDA block of
/// 256 threads: a warp takes 1024 elements, 32 at a time, and __ballot_sync makes each 32-bit
/// bitmap word. Counting reduces per block; the offsets are an inclusive scan (one CUDA block,
/// cub::BlockScan, in chunks of 1024 counts) written one past each block, which is the exclusive
/// prefix sum the stored offsets need. Compaction and decompression recompute each warp's start
/// from the bitmap's popcounts. Every function launches on `stream` and returns the launch's
/// error (cudaSuccess if there was none); empty tensors launch nothing.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace engram::memory::cuda {

/// The blocks' counts the offsets' scan takes a pass (one CUDA thread each); above that many
/// blocks it runs more than one pass, each starting from the sum the last carried.
constexpr int kScanBlocksPerPass = 1024;

/// Pass 1 and 2: writes the bitmap and `starts` (num_blocks(n) + 1 entries): starts[b] is the
/// index of block b's first value, starts[num_blocks(n)] the number of nonzeros.
cudaError_t relu_bitmap_and_starts(const float* x, std::int64_t n, std::uint8_t* bitmap,
                                   std::int64_t* starts, cudaStream_t stream = nullptr);

/// Copies the number of nonzeros (starts[num_blocks(n)]) to the host; synchronizes `stream`.
cudaError_t relu_nonzeros(const std::int64_t* starts, std::int64_t n, std::int64_t* nonzeros,
                          cudaStream_t stream = nullptr);

/// Pass 3: the nonzero elements of `x`, in order, into `values`.
cudaError_t relu_compact(const float* x, std::int64_t n, const std::uint8_t* bitmap,
                         const std::int64_t* starts, float* values, cudaStream_t stream = nullptr);

/// Scatters `values` back into `out` (n floats) with zeros where the bitmap has none. `offsets`
/// are the stored offsets: relu_format::stored_offsets(n) entries, block 1's first.
cudaError_t relu_decompress(const std::uint8_t* bitmap, const std::int64_t* offsets,
                            const float* values, std::int64_t n, float* out,
                            cudaStream_t stream = nullptr);

}  // namespace engram::memory::cuda
