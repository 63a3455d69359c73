// Tests of the CUDA memory accounting (memory/CudaMemoryTracker.h): the ledger, the model of the
// caching allocator's blocks and the tracker's figures, fed synthetic allocator events on the CPU
// (exact figures), and, where a CUDA device is visible, the hooked tracker against the caching
// allocator's own statistics (skipped without one).
#include "memory/CudaMemoryTracker.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace engram::memory {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * 1024;
constexpr std::int64_t kMiB = static_cast<std::int64_t>(MiB);
// Made-up device addresses, far apart.
constexpr std::uint64_t kA = 0x7f0000000000ULL;
constexpr std::uint64_t kB = 0x7f1000000000ULL;
constexpr std::uint64_t kC = 0x7f2000000000ULL;

using Action = CudaAllocatorAction;

CudaAllocatorEvent event(Action action, std::uint64_t addr, std::uint64_t size, int device = 0) {
  CudaAllocatorEvent e;
  e.action = action;
  e.addr = addr;
  e.size = size;
  e.device = device;
  return e;
}

/// Feeds a tracker the events the allocator would trace, under the caller's TagGuard.
struct Feed {
  CudaMemoryTracker& tracker;
  int device = 0;
  void segment(std::uint64_t addr, std::uint64_t bytes) {
    tracker.on_event(event(Action::segment_alloc, addr, bytes, device));
  }
  void release(std::uint64_t addr, std::uint64_t bytes) {
    tracker.on_event(event(Action::segment_free, addr, bytes, device));
  }
  void alloc(std::uint64_t addr, std::uint64_t requested) {
    tracker.on_event(event(Action::alloc, addr, requested, device));
  }
  void alloc(std::uint64_t addr, std::uint64_t requested, Tag tag) {
    TagGuard guard(tag);
    alloc(addr, requested);
  }
  /// A free that completes at once (no other stream used the block).
  void free(std::uint64_t addr) {
    tracker.on_event(event(Action::free_requested, addr, 0, device));
    tracker.on_event(event(Action::free_completed, addr, 0, device));
  }
};

constexpr std::size_t index(Tag tag) { return static_cast<std::size_t>(tag); }

// ---------------------------------------------------------------------------------------------
// The allocator's rules

TEST(CudaAllocatorModelTest, RoundsAsTheCachingAllocator) {
  const CudaAllocatorModel model;
  EXPECT_EQ(model.round_size(1), 512u);
  EXPECT_EQ(model.round_size(512), 512u);
  EXPECT_EQ(model.round_size(513), 1024u);
  EXPECT_EQ(model.round_size(5 * MiB + 1), 5 * MiB + 512);

  CudaAllocatorModel divided;
  divided.roundup_divisions.fill(4);
  EXPECT_EQ(divided.round_size(1200), 1536u);           // not above 512 * 4: multiples of 512
  EXPECT_EQ(divided.round_size(5 * MiB + 1), 6 * MiB);  // quarters of [4 MiB, 8 MiB)
  EXPECT_EQ(divided.round_size(6 * MiB), 6 * MiB);
  EXPECT_EQ(divided.round_size(8 * MiB), 8 * MiB);
}

TEST(CudaAllocatorModelTest, SplitsAsTheCachingAllocator) {
  const CudaAllocatorModel model;
  // Small pool (requests up to 1 MiB): split when 512 bytes or more remain.
  EXPECT_TRUE(model.should_split(2 * MiB, 1024));
  EXPECT_TRUE(model.should_split(1536, 1024));
  EXPECT_FALSE(model.should_split(1024, 1024));
  // Large pool: split only when more than 1 MiB remains.
  EXPECT_TRUE(model.should_split(20 * MiB, 3 * MiB));
  EXPECT_FALSE(model.should_split(12 * MiB, 11 * MiB));
  EXPECT_TRUE(model.should_split(12 * MiB + 512, 11 * MiB));
  CudaAllocatorModel limited;
  limited.max_split_bytes = 8 * MiB;
  EXPECT_FALSE(limited.should_split(40 * MiB, 10 * MiB));  // oversize blocks are never split
  CudaAllocatorModel expandable;
  expandable.expandable_segments = true;
  EXPECT_TRUE(expandable.should_split(12 * MiB, 11 * MiB));
}

