// Tests of ReLU compression: the CPU kernels (bit-exact round trips at every sparsity, the
// format's size, threads) and the compressing activation store (sharing, lifetimes, in-place
// modification), without layers (tests/nn has those with the layers of nn/).
#include "memory/CompressingStore.h"
#include "memory/MemoryTracker.h"
#include "memory/ReluCompression.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/StorageImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::memory {
namespace {

/// `n` floats of which exactly round(zeros * n) are +0.0 (at random places), the others positive.
at::Tensor with_zeros(std::int64_t n, double zeros, std::uint64_t seed = 7) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor x = at::rand({n}, gen) + 1e-3;  // > 0
  const auto count = static_cast<std::int64_t>(std::llround(zeros * static_cast<double>(n)));
  if (count > 0) x.index_put_({at::randperm(n, gen).slice(0, 0, count)}, 0.0f);
  return x;
}

/// Bitwise equality (torch::equal would call NaN != NaN and -0.0 == +0.0).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() &&
         at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
}

/// The bitmap and the offsets, computed the slow way.
void expect_layout_matches_naive(const at::Tensor& x, const CompressedRelu& c) {
  const auto* bits = reinterpret_cast<const std::uint32_t*>(x.data_ptr());
  const auto* bitmap = c.bitmap.data_ptr<std::uint8_t>();
  std::int64_t nonzeros = 0;
  for (std::int64_t i = 0; i < c.numel; ++i) {
    if (i % relu_format::kBlockElements == 0 && i > 0) {
      ASSERT_EQ(c.offsets.data_ptr<std::int64_t>()[i / relu_format::kBlockElements - 1], nonzeros)
          << "offset of block " << i / relu_format::kBlockElements;
    }
    const bool nonzero = bits[i] != 0;
    ASSERT_EQ((bitmap[i / 8] >> (i % 8)) & 1, nonzero ? 1 : 0) << "bit " << i;
    if (nonzero) {
      ASSERT_EQ(reinterpret_cast<const std::uint32_t*>(c.values.data_ptr())[nonzeros], bits[i]);
      ++nonzeros;
    }
  }
  EXPECT_EQ(c.nonzeros(), nonzeros);
  // The bitmap's padding bits are zero.
  for (std::int64_t i = c.numel; i < 8 * c.bitmap.numel(); ++i) {
    ASSERT_EQ((bitmap[i / 8] >> (i % 8)) & 1, 0) << "padding bit " << i;
  }
}

class ReluCompressionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = at::get_num_threads();
    at::set_num_threads(2);
  }
  void TearDown() override { at::set_num_threads(threads_); }
  int threads_ = 1;
};

const std::vector<double> kSparsities{0.0, 0.01, 0.5, 0.99, 1.0};

// ---------------------------------------------------------------------------------------------
// Kernels

TEST_F(ReluCompressionTest, RoundTripIsBitExactAtEverySparsityAndSizeEmptyIncluded) {
  const std::int64_t block = relu_format::kBlockElements;
  for (const std::int64_t n :
       {std::int64_t{1}, std::int64_t{7}, std::int64_t{63}, std::int64_t{64}, std::int64_t{65},
        block - 1, block, block + 1, 3 * block + 13, std::int64_t{100003}}) {
    for (const double zeros : kSparsities) {
      SCOPED_TRACE("n " + std::to_string(n) + ", zeros " + std::to_string(zeros));
      const at::Tensor x = with_zeros(n, zeros);
      const CompressedRelu c = compress_relu(x);
      EXPECT_EQ(c.numel, n);
      EXPECT_EQ(c.zeros(), std::llround(zeros * static_cast<double>(n)));
      EXPECT_EQ(c.bitmap.numel(), (n + 7) / 8);
      EXPECT_EQ(c.offsets.numel(), (n + block - 1) / block - 1);
      EXPECT_EQ(c.nbytes(), relu_format::compressed_bytes(n, c.nonzeros()));
      expect_layout_matches_naive(x, c);
      EXPECT_TRUE(same_bits(decompress_relu(c), x));
    }
  }
  for (const auto& sizes : {std::vector<std::int64_t>{0}, std::vector<std::int64_t>{3, 0, 2}}) {
    const at::Tensor x = at::empty(sizes, at::kFloat);
    const CompressedRelu c = compress_relu(x);
    EXPECT_EQ(c.numel, 0);
    EXPECT_EQ(c.nbytes(), 0);
    EXPECT_EQ(c.sparsity(), 0.0);
    EXPECT_EQ(decompress_relu(c).sizes(), x.sizes());
  }
}

