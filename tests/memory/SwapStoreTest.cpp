// The swap store (memory/SwapStore.h): what moves and what stays, bit-exact round trips, memory
// that really drops, prefetch triggers, on-demand reads, throttling, and the inner stores.
#include "memory/CompressingStore.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/MemoryTracker.h"
#include "memory/PinnedCopy.h"
#include "memory/SwapStore.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include <sys/vfs.h>

namespace engram::memory {
namespace {

namespace fs = std::filesystem;

class SwapStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(3);
    dir_ = fs::temp_directory_path() /
           ("engram-swap-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  SwapStoreOptions options() const {
    SwapStoreOptions o;
    o.spill_directory = dir_.string();
    return o;
  }

  fs::path dir_;
};

bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() &&
         torch::equal(a.view(torch::kInt), b.view(torch::kInt));
}

TEST_F(SwapStoreTest, ASwappedUnitsTensorLeavesMemoryAndComesBackBitExact) {
  auto& tracker = MemoryTracker::install();
  SwapStore store(options());
  const at::Tensor expected = torch::randn({256, 1024});  // 1 MiB
  c10::intrusive_ptr<SavedTensor> saved;
  std::int64_t live_with_tensor = 0;
  {
    at::Tensor x = expected.clone();
    live_with_tensor = tracker.live_bytes();
    store.begin_unit(0, /*swapped=*/true);
    saved = store.save(x, SavedKind::activation);
    store.end_unit(torch::zeros({1}));  // x is not the unit's output: it goes out now
  }                                     // the forward pass drops x
  store.end_forward();
  store.wait_for_transfers();
  EXPECT_EQ(store.bytes_out(), 1 << 20);
  EXPECT_EQ(store.stats().swapped_out_tensors, 1);
  // The 1 MiB is gone from the tracked memory while the tensor is out.
  EXPECT_LE(tracker.live_bytes(), live_with_tensor - (1 << 20));
  EXPECT_EQ(saved->stored_bytes(), 0);

  const at::Tensor back = saved->load();  // not prefetched: read on demand
  EXPECT_TRUE(bit_equal(back, expected));
  const SwapStats s = store.stats();
  EXPECT_EQ(s.on_demand, 1);
  EXPECT_EQ(s.prefetched, 0);
  EXPECT_EQ(s.swapped_in_bytes, 1 << 20);
  EXPECT_EQ(store.bytes_out(), 0);
  saved->release();
  EXPECT_THROW(saved->load(), std::logic_error);
}

/// A copy of `expected` saved by a swapped unit and dropped by its forward pass, with the
/// store's transfers done: on its way out unless the write failed.
c10::intrusive_ptr<SavedTensor> swap_out(SwapStore& store, const at::Tensor& expected) {
  c10::intrusive_ptr<SavedTensor> saved;
  {
    at::Tensor x = expected.clone();
    store.begin_unit(0, /*swapped=*/true);
    saved = store.save(x, SavedKind::activation);
    store.end_unit(torch::zeros({1}));
  }
  store.end_forward();
  store.wait_for_transfers();
  return saved;
}

// Swapped bytes leave memory: after each write the spill file's pages are flushed and dropped
// from the page cache (on tmpfs the file's pages are its storage: nothing can leave).
TEST_F(SwapStoreTest, SwappedBytesLeaveThePageCache) {
  SwapStore store(options());
  const at::Tensor expected = torch::randn({256, 1024});  // 1 MiB
  const c10::intrusive_ptr<SavedTensor> saved = swap_out(store, expected);
  ASSERT_EQ(store.bytes_out(), 1 << 20);
  struct statfs fs_info {};
  ASSERT_EQ(::statfs(dir_.c_str(), &fs_info), 0);
  if (fs_info.f_type == 0x01021994)  // TMPFS_MAGIC
    GTEST_SKIP() << dir_ << " is tmpfs: its pages are the file's storage";
  EXPECT_EQ(store.stats().resident_after_write_bytes, 0);
  EXPECT_LE(store.spill_resident_bytes(), 4096 * 2) << "at most a page at each end";
  EXPECT_TRUE(bit_equal(saved->load(), expected));
  EXPECT_LE(store.spill_resident_bytes(), 4096 * 2) << "read back: dropped again";
  saved->release();
}