// ---------------------------------------------------------------------------------------------
// Counting synthetic events

TEST(CudaMemoryTrackerTest, LiveAndPeakByTag) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  feed.segment(kA, 2 * MiB);
  feed.alloc(kA, 1000, Tag::parameter);              // block 1024
  feed.alloc(kA + 1024, 3000, Tag::activation);      // block 3072
  feed.alloc(kA + 4096, 100, Tag::optimizer_state);  // block 512
  EXPECT_EQ(tracker.live_bytes(), 1024 + 3072 + 512);
  EXPECT_EQ(tracker.live_bytes(Tag::parameter), 1024);
  EXPECT_EQ(tracker.live_bytes(Tag::activation), 3072);
  EXPECT_EQ(tracker.live_bytes(Tag::optimizer_state), 512);
  EXPECT_EQ(tracker.live_bytes(Tag::gradient), 0);
  EXPECT_EQ(tracker.live_bytes(Tag::workspace), 0);
  EXPECT_EQ(tracker.peak_bytes(), 4608);

  // Live bytes drop when the free is requested, before it completes.
  tracker.on_event(event(Action::free_requested, kA + 1024, 3000));
  EXPECT_EQ(tracker.live_bytes(), 1536);
  EXPECT_EQ(tracker.live_bytes(Tag::activation), 0);
  tracker.on_event(event(Action::free_completed, kA + 1024, 3000));
  EXPECT_EQ(tracker.live_bytes(), 1536);
  EXPECT_EQ(tracker.peak_bytes(), 4608);
  tracker.reset_peak();
  EXPECT_EQ(tracker.peak_bytes(), 1536);
  EXPECT_EQ(tracker.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(tracker.unmodelled_allocations(), 0);
}

TEST(CudaMemoryTrackerTest, TheTagIsTheAllocatingThreadsAndDefaultsToActivation) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  feed.segment(kA, 2 * MiB);
  feed.alloc(kA, 512);
  {
    TagGuard outer(Tag::gradient);
    TagGuard inner(Tag::workspace);
    feed.alloc(kA + 512, 512);
  }
  EXPECT_EQ(tracker.live_bytes(Tag::activation), 512);
  EXPECT_EQ(tracker.live_bytes(Tag::workspace), 512);
  EXPECT_EQ(tracker.live_bytes(Tag::gradient), 0);
}

TEST(CudaMemoryTrackerTest, FreesOfUnknownAddressesAreIgnored) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  feed.segment(kA, 2 * MiB);
  feed.alloc(kA, 2048, Tag::activation);
  feed.free(kA + 0x100000);  // never allocated (from before the tracker, say)
  feed.free(kB);
  EXPECT_EQ(tracker.live_bytes(), 2048);
  feed.free(kA);
  feed.free(kA);  // twice
  EXPECT_EQ(tracker.live_bytes(), 0);
  EXPECT_EQ(tracker.live_bytes(Tag::activation), 0);
  EXPECT_EQ(tracker.peak_bytes(), 2048);
}

