#include "memory/ArenaReuse.h"
#include "memory/DeviceArenaReuse.h"

#include "memory/MemoryTracker.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <random>
#include <string>
#include <thread>

namespace engram::memory {
namespace {

/// A signature no other test uses.
std::uint64_t fresh_signature() {
  static std::atomic<std::uint64_t> next{0x5eed0000};
  return next++;
}

/// A small step: temporaries freed inside it, the result kept beyond it.
at::Tensor small_step(long n, float v) {
  at::Tensor a = at::full({n}, v);
  at::Tensor b = at::full({2 * n}, v + 1);
  at::Tensor c = a * 2 + b.narrow(0, 0, n);
  a.reset();
  b.reset();
  return (c * c).sum(0, /*keepdim=*/true);
}

class ArenaReuseTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
  ArenaReuse& reuse_ = ArenaReuse::install();
};

TEST_F(ArenaReuseTest, ALaterStepOfTheSameSignatureIsServedFromTheArena) {
  const auto sig = fresh_signature();
  reuse_.begin_step(sig);
  const at::Tensor first = small_step(1000, 1.5f);
  const ReuseStep recorded = reuse_.end_step();
  EXPECT_TRUE(recorded.recorded);
  EXPECT_EQ(recorded.hits, 0);
  EXPECT_GT(recorded.allocations, 3);
  EXPECT_GT(recorded.lower_bound, 0);
  EXPECT_GE(recorded.arena_bytes, recorded.lower_bound);
  for (int i = 0; i < 3; ++i) {
    reuse_.begin_step(sig);
    at::Tensor again;
    { again = small_step(1000, 1.5f); }
    const ReuseStep served = reuse_.end_step();
    EXPECT_FALSE(served.recorded);
    EXPECT_FALSE(served.missed);
    EXPECT_EQ(served.allocations, recorded.allocations);
    EXPECT_EQ(served.hits + served.heap, served.allocations);
    EXPECT_GT(served.hits, 0);
    EXPECT_GE(served.heap, 1) << "the result outlives the step: the ordinary allocator";
    EXPECT_FALSE(reuse_.in_arena(again.data_ptr())) << "a block that outlives the step";
    EXPECT_TRUE(at::equal(again, first));
  }
  EXPECT_GE(reuse_.capacity_bytes(), recorded.arena_bytes);
}

TEST_F(ArenaReuseTest, AnotherSequenceUnderTheSameSignatureFallsBackAndCountsAMiss) {
  const auto sig = fresh_signature();
  reuse_.begin_step(sig);
  small_step(1000, 1.0f);
  reuse_.end_step();
  reuse_.begin_step(sig);
  const at::Tensor other = small_step(3000, 2.0f);  // other sizes from the first allocation
  const ReuseStep s = reuse_.end_step();
  EXPECT_TRUE(s.missed);
  EXPECT_TRUE(s.replanned);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.heap, s.allocations);
  // The step that missed is the plan now: the same sequence again is served.
  reuse_.begin_step(sig);
  small_step(3000, 2.0f);
  const ReuseStep settled = reuse_.end_step();
  EXPECT_FALSE(settled.missed);
  EXPECT_FALSE(settled.replanned);
  EXPECT_GT(settled.hits, 0);
  reuse_.begin_step(fresh_signature());
  const at::Tensor expected = small_step(3000, 2.0f);
  reuse_.end_step();
  EXPECT_TRUE(at::equal(other, expected));
}

TEST_F(ArenaReuseTest, PlansAreCachedBySignature) {
  const auto small = fresh_signature(), large = fresh_signature();
  reuse_.begin_step(small);
  small_step(500, 1.0f);
  reuse_.end_step();
  reuse_.begin_step(large);
  small_step(5000, 1.0f);
  reuse_.end_step();
  const long plans = reuse_.plans();
  for (const auto& [sig, n] :
       {std::pair{small, 500L}, std::pair{large, 5000L}, std::pair{small, 500L}}) {
    reuse_.begin_step(sig);
    small_step(n, 1.0f);
    const ReuseStep s = reuse_.end_step();
    EXPECT_FALSE(s.recorded);
    EXPECT_FALSE(s.missed) << n;
    EXPECT_GT(s.hits, 0) << n;
  }
  EXPECT_EQ(reuse_.plans(), plans) << "no new plan for a signature seen before";
}