// An I/O error in the spill file: a failed write keeps the tensor in memory (swapping is an
// optimisation), a failed read fails the load with a clear error; never wrong data.
TEST_F(SwapStoreTest, AnIoErrorKeepsTheTensorOrFailsItsLoadClearly) {
  const at::Tensor expected = torch::randn({64, 1024});  // 256 KiB
  SwapStoreOptions o = options();
  o.fail_after_bytes = 0;  // the first write fails
  {
    SwapStore store(o);
    auto saved = swap_out(store, expected);
    EXPECT_EQ(store.bytes_out(), 0) << "not written: kept in memory";
    EXPECT_TRUE(bit_equal(saved->load(), expected));
    saved->release();
  }
  o.fail_after_bytes = 256 << 10;  // the write succeeds, the read back fails
  {
    SwapStore store(o);
    auto saved = swap_out(store, expected);
    EXPECT_EQ(store.bytes_out(), 256 << 10);
    try {
      saved->load();
      ADD_FAILURE() << "a failed read loaded a tensor";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("spill file read failed"), std::string::npos)
          << e.what();
    }
    saved->release();
  }
}

TEST_F(SwapStoreTest, TheSpillFileLeavesNothingOnDisk) {
  SwapStore store(options());
  store.begin_unit(0, true);
  auto saved = store.save(torch::randn({1000}), SavedKind::activation);
  store.end_forward();
  store.wait_for_transfers();
  EXPECT_EQ(store.bytes_out(), 4000);
  EXPECT_TRUE(fs::is_empty(dir_));  // unlinked at once
  EXPECT_THROW(SwapStore(SwapStoreOptions{nullptr, (dir_ / "missing").string(), 0}),
               std::runtime_error);
}