TEST(CudaMemoryTrackerTest, BlockSizesFollowTheAllocatorsSplitsAndMerges) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  // 1 to 10 MiB requests come from 20 MiB segments, split: the block is the rounded request.
  feed.segment(kA, 20 * MiB);
  feed.alloc(kA, 3 * MiB + 1);
  EXPECT_EQ(tracker.live_bytes(), 3 * kMiB + 512);
  // The rest of the segment (17 MiB - 512) serves 16 MiB whole: less than 1 MiB would remain.
  feed.alloc(kA + 3 * MiB + 512, 16 * MiB);
  EXPECT_EQ(tracker.live_bytes(), 20 * kMiB);
  // Freed, the two blocks merge back into one of 20 MiB, which a 19.5 MiB request takes whole.
  feed.free(kA);
  feed.free(kA + 3 * MiB + 512);
  EXPECT_EQ(tracker.live_bytes(), 0);
  feed.alloc(kA, 19 * MiB + 512 * KiB);
  EXPECT_EQ(tracker.live_bytes(), 20 * kMiB);
  feed.free(kA);

  // Larger requests get segments rounded to 2 MiB, unsplit when 1 MiB or less remains.
  feed.segment(kB, 12 * MiB);
  feed.alloc(kB, 11 * MiB + 100);
  EXPECT_EQ(tracker.live_bytes(), 12 * kMiB);
  feed.free(kB);

  // A block is not merged with a neighbour whose free has not completed.
  feed.alloc(kA, 4 * MiB);
  feed.alloc(kA + 4 * MiB, 4 * MiB);
  tracker.on_event(event(Action::free_requested, kA, 0));
  feed.free(kA + 4 * MiB);  // merges with the free tail only: 16 MiB at kA + 4 MiB
  EXPECT_EQ(tracker.live_bytes(), 0);
  feed.alloc(kA + 4 * MiB, 15 * MiB + 512 * KiB);  // takes the 16 MiB whole
  EXPECT_EQ(tracker.live_bytes(), 16 * kMiB);
  tracker.on_event(event(Action::free_completed, kA, 0));
  feed.free(kA + 4 * MiB);
  feed.alloc(kA, 19 * MiB + 512 * KiB);  // all merged again: 20 MiB
  EXPECT_EQ(tracker.live_bytes(), 20 * kMiB);
  EXPECT_EQ(tracker.unmodelled_allocations(), 0);

  // An allocation in a segment the tracker never saw counts its rounded size.
  feed.alloc(kC, 1000);
  EXPECT_EQ(tracker.live_bytes(), 20 * kMiB + 1024);
  EXPECT_EQ(tracker.unmodelled_allocations(), 1);
  feed.free(kC);
  EXPECT_EQ(tracker.live_bytes(), 20 * kMiB);
}

TEST(CudaMemoryTrackerTest, ExpandableSegmentsGrowByMappedRanges) {
  CudaAllocatorModel model;
  model.expandable_segments = true;
  CudaMemoryTracker tracker(0, model);
  Feed feed{tracker};
  tracker.on_event(event(Action::segment_map, kA, 20 * MiB));
  feed.alloc(kA, 11 * MiB + 100);  // split: at least 512 bytes remain
  EXPECT_EQ(tracker.live_bytes(), 11 * kMiB + 512);
  // A range mapped after the segment's end joins its free tail (9 MiB - 512 + 20 MiB).
  tracker.on_event(event(Action::segment_map, kA + 20 * MiB, 20 * MiB));
  EXPECT_EQ(tracker.reserved_bytes(), 40 * kMiB);
  feed.alloc(kA + 11 * MiB + 512, 29 * MiB - 512);
  EXPECT_EQ(tracker.live_bytes(), 40 * kMiB);
  feed.free(kA + 11 * MiB + 512);
  tracker.on_event(event(Action::segment_unmap, kA + 20 * MiB, 20 * MiB));
  EXPECT_EQ(tracker.reserved_bytes(), 20 * kMiB);
  EXPECT_EQ(tracker.reserved_peak_bytes(), 40 * kMiB);
  EXPECT_EQ(tracker.unmodelled_allocations(), 0);
}