TEST_F(ArenaReuseTest, OtherThreadsAllocateFromTheOrdinaryAllocator) {
  const auto sig = fresh_signature();
  for (int i = 0; i < 2; ++i) {
    reuse_.begin_step(sig);
    at::Tensor mine = at::full({4096}, 1.0f);
    bool theirs_in_arena = true;
    std::thread other([&] {
      at::Tensor theirs = at::full({4096}, 2.0f);
      theirs_in_arena = reuse_.in_arena(theirs.data_ptr());
    });
    other.join();
    const bool mine_in_arena = reuse_.in_arena(mine.data_ptr());
    mine.reset();
    const ReuseStep s = reuse_.end_step();
    EXPECT_FALSE(theirs_in_arena);
    EXPECT_GE(s.foreign, 1);
    if (i == 1) EXPECT_TRUE(mine_in_arena) << "the step thread's block is served";
  }
}

// The plan says the second block reuses the first's bytes; a step that keeps the first alive
// longer must not get them: a conflict, the second from the ordinary allocator, the first
// block's data intact.
TEST_F(ArenaReuseTest, BytesStillInUseAreNeverHandedOutAgain) {
  const auto sig = fresh_signature();
  reuse_.begin_step(sig);
  {
    at::Tensor a = at::full({2048}, 1.0f);
    a.reset();
    at::Tensor b = at::full({2048}, 2.0f);
  }
  reuse_.end_step();
  reuse_.begin_step(sig);
  at::Tensor a = at::full({2048}, 7.0f);  // kept past its planned release
  at::Tensor b = at::full({2048}, 9.0f);
  const ReuseStep s = reuse_.end_step();
  EXPECT_FALSE(s.missed);
  EXPECT_EQ(s.conflicts, 1);
  EXPECT_FALSE(reuse_.in_arena(b.data_ptr()));
  EXPECT_TRUE(at::equal(a, at::full({2048}, 7.0f)));
  EXPECT_TRUE(at::equal(b, at::full({2048}, 9.0f)));
  EXPECT_NE(a.data_ptr(), b.data_ptr());
}

// Buffers whose sizes follow the data bypass the plan: the rest of the sequence still matches.
TEST_F(ArenaReuseTest, ABypassKeepsDataDependentSizesOutOfThePlan) {
  const auto sig = fresh_signature();
  for (int i = 0; i < 3; ++i) {
    reuse_.begin_step(sig);
    at::Tensor fixed = at::full({1024}, 1.0f);
    at::Tensor varying;
    {
      ReuseBypass bypass;
      varying = at::full({100 + 50 * i}, 2.0f);  // another size every step
    }
    const bool varying_in_arena = reuse_.in_arena(varying.data_ptr());
    fixed.reset();
    varying.reset();
    at::Tensor after = at::full({512}, 3.0f);
    after.reset();
    const ReuseStep s = reuse_.end_step();
    EXPECT_FALSE(varying_in_arena);
    EXPECT_EQ(s.allocations, 2) << "the bypassed allocation is not in the sequence";
    if (i > 0) {
      EXPECT_FALSE(s.missed) << "step " << i;
      EXPECT_EQ(s.hits, 2) << "step " << i;
    }
  }
}

TEST_F(ArenaReuseTest, StepsMustBeginAndEndInTurn) {
  EXPECT_THROW(reuse_.end_step(), std::logic_error);
  reuse_.begin_step(fresh_signature());
  EXPECT_THROW(reuse_.begin_step(1), std::logic_error);
  reuse_.end_step();
  EXPECT_EQ(ArenaReuse::installed(), &reuse_);
}

/// RAM plus swap in bytes (/proc/meminfo), or 0 where it cannot be read.
std::int64_t ram_and_swap_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0, total = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:" || key == "SwapTotal:") total += kib * 1024;
  return total;
}

// An arena larger than the host can allocate: the steps go on without it (their planned
// allocations are conflicts, from the ordinary allocator), the arena it had stays, and no step
// is left open. The step holds two blocks of 0.6 of RAM plus swap at once, untouched: Linux's
// heuristic overcommit (vm.overcommit_memory 0) grants each, and refuses the one allocation
// larger than RAM plus swap that their arena is.
TEST_F(ArenaReuseTest, AnArenaTheHostCannotAllocateIsRefusedAndTheStepsGoOn) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator ends the process where an allocation fails";
#endif
  std::ifstream mode_file("/proc/sys/vm/overcommit_memory");
  std::string mode;
  if (!(mode_file >> mode) || mode != "0")
    GTEST_SKIP() << "needs Linux's heuristic overcommit (vm.overcommit_memory 0), not '" << mode
                 << "'";
  const std::int64_t total = ram_and_swap_bytes();
  ASSERT_GT(total, 0) << "/proc/meminfo names no MemTotal";
  const std::int64_t block = total / 10 * 6;

  reuse_.begin_step(fresh_signature());  // an arena of a small plan first
  small_step(1000, 1.0f);
  reuse_.end_step();
  const std::int64_t had = reuse_.capacity_bytes();
  ASSERT_GT(had, 0);

  const auto sig = fresh_signature();
  const auto huge_step = [&] {
    at::Tensor a = at::empty({block}, at::kByte);
    at::Tensor b = at::empty({block}, at::kByte);
  };
  reuse_.begin_step(sig);
  try {
    huge_step();
  } catch (const c10::Error& e) {
    reuse_.end_step();
    GTEST_SKIP() << "this host does not grant two blocks of " << block << " bytes at once";
  }
  const ReuseStep recorded = reuse_.end_step();
  EXPECT_GE(recorded.arena_bytes, 2 * block);
  EXPECT_EQ(reuse_.capacity_bytes(), had) << "the arena it had is kept";
  for (int i = 0; i < 2; ++i) {
    reuse_.begin_step(sig);
    huge_step();
    const ReuseStep step = reuse_.end_step();
    EXPECT_FALSE(step.missed);
    EXPECT_EQ(step.allocations, 2);
    EXPECT_EQ(step.conflicts, 2) << "both planned beyond the arena the host could give";
    EXPECT_EQ(step.hits, 0);
    EXPECT_EQ(reuse_.capacity_bytes(), had);
  }
}