// On a GPU the same bytes as the CPU's, kept on the device, and the round trip bit for bit.
TEST_F(ReluCompressionTest, OnCudaTheBuffersAreTheCpusBytesOnTheDevice) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0)
    GTEST_SKIP() << "no CUDA device: this test compares the GPU's compression with the CPU's";
  for (std::int64_t n : {0L, 5L, 8192L, 8193L, 100000L}) {
    SCOPED_TRACE(n);
    const at::Tensor x = at::relu(at::randn({n}));
    const CompressedRelu cpu = compress_relu(x);
    const CompressedRelu gpu = compress_relu(x.cuda());
    EXPECT_TRUE(gpu.values.is_cuda());
    EXPECT_TRUE(at::equal(cpu.bitmap, gpu.bitmap.cpu()));
    EXPECT_TRUE(at::equal(cpu.offsets, gpu.offsets.cpu()));
    EXPECT_TRUE(at::equal(cpu.values, gpu.values.cpu()));
    const at::Tensor back = decompress_relu(gpu);
    EXPECT_TRUE(back.is_cuda());
    EXPECT_TRUE(at::equal(back.cpu(), x));
  }
}

TEST_F(ReluCompressionTest, EveryBitPatternButPositiveZeroIsAValue) {
  // Only +0.0 is a zero; -0.0, NaNs (with their payloads), infinities, denormals and negatives
  // are kept bit for bit (a ReLU output has NaN where its input had NaN).
  std::vector<std::uint32_t> bits{0x00000000u, 0x80000000u, 0x7fc00000u, 0x7fc12345u,
                                  0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                                  0x00000001u, 0x3f800000u, 0xbf800000u, 0x00000000u};
  at::Tensor x = at::empty({static_cast<std::int64_t>(bits.size())}, at::kFloat);
  std::memcpy(x.data_ptr(), bits.data(), bits.size() * sizeof(std::uint32_t));
  const CompressedRelu c = compress_relu(x);
  EXPECT_EQ(c.zeros(), 2);
  EXPECT_TRUE(same_bits(decompress_relu(c), x));
  // A real ReLU output with NaN.
  at::Tensor y = at::relu(at::tensor({-1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f, 0.0f}));
  EXPECT_TRUE(same_bits(decompress_relu(compress_relu(y)), y));
}

TEST_F(ReluCompressionTest, CompressedSizeIsWithinOnePercentOfBitmapPlusValues) {
  const std::int64_t n = (1 << 20) + 12345;
  for (const double zeros : kSparsities) {
    SCOPED_TRACE("zeros " + std::to_string(zeros));
    const CompressedRelu c = compress_relu(with_zeros(n, zeros));
    const std::int64_t ideal = (n + 7) / 8 + 4 * c.nonzeros();
    EXPECT_EQ(c.bitmap_plus_values_bytes(), ideal);
    EXPECT_GE(c.nbytes(), ideal);
    EXPECT_LE(static_cast<double>(c.nbytes()), 1.01 * static_cast<double>(ideal));
    EXPECT_NEAR(c.sparsity(), zeros, 1e-6);
  }
  // One block or less: no stored offsets, exactly bitmap plus values.
  const CompressedRelu small = compress_relu(with_zeros(relu_format::kBlockElements, 0.5));
  EXPECT_EQ(small.nbytes(), small.bitmap_plus_values_bytes());
}

TEST_F(ReluCompressionTest, BuffersAreCountedByTheMemoryTracker) {
  MemoryTracker& tracker = MemoryTracker::install();
  const at::Tensor x = with_zeros(50000, 0.5);
  const std::int64_t before = tracker.live_bytes();
  CompressedRelu c = compress_relu(x);
  EXPECT_EQ(tracker.live_bytes() - before, c.nbytes());
  c.reset();
  EXPECT_EQ(tracker.live_bytes(), before);
  EXPECT_EQ(c.nbytes(), 0);
  EXPECT_THROW(decompress_relu(c), c10::Error);
}