TEST_F(SwapStoreTest, ATemporaryFolderThatIsNotThereFallsBackToTmp) {
  // Without a spill folder the store uses $TMPDIR, else /tmp, as the scratch folders do; one
  // naming no folder threw a bare "filesystem error: temp_directory_path: No such file ...".
  const char* before = std::getenv("TMPDIR");
  const std::string kept = before != nullptr ? before : "";
  ::setenv("TMPDIR", (dir_ / "missing").c_str(), 1);
  std::string message = "(constructed)";
  try {
    SwapStore store(SwapStoreOptions{});
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  if (before != nullptr)
    ::setenv("TMPDIR", kept.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  EXPECT_EQ(message, "(constructed)");
}

TEST_F(SwapStoreTest, KeptUnitsAndSharedTensorsStay) {
  SwapStore store(options());
  const at::Tensor a = torch::randn({64}), b = torch::randn({64}), c = torch::randn({64});
  store.begin_unit(0, /*swapped=*/true);
  auto a0 = store.save(a, SavedKind::activation);
  auto b0 = store.save(b, SavedKind::relu_output);  // the unit's output
  store.end_unit(b);
  store.begin_unit(1, /*swapped=*/false);
  auto b1 = store.save(b, SavedKind::activation);  // saved again by a kept unit: stays
  auto c1 = store.save(c, SavedKind::activation);  // a kept unit's own: stays
  store.end_unit(torch::zeros({1}));
  auto p = store.save(a, SavedKind::parameter);  // parameters never move
  store.end_forward();
  store.wait_for_transfers();
  EXPECT_EQ(b0.get(), b1.get());                    // one handle for both saves
  EXPECT_EQ(store.stats().swapped_out_tensors, 1);  // a only
  EXPECT_EQ(store.bytes_out(), 64 * 4);
  EXPECT_TRUE(bit_equal(b1->load(), b));
  EXPECT_TRUE(bit_equal(c1->load(), c));
  EXPECT_TRUE(bit_equal(a0->load(), a));
  EXPECT_EQ(store.stats().on_demand, 1);
  // Released by both users, b's handle frees its copy.
  b0->release();
  EXPECT_TRUE(bit_equal(b1->load(), b));
  b1->release();
  EXPECT_EQ(b1->stored_bytes(), 0);
}

TEST_F(SwapStoreTest, TheOutputOfTheLastUnitIsDecidedAtTheEndOfForward) {
  SwapStore store(options());
  const at::Tensor y = torch::randn({128});
  store.begin_unit(0, true);
  auto saved = store.save(y, SavedKind::relu_output);
  store.end_unit(y);  // may still be saved by a next unit: not yet
  store.wait_for_transfers();
  EXPECT_EQ(store.stats().swapped_out_tensors, 0);
  store.end_forward();
  store.wait_for_transfers();
  EXPECT_EQ(store.stats().swapped_out_tensors, 1);
  EXPECT_TRUE(bit_equal(saved->load(), y));
}

// A swapped unit followed by a swapped unit writes what it saves at once, its output included;
// the next unit's save of that output shares the handle, and the output comes back for the next
// unit's backward (the first to need it).
TEST_F(SwapStoreTest, BetweenSwappedUnitsTensorsAreWrittenAsSoonAsSaved) {
  auto& tracker = MemoryTracker::install();
  SwapStore store(options());
  store.set_prefetch_schedule({{0}, {1}, {}});
  const at::Tensor expected_a = torch::randn({1 << 16}), expected_y = torch::randn({1 << 16});
  c10::intrusive_ptr<SavedTensor> a0, y0, y1;
  {
    at::Tensor a = expected_a.clone(), y = expected_y.clone();
    store.begin_unit(0, /*swapped=*/true, /*next_swapped=*/true);
    a0 = store.save(a, SavedKind::activation);
    y0 = store.save(y, SavedKind::relu_output);  // the unit's output
    store.wait_for_transfers();
    EXPECT_EQ(store.bytes_out(), 2 * (1 << 18)) << "written before the unit's end";
    const std::int64_t live = tracker.live_bytes();
    a.reset();  // the forward pass moves on: a's memory goes now
    EXPECT_EQ(tracker.live_bytes(), live - (1 << 18));
    store.end_unit(y);
    store.begin_unit(1, /*swapped=*/true);
    y1 = store.save(y, SavedKind::activation);  // the next unit's input
    store.end_unit(torch::zeros({1}));
  }
  EXPECT_EQ(y0.get(), y1.get());
  store.end_forward();
  store.wait_for_transfers();
  EXPECT_EQ(store.stats().swapped_out_tensors, 2);
  store.backward_begins(1);  // unit 1's backward needs y first
  store.wait_for_transfers();
  EXPECT_EQ(store.bytes_out(), 1 << 18) << "y is back, a is still out";
  EXPECT_TRUE(bit_equal(y1->load(), expected_y));
  store.backward_begins(0);
  store.wait_for_transfers();
  EXPECT_TRUE(bit_equal(a0->load(), expected_a));
  EXPECT_TRUE(bit_equal(y0->load(), expected_y));
  EXPECT_EQ(store.stats().on_demand, 0);
}

// A handle whose graph is dropped without backward (no release()) gives back its place in the
// spill file and its registry entry when the store lets go of it at the next step, and the same
// tensor saved again in that step gets a new handle (this used to leak the handle and, on the
// second save, deadlock on the store's lock).
TEST_F(SwapStoreTest, HandlesDroppedWithoutReleaseGiveEverythingBack) {
  SwapStore store(options());
  const at::Tensor x = torch::randn({1 << 16});  // the same storage and version every step
  c10::weak_intrusive_ptr<SavedTensor> previous(c10::intrusive_ptr<SavedTensor>{});
  for (int step = 0; step < 3; ++step) {
    store.begin_unit(0, true);
    EXPECT_EQ(store.bytes_out(), 0) << "the previous step's handle gave its place back";
    EXPECT_TRUE(previous.expired());
    auto saved = store.save(x, SavedKind::activation);
    store.end_unit(torch::zeros({1}));
    store.end_forward();
    store.wait_for_transfers();
    EXPECT_EQ(store.bytes_out(), 1 << 18);
    previous = c10::weak_intrusive_ptr<SavedTensor>(saved);
  }  // each step's handle dropped without release()
  store.begin_unit(0, true);
  EXPECT_EQ(store.bytes_out(), 0);
  EXPECT_EQ(store.stats().swapped_out_tensors, 3);
}

TEST_F(SwapStoreTest, SavesOutsideTheForwardOfAUnitPassThrough) {
  SwapStore store(options());
  const at::Tensor t = torch::randn({32});
  auto before = store.save(t, SavedKind::activation);  // no forward open (a recompute rerun)
  store.begin_unit(0, true);
  store.end_forward();
  store.wait_for_transfers();
  EXPECT_EQ(store.stats().swapped_out_tensors, 0);
  EXPECT_TRUE(bit_equal(before->load(), t));
}

/// A forward pass of two swapped units, saving x0 in the first and x1 in the second, its writes
/// waited for; the two handles.
std::pair<c10::intrusive_ptr<SavedTensor>, c10::intrusive_ptr<SavedTensor>> forward_two_units(
    SwapStore& store, const at::Tensor& x0, const at::Tensor& x1) {
  store.begin_unit(0, true);
  auto s0 = store.save(x0, SavedKind::activation);
  store.end_unit(torch::zeros({1}));
  store.begin_unit(1, true);
  auto s1 = store.save(x1, SavedKind::activation);
  store.end_unit(torch::zeros({1}));
  store.end_forward();
  store.wait_for_transfers();
  return {s0, s1};
}

TEST_F(SwapStoreTest, ThePrefetchScheduleBringsTensorsBackBeforeTheyAreLoaded) {
  SwapStore store(options());
  // Two units, both swapped: unit 1's tensors come back when unit 1's backward begins (trigger
  // 1), unit 0's when unit 0's does (trigger 0); nothing at the end of forward (trigger 2).
  store.set_prefetch_schedule({{0}, {1}, {}});
  const at::Tensor x0 = torch::randn({1000}), x1 = torch::randn({2000});
  auto [s0, s1] = forward_two_units(store, x0, x1);
  EXPECT_EQ(store.bytes_out(), 12000);
  store.backward_begins(1);
  store.wait_for_transfers();
  EXPECT_EQ(store.bytes_out(), 4000);  // unit 0's is still out
  EXPECT_TRUE(bit_equal(s1->load(), x1));
  store.backward_begins(0);
  store.wait_for_transfers();
  EXPECT_EQ(store.bytes_out(), 0);
  EXPECT_TRUE(bit_equal(s0->load(), x0));
  const SwapStats s = store.stats();
  EXPECT_EQ(s.prefetched, 2);
  EXPECT_EQ(s.on_demand, 0);
  EXPECT_EQ(s.swapped_out_bytes, 12000);
  EXPECT_EQ(s.swapped_in_bytes, 12000);
}

// Under a device-memory cap a prefetch can find no room: the tensor stays out, and load() reads
// it on demand when backward needs it (then memory may be free); only a load()'s own read that
// runs out of memory fails it, with the allocator's error.
TEST_F(SwapStoreTest, APrefetchThatRunsOutOfMemoryLeavesItsTensorForLoadToRead) {
  for (const int refused : {1, 2}) {
    SCOPED_TRACE(std::to_string(refused) + " read(s) refused");
    SwapStoreOptions o = options();
    o.refuse_reads = refused;
    SwapStore store(o);
    store.set_prefetch_schedule({{0}, {}});
    const at::Tensor x = torch::randn({1000});
    store.begin_unit(0, true);
    auto saved = store.save(x, SavedKind::activation);
    store.end_unit(torch::zeros({1}));
    store.end_forward();
    store.wait_for_transfers();
    store.backward_begins(0);  // the prefetch, refused
    store.wait_for_transfers();
    EXPECT_EQ(store.bytes_out(), 4000) << "still out";
    EXPECT_EQ(store.stats().prefetches_refused, 1);
    if (refused == 1) {
      EXPECT_TRUE(bit_equal(saved->load(), x));  // read on demand
      EXPECT_EQ(store.stats().on_demand, 1);
      EXPECT_EQ(store.bytes_out(), 0);
    } else {
      EXPECT_THROW(saved->load(), c10::OutOfMemoryError);
    }
    saved->release();
  }
}

// After a refused prefetch the step reads on demand: each refusal costs the caching allocator
// an emptied cache, so the step's later triggers start none; the next step prefetches again.
TEST_F(SwapStoreTest, AfterARefusedPrefetchTheStepReadsOnDemand) {
  SwapStoreOptions o = options();
  o.refuse_reads = 1;
  SwapStore store(o);
  store.set_prefetch_schedule({{0}, {1}, {}});
  const at::Tensor x0 = torch::randn({1000}), x1 = torch::randn({2000});
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    store.reset_stats();
    auto [s0, s1] = forward_two_units(store, x0, x1);
    store.backward_begins(1);  // step 0: refused
    store.wait_for_transfers();
    EXPECT_TRUE(bit_equal(s1->load(), x1));
    store.backward_begins(0);  // step 0: none started
    store.wait_for_transfers();
    EXPECT_TRUE(bit_equal(s0->load(), x0));
    const SwapStats s = store.stats();
    EXPECT_EQ(s.prefetched, step == 0 ? 1 : 2);
    EXPECT_EQ(s.prefetches_refused, step == 0 ? 1 : 0);
    EXPECT_EQ(s.on_demand, step == 0 ? 2 : 0);
    s0->release();
    s1->release();
  }
}

TEST_F(SwapStoreTest, InPlaceChangesAfterSaveAreCaughtAfterTheRoundTrip) {
  SwapStore store(options());
  at::Tensor x = torch::randn({100});
  store.begin_unit(0, true);
  auto saved = store.save(x, SavedKind::activation);
  store.end_unit(torch::zeros({1}));
  store.end_forward();
  store.wait_for_transfers();
  x.add_(1);
  EXPECT_THROW(saved->load(), std::logic_error);
}

TEST_F(SwapStoreTest, BandwidthThrottlesTransfers) {
  SwapStoreOptions o = options();
  o.bandwidth_bytes_per_second = 20e6;  // 1 MiB takes about 52 ms each way
  SwapStore store(o);
  store.begin_unit(0, true);
  auto saved = store.save(torch::randn({1 << 18}), SavedKind::activation);
  store.end_forward();
  store.wait_for_transfers();
  saved->load();
  const SwapStats s = store.stats();
  EXPECT_GE(s.swap_out_ns, 50'000'000);
  EXPECT_GE(s.swap_in_ns, 50'000'000);
  EXPECT_GE(s.stall_ns, 50'000'000);  // on demand: backward waited for the whole read
  EXPECT_THROW(SwapStore(SwapStoreOptions{nullptr, dir_.string(), -1.0}), std::invalid_argument);
}

TEST_F(SwapStoreTest, CompressedReluOutputsMoveCompressed) {
  CompressingStore compressing;
  SwapStoreOptions o = options();
  o.inner = &compressing;
  SwapStore store(o);
  const at::Tensor y = torch::relu(torch::randn({64, 1024}));
  store.begin_unit(0, true);
  auto saved = store.save(y, SavedKind::relu_output);
  auto again = store.save(y, SavedKind::activation);  // the next layer's input: one handle
  store.end_unit(torch::zeros({1}));
  store.end_forward();
  store.wait_for_transfers();
  EXPECT_EQ(saved.get(), again.get());
  const CompressionStats c = compressing.stats();
  EXPECT_EQ(c.compressed_tensors, 1);
  // What went to the file is the compressed form: bitmap, offsets and values.
  EXPECT_EQ(store.bytes_out(), c.compressed_bytes);
  EXPECT_LT(store.bytes_out(), y.nbytes() * 3 / 4);
  EXPECT_TRUE(bit_equal(saved->load(), y));
  saved->release();
  EXPECT_TRUE(bit_equal(again->load(), y));
  again->release();
  EXPECT_EQ(compressing.live_handles(), 0);
}

TEST_F(SwapStoreTest, ReleasedWhileOutFreesItsPlaceAndTheFileIsReused) {
  SwapStore store(options());
  for (int step = 0; step < 3; ++step) {
    store.begin_unit(0, true);
    auto saved = store.save(torch::randn({4096}), SavedKind::activation);
    store.end_forward();
    store.wait_for_transfers();
    EXPECT_EQ(store.bytes_out(), 4096 * 4);
    saved->release();  // never loaded (a graph dropped without backward)
    EXPECT_EQ(store.bytes_out(), 0);
  }
  EXPECT_EQ(store.stats().swapped_out_tensors, 3);
}

}  // namespace
}  // namespace engram::memory