TEST(CudaMemoryTrackerTest, EventsOfAnotherDeviceAreIgnored) {
  CudaMemoryTracker tracker(1);
  EXPECT_EQ(tracker.device_index(), 1);
  Feed device0{tracker, 0};
  Feed device1{tracker, 1};
  device0.segment(kA, 20 * MiB);
  device0.alloc(kA, 4 * MiB, Tag::parameter);
  EXPECT_EQ(tracker.live_bytes(), 0);
  EXPECT_EQ(tracker.reserved_bytes(), 0);
  device1.segment(kB, 20 * MiB);
  device1.alloc(kB, 4 * MiB, Tag::parameter);
  EXPECT_EQ(tracker.live_bytes(), 4 * kMiB);
  EXPECT_EQ(tracker.live_bytes(Tag::parameter), 4 * kMiB);
  EXPECT_EQ(tracker.reserved_bytes(), 20 * kMiB);
  device0.free(kB);  // the same address on device 0 is another allocation
  EXPECT_EQ(tracker.live_bytes(), 4 * kMiB);
  device1.free(kB);
  EXPECT_EQ(tracker.live_bytes(), 0);
}

TEST(CudaMemoryTrackerTest, ReservedAndFragmentationAtThePeak) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  tracker.begin_window();
  feed.segment(kA, 20 * MiB);
  feed.alloc(kA, 4 * MiB);
  feed.alloc(kA + 4 * MiB, 4 * MiB);  // 8 MiB live, 20 MiB reserved
  feed.free(kA);
  feed.free(kA + 4 * MiB);
  feed.segment(kB, 40 * MiB);
  feed.alloc(kB, 32 * MiB + 100);  // the peak: 32 MiB + 512 live (split), 60 MiB reserved
  feed.release(kC, 20 * MiB);      // never seen: ignored
  const DeviceMemoryWindow window = tracker.end_window();
  EXPECT_EQ(window.start_live_bytes, 0);
  EXPECT_EQ(window.start_reserved_bytes, 0);
  EXPECT_EQ(window.peak_bytes, 32 * kMiB + 512);
  EXPECT_EQ(window.reserved_at_peak_bytes, 60 * kMiB);
  EXPECT_EQ(window.fragmentation_bytes, 28 * kMiB - 512);
  EXPECT_EQ(window.reserved_peak_bytes, 60 * kMiB);
  ASSERT_EQ(window.reserved_events.size(), 2u);
  EXPECT_EQ(window.reserved_events[0].bytes, 20 * kMiB);
  EXPECT_EQ(window.reserved_events[0].after_events, 0u);
  EXPECT_EQ(window.reserved_events[1].bytes, 40 * kMiB);
  EXPECT_EQ(window.reserved_events[1].after_events, 4u);
  ASSERT_EQ(window.events.size(), 5u);

  // A peak reached before the reserved maximum keeps the reserved bytes of its instant.
  tracker.begin_window();
  feed.free(kB);
  feed.alloc(kB, 36 * MiB);  // 36 MiB live, 60 MiB reserved: the peak
  feed.free(kB);
  feed.release(kB, 40 * MiB);
  feed.segment(kC, 80 * MiB);  // 100 MiB reserved, nothing live
  const DeviceMemoryWindow second = tracker.end_window();
  EXPECT_EQ(second.start_live_bytes, 32 * kMiB + 512);
  EXPECT_EQ(second.start_reserved_bytes, 60 * kMiB);
  EXPECT_EQ(second.peak_bytes, 36 * kMiB);
  EXPECT_EQ(second.reserved_at_peak_bytes, 60 * kMiB);
  EXPECT_EQ(second.fragmentation_bytes, 24 * kMiB);
  EXPECT_EQ(second.reserved_peak_bytes, 100 * kMiB);
  EXPECT_EQ(tracker.reserved_bytes(), 100 * kMiB);
  EXPECT_EQ(tracker.reserved_peak_bytes(), 100 * kMiB);
  feed.release(kC, 80 * MiB);
  feed.release(kA, 20 * MiB);
  EXPECT_EQ(tracker.reserved_bytes(), 0);
  tracker.reset_peak();
  EXPECT_EQ(tracker.reserved_peak_bytes(), 0);
}