TEST_F(ReluCompressionTest, ThreadsDoNotChangeTheResult) {
  const at::Tensor x = with_zeros(40 * relu_format::kBlockElements + 77, 0.5);
  at::set_num_threads(1);
  const CompressedRelu one = compress_relu(x);
  const at::Tensor back_one = decompress_relu(one);
  at::set_num_threads(4);
  ASSERT_GT(at::get_num_threads(), 1);
  const CompressedRelu many = compress_relu(x);
  EXPECT_TRUE(at::equal(one.bitmap, many.bitmap));
  EXPECT_TRUE(at::equal(one.offsets, many.offsets));
  EXPECT_TRUE(same_bits(one.values, many.values));
  EXPECT_TRUE(same_bits(decompress_relu(one), back_one));
  EXPECT_TRUE(same_bits(back_one, x));
}

TEST_F(ReluCompressionTest, LayoutsAreRestoredAndStridedViewsRejected) {
  const at::Tensor nhwc =
      at::relu(at::randn({2, 3, 4, 5})).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor back = decompress_relu(compress_relu(nhwc));
  EXPECT_EQ(back.strides(), nhwc.strides());
  EXPECT_TRUE(same_bits(back, nhwc));
  const at::Tensor transposed = at::relu(at::randn({6, 7})).t();
  EXPECT_TRUE(same_bits(decompress_relu(compress_relu(transposed)), transposed));
  EXPECT_THROW(compress_relu(at::randn({6, 8}).slice(1, 0, 8, 2)), c10::Error);
  EXPECT_THROW(compress_relu(at::randn({6}, at::kDouble)), c10::Error);
  EXPECT_THROW(compress_relu(at::Tensor()), c10::Error);
}

// ---------------------------------------------------------------------------------------------
// The compressing store

TEST_F(ReluCompressionTest, AReluOutputAndItsConsumerShareOneCompressedCopy) {
  MemoryTracker& tracker = MemoryTracker::install();
  CompressingStore store;
  const std::int64_t before = tracker.live_bytes();
  at::Tensor y = with_zeros(30000, 0.6);
  const at::Tensor expected = y.clone();
  const c10::weak_intrusive_ptr<c10::StorageImpl> dense = y.storage().getWeakStorageImpl();
  auto by_relu = store.save(y, SavedKind::relu_output);
  auto by_consumer = store.save(y, SavedKind::activation);
  EXPECT_EQ(by_relu.get(), by_consumer.get()) << "one handle";
  const CompressionStats s = store.stats();
  EXPECT_EQ(s.compressed_tensors, 1);
  EXPECT_EQ(s.shared_saves, 1);
  EXPECT_EQ(s.elements, 30000);
  EXPECT_EQ(s.zeros, 18000);
  EXPECT_NEAR(s.sparsity(), 0.6, 1e-12);
  EXPECT_EQ(s.dense_bytes, 120000);
  EXPECT_EQ(s.compressed_bytes, (30000 + 7) / 8 + 4 * 12000 + 8 * 3);
  EXPECT_EQ(s.bitmap_plus_values_bytes, (30000 + 7) / 8 + 4 * 12000);
  EXPECT_EQ(by_relu->stored_bytes(), s.compressed_bytes);
  EXPECT_EQ(store.live_handles(), 1);

  // The dense tensor is held by nobody but its owner: dropping it frees it.
  y.reset();
  EXPECT_TRUE(dense.expired());
  EXPECT_EQ(tracker.live_bytes() - before, s.compressed_bytes + expected.nbytes());

  EXPECT_TRUE(same_bits(by_consumer->load(), expected));
  by_consumer->release();
  EXPECT_EQ(by_relu->stored_bytes(), s.compressed_bytes) << "the ReLU has not released it";
  EXPECT_TRUE(same_bits(by_relu->load(), expected));
  by_relu->release();
  EXPECT_EQ(by_relu->stored_bytes(), 0);
  EXPECT_THROW(by_relu->load(), std::logic_error);
  EXPECT_EQ(store.live_handles(), 0);
  EXPECT_EQ(store.stats().decompressions, 2);
  EXPECT_EQ(tracker.live_bytes() - before, expected.nbytes());
}