// The tracker counts an arena block like any other: the same live bytes with and without reuse.
TEST_F(ArenaReuseTest, TheTrackerCountsArenaBlocksAsAnyOther) {
  auto& tracker = MemoryTracker::install();
  const auto sig = fresh_signature();
  reuse_.begin_step(sig);
  small_step(1000, 1.0f);
  reuse_.end_step();
  const std::int64_t before = tracker.live_bytes();
  reuse_.begin_step(sig);
  tracker.reset_peak();
  at::Tensor kept = small_step(1000, 1.0f);
  const ReuseStep s = reuse_.end_step();
  EXPECT_GT(s.hits, 0);
  EXPECT_EQ(tracker.live_bytes(), before + static_cast<std::int64_t>(kept.nbytes()));
  EXPECT_GE(tracker.peak_bytes(), before + 3000 * 4);
}

}  // namespace
}  // namespace engram::memory

namespace engram::memory {
namespace {

#define ENGRAM_SKIP_WITHOUT_GPU()                                                       \
  do {                                                                                  \
    if (c10::cuda::device_count() == 0)                                                 \
      GTEST_SKIP() << "no CUDA device: the device arena serves a GPU's allocations";   \
  } while (false)

/// Blocks a stream until `go` is set: a host function the stream runs, spinning on the flag.
void CUDART_CB wait_for(void* go) {
  auto* flag = static_cast<std::atomic<bool>*>(go);
  while (!flag->load()) std::this_thread::yield();
}

constexpr long kElements = 1 << 16;

/// A small CUDA step: x released before z, and z, y and their sum's temporary live together, so
/// one of those is planned on x's bytes; the sum kept beyond the step. With `side`, x is used on
/// that stream, which is held up until the step's last allocation is made. Returns the sum and
/// whether y was served from the arena.
at::Tensor device_step(const DeviceArenaReuse& reuse, bool* y_in_arena,
                       const c10::cuda::CUDAStream* side = nullptr,
                       std::atomic<bool>* go = nullptr) {
  // The side stream is let go on every way out, so that a failure cannot leave it spinning.
  struct Release {
    std::atomic<bool>* go;
    ~Release() {
      if (go != nullptr) go->store(true);
    }
  } release{go};
  const auto on_gpu = at::TensorOptions().device(at::kCUDA, 0);
  at::Tensor x = at::full({kElements}, 1.5f, on_gpu);
  at::Tensor y = x * 2;
  *y_in_arena = reuse.in_arena(y.data_ptr());
  if (side != nullptr) {
    x.record_stream(*side);
    C10_CUDA_CHECK(cudaLaunchHostFunc(side->stream(), &wait_for, go));
  }
  x.reset();
  at::Tensor z = at::full({kElements}, 3.0f, on_gpu);
  at::Tensor sum = (y + z).sum();
  if (side != nullptr) {
    const c10::cuda::CUDAStreamGuard other(*side);
    at::Tensor theirs = at::empty({256}, on_gpu);
    EXPECT_FALSE(reuse.in_arena(theirs.data_ptr())) << "another stream's allocation";
    go->store(true);
  }
  return sum;
}

TEST(DeviceArenaReuseTest, OnCudaAStepIsServedFromTheArenaAndBytesAnotherStreamUsesWait) {
  ENGRAM_SKIP_WITHOUT_GPU();
  DeviceArenaReuse& reuse = DeviceArenaReuse::install(0);
  EXPECT_EQ(DeviceArenaReuse::installed(), &reuse);
  EXPECT_THROW(DeviceArenaReuse::install(c10::cuda::device_count()), std::invalid_argument);
  const std::uint64_t sig = 0xde71ce;
  bool y_in_arena = false;
  reuse.begin_step(sig);
  at::Tensor kept = device_step(reuse, &y_in_arena);
  const ReuseStep recorded = reuse.end_step();
  const float expected = kept.item<float>();
  EXPECT_TRUE(recorded.recorded);
  EXPECT_FALSE(y_in_arena);
  EXPECT_GE(recorded.arena_bytes, 3 * kElements * 4) << "y, z and their sum live together";
  EXPECT_GE(reuse.capacity_bytes(), recorded.arena_bytes);

  reuse.begin_step(sig);
  kept = device_step(reuse, &y_in_arena);
  const ReuseStep served = reuse.end_step();
  EXPECT_EQ(kept.item<float>(), expected);
  EXPECT_FALSE(served.missed);
  EXPECT_EQ(served.heap, 1) << "the sum outlives the step";
  EXPECT_EQ(served.hits, served.allocations - 1);
  EXPECT_GE(served.hits, 4) << "x, y, z and y + z";
  EXPECT_FALSE(reuse.in_arena(kept.data_ptr()));
  EXPECT_TRUE(y_in_arena);

  // x used on a side stream that is held up: what is planned on x's bytes may not have them
  // until the side stream is past x, so it gets bytes of its own; the side stream's allocation
  // is foreign.
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
  std::atomic<bool> go{false};
  reuse.begin_step(sig);
  kept = device_step(reuse, &y_in_arena, &side, &go);
  const ReuseStep waited = reuse.end_step();
  EXPECT_EQ(kept.item<float>(), expected);
  side.synchronize();
  EXPECT_FALSE(waited.missed);
  EXPECT_EQ(waited.conflicts, 1);
  EXPECT_EQ(waited.hits, served.hits - 1);
  EXPECT_GE(waited.foreign, 1);

  // The side stream is past x now: the next step is served whole again.
  reuse.begin_step(sig);
  kept = device_step(reuse, &y_in_arena);
  const ReuseStep again = reuse.end_step();
  EXPECT_EQ(kept.item<float>(), expected);
  EXPECT_EQ(again.hits, served.hits);
  EXPECT_EQ(again.conflicts, 0);
  kept.reset();

  EXPECT_THROW(reuse.end_step(), std::logic_error);
  reuse.release();
  EXPECT_EQ(reuse.capacity_bytes(), 0);
  EXPECT_EQ(reuse.plans(), 0);
}

TEST(DeviceArenaReuseTest, OnCudaAnArenaUsedOnAnotherStreamIsFreedOnlyAfterThatStreamsWork) {
  ENGRAM_SKIP_WITHOUT_GPU();
  // The arena is grown on one stream and then serves steps on another: freed while that one is
  // still busy with it, its bytes must not go to the first stream's next allocation.
  DeviceArenaReuse& reuse = DeviceArenaReuse::install(0);
  reuse.release();
  // No large free block left over from earlier work: the allocation below gets the arena's
  // bytes if they are free for its stream, and a fresh segment otherwise.
  c10::cuda::CUDACachingAllocator::emptyCache();
  const auto on_gpu = at::TensorOptions().device(at::kCUDA, 0);
  constexpr long kLarge = 4L << 20;  // 16 MiB a tensor: the arena is a segment of its own
  const std::uint64_t sig = 0xa7e4a;
  const auto step = [&] {
    at::Tensor x = at::full({kLarge}, 1.0f, on_gpu);
    at::Tensor y = x * 2;
    return reuse.in_arena(y.data_ptr()) ? static_cast<const char*>(y.data_ptr()) : nullptr;
  };
  reuse.begin_step(sig);  // recorded on the current stream; the arena grows there
  step();
  ASSERT_TRUE(reuse.end_step().recorded);
  const std::int64_t capacity = reuse.capacity_bytes();
  ASSERT_GE(capacity, 2 * kLarge * 4) << "x and y live together";

  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
  const char* served = nullptr;
  {
    const c10::cuda::CUDAStreamGuard other(side);
    reuse.begin_step(sig);
    at::cuda::sleep(4'000'000'000LL);  // about 2 s of the side stream before the step's kernels
    served = step();
    reuse.end_step();
  }
  ASSERT_NE(served, nullptr) << "the step on the side stream was served from the arena";
  reuse.release();  // no bytes taken: the arena goes back to the caching allocator now
  at::Tensor mine = at::empty({capacity}, on_gpu.dtype(at::kByte));
  const char* got = static_cast<const char*>(mine.data_ptr());
  const bool side_busy = !side.query();
  side.synchronize();
  ASSERT_TRUE(side_busy) << "the side stream finished before the check: it proves nothing";
  EXPECT_FALSE(served >= got && served < got + capacity)
      << "the arena's bytes went to the first stream's allocation while the side stream's "
         "kernels still ran on them";
}

}  // namespace
}  // namespace engram::memory