TEST(CudaMemoryTrackerTest, ActivationPeakAndPhases) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  feed.segment(kA, 40 * MiB);
  feed.alloc(kA, 2 * MiB, Tag::parameter);
  tracker.begin_window();
  {
    PhaseGuard phase(Phase::forward);
    feed.alloc(kA + 2 * MiB, 4 * MiB, Tag::activation);
    feed.alloc(kA + 6 * MiB, 4 * MiB, Tag::activation);  // the peak: 10 MiB, 8 of activations
  }
  {
    PhaseGuard phase(Phase::backward);
    feed.free(kA + 6 * MiB);
    feed.alloc(kA + 6 * MiB, 2 * MiB, Tag::gradient);
    feed.free(kA + 2 * MiB);
  }
  const DeviceMemoryWindow window = tracker.end_window();
  EXPECT_EQ(window.start_live_bytes, 2 * kMiB);
  EXPECT_EQ(window.start_live_by_tag[index(Tag::parameter)], 2 * kMiB);
  EXPECT_EQ(window.peak_bytes, 10 * kMiB);
  EXPECT_EQ(window.activation_peak_bytes, 8 * kMiB);
  EXPECT_EQ(window.reserved_at_peak_bytes, 40 * kMiB);
  EXPECT_EQ(window.fragmentation_bytes, 30 * kMiB);
  ASSERT_EQ(window.events.size(), 5u);
  const std::vector<std::pair<std::int64_t, Phase>> expected = {{4 * kMiB, Phase::forward},
                                                                {4 * kMiB, Phase::forward},
                                                                {-4 * kMiB, Phase::backward},
                                                                {2 * kMiB, Phase::backward},
                                                                {-4 * kMiB, Phase::backward}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(window.events[i].bytes, expected[i].first) << i;
    EXPECT_EQ(window.events[i].phase, expected[i].second) << i;
  }
  EXPECT_EQ(window.events[3].tag, Tag::gradient);
  EXPECT_EQ(window.events[0].allocation, window.events[4].allocation);
  EXPECT_NE(window.events[0].allocation, window.events[1].allocation);
  for (std::size_t i = 1; i < window.events.size(); ++i) {
    EXPECT_LE(window.events[i - 1].time_ns, window.events[i].time_ns);
  }
  EXPECT_EQ(tracker.live_bytes(), 4 * kMiB);
  EXPECT_EQ(tracker.live_bytes(Tag::gradient), 2 * kMiB);
}

TEST(CudaMemoryTrackerTest, RetagCountsFromTheFirstByte) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  feed.segment(kA, 40 * MiB);
  feed.alloc(kA, 2 * MiB, Tag::activation);  // from before the window, made a parameter in it
  tracker.begin_window();
  feed.alloc(kA + 2 * MiB, 4 * MiB, Tag::activation);  // a gradient autograd made as temporary
  feed.alloc(kA + 6 * MiB, 3 * MiB, Tag::activation);
  EXPECT_TRUE(tracker.retag(kA + 2 * MiB, Tag::workspace));
  EXPECT_TRUE(tracker.retag(kA + 2 * MiB, Tag::gradient));  // the last tag wins
  EXPECT_TRUE(tracker.retag(kA, Tag::parameter));
  EXPECT_FALSE(tracker.retag(kB, Tag::parameter));  // unknown
  EXPECT_EQ(tracker.live_bytes(Tag::gradient), 4 * kMiB);
  EXPECT_EQ(tracker.live_bytes(Tag::parameter), 2 * kMiB);
  EXPECT_EQ(tracker.live_bytes(Tag::activation), 3 * kMiB);
  EXPECT_EQ(tracker.live_bytes(Tag::workspace), 0);
  feed.free(kA + 6 * MiB);
  const DeviceMemoryWindow window = tracker.end_window();
  EXPECT_EQ(window.start_live_by_tag[index(Tag::parameter)], 2 * kMiB);
  EXPECT_EQ(window.start_live_by_tag[index(Tag::activation)], 0);
  EXPECT_EQ(window.peak_bytes, 9 * kMiB);
  EXPECT_EQ(window.activation_peak_bytes, 3 * kMiB);  // neither the retagged gradient nor parameter
  ASSERT_EQ(window.events.size(), 3u);
  EXPECT_EQ(window.events[0].tag, Tag::gradient);
  EXPECT_EQ(window.events[1].tag, Tag::activation);

  // Tensors: an undefined one, and one not on this tracker's device.
  EXPECT_FALSE(tracker.retag(at::Tensor(), Tag::parameter));
  EXPECT_FALSE(tracker.retag(at::empty({16}, at::kFloat), Tag::parameter));
}