TEST_F(ReluCompressionTest, OtherTensorsAndOtherViewsAreKeptPlain) {
  CompressingStore store;
  const at::Tensor y = with_zeros(1000, 0.5);
  auto compressed = store.save(y, SavedKind::relu_output);
  // A view with other sizes, another tensor, a parameter: plain handles of their own.
  auto view = store.save(y.view({10, 100}), SavedKind::activation);
  auto other = store.save(with_zeros(1000, 0.5), SavedKind::activation);
  auto parameter = store.save(y, SavedKind::parameter);
  EXPECT_NE(view.get(), compressed.get());
  EXPECT_EQ(view->stored_bytes(), 4000);
  EXPECT_EQ(other->stored_bytes(), 4000);
  EXPECT_NE(parameter.get(), compressed.get());
  // ReLU outputs the kernels do not take.
  auto in_double = store.save(at::relu(at::randn({5}, at::kDouble)), SavedKind::relu_output);
  auto strided = store.save(with_zeros(10, 0.5).slice(0, 0, 10, 2), SavedKind::relu_output);
  EXPECT_EQ(in_double->stored_bytes(), 40);
  EXPECT_EQ(store.stats().compressed_tensors, 1);
  EXPECT_EQ(store.stats().plain_relu_outputs, 2);
  EXPECT_EQ(store.stats().shared_saves, 0);
}

TEST_F(ReluCompressionTest, HandlesDieWithTheirGraphAndOutliveTheirStore) {
  CompressingStore store;
  const at::Tensor y = with_zeros(1000, 0.5);
  {
    auto a = store.save(y, SavedKind::relu_output);
    auto b = store.save(y, SavedKind::activation);
    EXPECT_EQ(store.live_handles(), 1);
  }  // dropped without release(), as a graph that never runs backward
  EXPECT_EQ(store.live_handles(), 0);
  // The same tensor saved again is compressed again.
  auto again = store.save(y, SavedKind::relu_output);
  EXPECT_EQ(store.stats().compressed_tensors, 2);
  EXPECT_EQ(store.live_handles(), 1);
  again->release();
  EXPECT_EQ(store.live_handles(), 0);

  // A handle outlives its store (the registry is shared).
  c10::intrusive_ptr<SavedTensor> saved;
  {
    CompressingStore short_lived;
    saved = short_lived.save(y, SavedKind::relu_output);
  }
  EXPECT_TRUE(same_bits(saved->load(), y));
  saved->release();
}

TEST_F(ReluCompressionTest, ModifyingASavedReluOutputInPlaceIsAnError) {
  CompressingStore store;
  at::Tensor y = with_zeros(1000, 0.5);
  auto saved = store.save(y, SavedKind::relu_output);
  y.add_(1.0);
  // The consumer sees a new version: not the compressed tensor any more.
  auto consumer = store.save(y, SavedKind::activation);
  EXPECT_NE(consumer.get(), saved.get());
  EXPECT_THROW(saved->load(), std::logic_error);
}

TEST_F(ReluCompressionTest, TheCacheDecompressesOncePerHandle) {
  for (const bool cache : {false, true}) {
    SCOPED_TRACE(cache ? "cache" : "no cache");
    CompressingStore store(CompressingStoreOptions{cache});
    const at::Tensor y = with_zeros(5000, 0.5);
    auto a = store.save(y, SavedKind::relu_output);
    auto b = store.save(y, SavedKind::activation);
    const std::int64_t compressed = a->stored_bytes();
    const at::Tensor first = b->load();
    b->release();
    // The cache replaces the compressed copy until the last user releases it.
    EXPECT_EQ(a->stored_bytes(), cache ? 20000 : compressed);
    const at::Tensor second = a->load();
    a->release();
    EXPECT_TRUE(same_bits(first, y));
    EXPECT_TRUE(same_bits(second, y));
    EXPECT_EQ(first.data_ptr() == second.data_ptr(), cache);
    EXPECT_EQ(store.stats().decompressions, cache ? 1 : 2);
  }
}

TEST_F(ReluCompressionTest, CompressAndDecompressAreSpansOfTheWindow) {
  MemoryTracker& tracker = MemoryTracker::install();
  CompressingStore store;
  const at::Tensor y = with_zeros(5000, 0.5);
  tracker.begin_window();
  auto saved = store.save(y, SavedKind::relu_output);
  saved->load();
  saved->release();
  const MemoryWindow window = tracker.end_window();
  std::vector<std::string> names;
  for (const Span& span : window.spans) {
    if (span.category == "memory") names.push_back(span.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"compress", "decompress"}));
  EXPECT_GT(store.stats().compress_ns, 0);
  EXPECT_GT(store.stats().decompress_ns, 0);
}

}  // namespace
}  // namespace engram::memory