namespace engram::memory {
namespace {

// A CUDA tensor of a swapped unit goes to pinned host memory on the copy stream (not to the spill
// file) once the kernel that made it has run, its device bytes are freed, and it comes back onto
// the device bit for bit: on demand, and at a prefetch trigger.
TEST_F(SwapStoreTest, OnCudaASwappedTensorGoesToPinnedHostMemoryAndComesBackBitExact) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the pinned copies need one";
  CudaMemoryTracker& gpu = CudaMemoryTracker::install(0);
  SwapStore store(options());
  const at::Tensor source = torch::randn({256, 1024}, torch::kCUDA);  // 1 MiB
  const at::Tensor expected = (source * 3).cpu();
  for (const bool prefetch : {false, true}) {
    SCOPED_TRACE(prefetch ? "prefetched" : "on demand");
    store.set_prefetch_schedule(prefetch ? std::vector<std::vector<int>>{{}, {0}}
                                         : std::vector<std::vector<int>>{});
    c10::intrusive_ptr<SavedTensor> saved;
    std::int64_t live_with_tensor = 0;
    {
      at::Tensor x = source * 3;  // queued just before the save: the copy must wait for it
      live_with_tensor = gpu.live_bytes();
      store.begin_unit(0, /*swapped=*/true);
      saved = store.save(x, SavedKind::activation);
      store.end_unit(torch::zeros({1}, torch::kCUDA));
    }
    if (!prefetch) {
      store.end_forward();
      store.wait_for_transfers();
      EXPECT_EQ(store.bytes_out(), 1 << 20);
      if (CudaMemoryTracker::hooked()) EXPECT_LE(gpu.live_bytes(), live_with_tensor - (1 << 20));
    } else {
      store.end_forward();  // trigger 1 (the number of units) reads unit 0's tensor back
      store.wait_for_transfers();
      EXPECT_EQ(store.bytes_out(), 0);
    }
    const at::Tensor back = saved->load();
    EXPECT_TRUE(back.is_cuda());
    EXPECT_TRUE(bit_equal(back.cpu(), expected));
    saved->release();
  }
  const SwapStats s = store.stats();
  EXPECT_EQ(s.swapped_out_tensors, 2);
  EXPECT_EQ(s.on_demand, 1);
  EXPECT_EQ(s.prefetched, 1);
  EXPECT_EQ(s.swapped_in_bytes, 2 << 20);
  EXPECT_GT(s.swap_out_ns, 0);
  EXPECT_GT(s.copy_out_ns, 0);  // the copies' own time, on the copy stream
  EXPECT_GT(s.copy_in_ns, 0);
  EXPECT_LE(s.copy_out_ns, s.swap_out_ns);
  EXPECT_EQ(s.resident_after_write_bytes, 0);  // nothing went through the spill file
}

TEST(PinnedCopyTest, WithoutACudaDeviceEveryCallSaysSo) {
  EXPECT_THROW(StreamPoint::now(c10::Device(c10::kCPU)), std::invalid_argument);
  EXPECT_THROW(PinnedCopier(c10::Device(c10::kCPU)), std::invalid_argument);
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is visible";
  try {
    StreamPoint::now(c10::Device(c10::kCUDA, 0));
    ADD_FAILURE() << "a stream point without a device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device is visible"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(measure_bus_bandwidth(c10::Device(c10::kCUDA, 0)), std::runtime_error);
}

}  // namespace
}  // namespace engram::memory