TEST(CudaMemoryTrackerTest, Windows) {
  CudaMemoryTracker tracker(0);
  Feed feed{tracker};
  EXPECT_FALSE(tracker.window_open());
  EXPECT_THROW(tracker.end_window(), std::logic_error);
  EXPECT_EQ(tracker.now_ns(), 0);
  feed.segment(kA, 20 * MiB);
  feed.alloc(kA, 8 * MiB);  // before any window: not an event
  tracker.begin_window();
  feed.alloc(kA + 8 * MiB, 2 * MiB);
  tracker.begin_window();  // discards the first
  EXPECT_TRUE(tracker.window_open());
  feed.free(kA + 8 * MiB);
  Span span;
  span.name = "forward";
  span.category = "phase";
  span.end_ns = tracker.now_ns();
  tracker.record_span(span);
  const DeviceMemoryWindow window = tracker.end_window();
  EXPECT_FALSE(tracker.window_open());
  EXPECT_EQ(window.start_live_bytes, 10 * kMiB);
  EXPECT_EQ(window.start_reserved_bytes, 20 * kMiB);
  ASSERT_EQ(window.events.size(), 1u);
  EXPECT_EQ(window.events[0].bytes, -2 * kMiB);
  EXPECT_EQ(window.peak_bytes, 10 * kMiB);
  EXPECT_EQ(window.reserved_at_peak_bytes, 20 * kMiB);
  EXPECT_EQ(window.fragmentation_bytes, 10 * kMiB);
  EXPECT_TRUE(window.reserved_events.empty());
  ASSERT_EQ(window.spans.size(), 1u);
  EXPECT_EQ(window.spans[0].name, "forward");
  EXPECT_GE(window.duration_ns, window.spans[0].end_ns);
  // Outside a window nothing is recorded, and a span is dropped.
  tracker.record_span(span);
  feed.free(kA);
  tracker.begin_window();
  const DeviceMemoryWindow empty = tracker.end_window();
  EXPECT_TRUE(empty.events.empty());
  EXPECT_TRUE(empty.spans.empty());
  EXPECT_EQ(empty.peak_bytes, 0);
  EXPECT_EQ(empty.fragmentation_bytes, 20 * kMiB);
}

TEST(CudaMemoryTrackerTest, DispatchReachesTheInstalledTrackerOfTheEventsDevice) {
  // Device 7's tracker: no machine this runs on has 8 GPUs, so only dispatch() feeds it.
  CudaMemoryTracker& tracker = CudaMemoryTracker::install(7);
  EXPECT_EQ(&CudaMemoryTracker::install(7), &tracker);
  EXPECT_EQ(CudaMemoryTracker::installed(7), &tracker);
  EXPECT_EQ(tracker.device_index(), 7);
  EXPECT_EQ(CudaMemoryTracker::installed(6), nullptr);
  EXPECT_EQ(CudaMemoryTracker::installed(-1), nullptr);
  EXPECT_THROW(CudaMemoryTracker::install(128), std::invalid_argument);
  EXPECT_EQ(CudaMemoryTracker::hooked(), torch::cuda::is_available())
      << CudaMemoryTracker::hook_status();

  const std::int64_t before = tracker.live_bytes();
  CudaMemoryTracker::dispatch(event(Action::segment_alloc, kA, 20 * MiB, 7));
  {
    TagGuard tag(Tag::optimizer_state);
    CudaMemoryTracker::dispatch(event(Action::alloc, kA, 5 * MiB, 7));
  }
  CudaMemoryTracker::dispatch(event(Action::alloc, kB, 5 * MiB, 6));  // no tracker: dropped
  CudaMemoryTracker::dispatch(event(Action::alloc, kB, 5 * MiB, -1));
  CudaMemoryTracker::dispatch(event(Action::other, kC, 5 * MiB, 7));
  EXPECT_EQ(tracker.live_bytes(), before + 5 * kMiB);
  EXPECT_EQ(tracker.live_bytes(Tag::optimizer_state), 5 * kMiB);
  CudaMemoryTracker::dispatch(event(Action::free_requested, kA, 5 * MiB, 7));
  CudaMemoryTracker::dispatch(event(Action::free_completed, kA, 5 * MiB, 7));
  CudaMemoryTracker::dispatch(event(Action::segment_free, kA, 20 * MiB, 7));
  EXPECT_EQ(tracker.live_bytes(), before);
  EXPECT_EQ(tracker.reserved_bytes(), 0);
}

// ---------------------------------------------------------------------------------------------
// On a GPU: the hooked tracker against the caching allocator's statistics

// An installed tracker's windows carry SpanGuard's spans (the step's phases), as the CPU
// tracker's do; outside a window a span goes nowhere.
TEST(CudaMemoryTrackerTest, AnInstalledTrackersWindowHoldsTheSpansOfSpanGuard) {
  CudaMemoryTracker& tracker = CudaMemoryTracker::install(5);  // fed by no device here
  { SpanGuard outside("before", "phase"); }
  tracker.begin_window();
  {
    SpanGuard forward("forward", "phase");
    SpanGuard inner("layer", "op");
  }
  const DeviceMemoryWindow w = tracker.end_window();
  ASSERT_EQ(w.spans.size(), 2u);
  EXPECT_EQ(w.spans[0].name, "layer");  // in order of their end
  EXPECT_EQ(w.spans[1].name, "forward");
  EXPECT_EQ(w.spans[1].category, "phase");
  EXPECT_LE(w.spans[1].begin_ns, w.spans[0].begin_ns);
  EXPECT_GE(w.spans[1].end_ns, w.spans[0].end_ns);
  EXPECT_LE(w.spans[1].end_ns, w.duration_ns);
  { SpanGuard after("after", "phase"); }
  tracker.begin_window();
  EXPECT_TRUE(tracker.end_window().spans.empty());
}

TEST(CudaMemoryTrackerGpuTest, CountsCudaTensorsAsTheAllocatorsStatistics) {
  CudaMemoryTracker& gpu = CudaMemoryTracker::install(0);
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device: " << CudaMemoryTracker::hook_status();
  }
  ASSERT_TRUE(CudaMemoryTracker::hooked()) << CudaMemoryTracker::hook_status();
  namespace allocator = c10::cuda::CUDACachingAllocator;
  const auto allocated = [] { return allocator::getDeviceStats(0).allocated_bytes[0].current; };
  const auto reserved = [] { return allocator::getDeviceStats(0).reserved_bytes[0].current; };

  const std::int64_t live0 = gpu.live_bytes();
  const std::int64_t allocated0 = allocated();
  const std::int64_t reserved0 = reserved();
  const std::int64_t tracked_reserved0 = gpu.reserved_bytes();
  const std::int64_t unmodelled0 = gpu.unmodelled_allocations();
  std::array<std::int64_t, kNumTags> tag0{};
  for (std::size_t t = 0; t < kNumTags; ++t) tag0[t] = gpu.live_bytes(static_cast<Tag>(t));

  const auto options = at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0);
  // Small and large pools, split and whole blocks (11 MiB + 100 takes a 12 MiB segment whole).
  const std::vector<std::pair<std::int64_t, Tag>> requests = {{1000, Tag::parameter},
                                                              {100, Tag::gradient},
                                                              {700 * 1024, Tag::activation},
                                                              {3 * kMiB + 1, Tag::optimizer_state},
                                                              {11 * kMiB + 100, Tag::activation},
                                                              {40 * kMiB, Tag::workspace},
                                                              {5 * kMiB, Tag::parameter}};
  std::array<std::int64_t, kNumTags> by_tag{};
  std::vector<at::Tensor> tensors;
  for (const auto& [bytes, tag] : requests) {
    const std::int64_t before = allocated();
    {
      TagGuard guard(tag);
      tensors.push_back(at::empty({bytes}, options));
    }
    const std::int64_t block = allocated() - before;
    EXPECT_GE(block, bytes);
    by_tag[index(tag)] += block;
    EXPECT_EQ(gpu.live_bytes() - live0, allocated() - allocated0) << bytes << " bytes";
  }
  for (std::size_t t = 0; t < kNumTags; ++t) {
    EXPECT_EQ(gpu.live_bytes(static_cast<Tag>(t)) - tag0[t], by_tag[t])
        << tag_name(static_cast<Tag>(t));
  }
  EXPECT_EQ(gpu.reserved_bytes() - tracked_reserved0, reserved() - reserved0);
  EXPECT_EQ(gpu.unmodelled_allocations(), unmodelled0);

  // Retag by tensor.
  const std::int64_t workspace = gpu.live_bytes(Tag::workspace);
  EXPECT_TRUE(gpu.retag(tensors[5], Tag::gradient));
  EXPECT_EQ(gpu.live_bytes(Tag::workspace), workspace - 40 * kMiB);
  EXPECT_FALSE(gpu.retag(at::empty({8}, at::kByte), Tag::gradient));  // a CPU tensor

  // A window around an op's temporaries, with the peaks of torch's statistics.
  allocator::resetPeakStats(0);
  gpu.reset_peak();
  const std::int64_t live_before = gpu.live_bytes();
  const std::int64_t reserved_before = gpu.reserved_bytes();
  const std::int64_t allocated_before = allocated();
  const std::int64_t torch_reserved_before = reserved();
  gpu.begin_window();
  {
    PhaseGuard phase(Phase::forward);
    at::Tensor a = at::ones({64 * 1024 * 1024}, options);  // 64 MiB
    at::Tensor b = a + a;                                  // 64 MiB more
    tensors.push_back(b.sum(at::kLong));                   // kept
  }
  const DeviceMemoryWindow window = gpu.end_window();
  const auto stats = allocator::getDeviceStats(0);
  EXPECT_EQ(window.peak_bytes - window.start_live_bytes,
            stats.allocated_bytes[0].peak - allocated_before);
  EXPECT_EQ(gpu.peak_bytes() - live_before, stats.allocated_bytes[0].peak - allocated_before);
  EXPECT_EQ(window.reserved_peak_bytes - reserved_before,
            stats.reserved_bytes[0].peak - torch_reserved_before);
  EXPECT_EQ(window.fragmentation_bytes, window.reserved_at_peak_bytes - window.peak_bytes);
  const std::int64_t start_persistent = window.start_live_by_tag[index(Tag::parameter)] +
                                        window.start_live_by_tag[index(Tag::gradient)] +
                                        window.start_live_by_tag[index(Tag::optimizer_state)];
  EXPECT_GE(window.activation_peak_bytes, window.start_live_bytes - start_persistent + 128 * kMiB);
  EXPECT_EQ(gpu.live_bytes() - live0, allocated() - allocated0);
  bool forward = false;
  for (const MemoryEvent& e : window.events) forward = forward || e.phase == Phase::forward;
  EXPECT_TRUE(forward);

  // Frees, and the cache emptied: the segments' release is seen.
  tensors.clear();
  EXPECT_EQ(gpu.live_bytes() - live0, allocated() - allocated0);
  allocator::emptyCache();
  EXPECT_EQ(gpu.reserved_bytes() - tracked_reserved0, reserved() - reserved0);
  EXPECT_EQ(gpu.unmodelled_allocations(), unmodelled0);
}

}  // namespace
}  // namespace engram::memory
