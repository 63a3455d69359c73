// Tests of the memory module's accounting: the tracking CPU allocator, tags, phases, spans,
// windows and the Chrome trace. One file because every test here needs torch headers, which are
// slow to compile. Figures are checked exactly, as deltas from what was live before (gtest and
// torch may keep tensors of their own alive).
#include "memory/MemoryTracker.h"
#include "tests/support/TempDir.h"
#include "tests/support/Thrown.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/Allocator.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace engram::memory {
namespace {

using testing::read_file;
using testing::TempDir;

constexpr std::size_t index(Tag tag) { return static_cast<std::size_t>(tag); }

std::int64_t persistent_bytes(const std::array<std::int64_t, kNumTags>& by_tag) {
  return by_tag[index(Tag::parameter)] + by_tag[index(Tag::gradient)] +
         by_tag[index(Tag::optimizer_state)];
}

/// Live bytes that are neither parameters, gradients nor optimizer state.
std::int64_t transient_live(const MemoryTracker& tracker) {
  return tracker.live_bytes() - tracker.live_bytes(Tag::parameter) -
         tracker.live_bytes(Tag::gradient) - tracker.live_bytes(Tag::optimizer_state);
}

at::Tensor bytes(std::int64_t n) { return at::empty({n}, at::kByte); }

class MemoryTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    tracker_ = &MemoryTracker::install();
    if (tracker_->window_open()) tracker_->end_window();
  }
  void TearDown() override {
    if (tracker_->window_open()) tracker_->end_window();
  }
  MemoryTracker* tracker_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Counting

TEST_F(MemoryTrackerTest, InstallIsIdempotent) {
  EXPECT_EQ(&MemoryTracker::install(), tracker_);
  EXPECT_EQ(MemoryTracker::installed(), tracker_);
}

TEST_F(MemoryTrackerTest, CountsAllocationsAndFreesExactly) {
  const std::int64_t before = tracker_->live_bytes();
  const std::int64_t activations = tracker_->live_bytes(Tag::activation);
  tracker_->reset_peak();
  EXPECT_EQ(tracker_->peak_bytes(), before);
  {
    at::Tensor a = bytes(1000);
    EXPECT_EQ(tracker_->live_bytes(), before + 1000);
    EXPECT_EQ(tracker_->live_bytes(Tag::activation), activations + 1000);
    at::Tensor b = at::empty({750}, at::kFloat);
    EXPECT_EQ(tracker_->live_bytes(), before + 4000);
    a.reset();
    EXPECT_EQ(tracker_->live_bytes(), before + 3000);
    EXPECT_EQ(tracker_->peak_bytes(), before + 4000);
  }
  EXPECT_EQ(tracker_->live_bytes(), before);
  EXPECT_EQ(tracker_->live_bytes(Tag::activation), activations);
  EXPECT_EQ(tracker_->peak_bytes(), before + 4000);
  tracker_->reset_peak();
  EXPECT_EQ(tracker_->peak_bytes(), before);
}

TEST_F(MemoryTrackerTest, DataIsAlignedAndUsable) {
  at::Tensor t = at::arange(0, 1000, at::kDouble);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64, 0u);
  EXPECT_DOUBLE_EQ(t.sum().item<double>(), 999.0 * 1000.0 / 2.0);
}

TEST_F(MemoryTrackerTest, ZeroSizeTensorsCountNothing) {
  const std::int64_t before = tracker_->live_bytes();
  tracker_->begin_window();
  {
    at::Tensor empty = at::empty({0}, at::kFloat);
    at::Tensor empty2 = at::empty({4, 0, 3}, at::kFloat);
    EXPECT_EQ(tracker_->live_bytes(), before);
    EXPECT_FALSE(tracker_->retag(empty, Tag::gradient));
  }
  const MemoryWindow window = tracker_->end_window();
  EXPECT_TRUE(window.events.empty());
  EXPECT_EQ(tracker_->live_bytes(), before);
}

TEST_F(MemoryTrackerTest, ResizeFreesTheOldAllocation) {
  const std::int64_t before = tracker_->live_bytes();
  at::Tensor t = bytes(100);
  t.resize_({1000});
  EXPECT_EQ(tracker_->live_bytes(), before + 1000);
  t.reset();
  EXPECT_EQ(tracker_->live_bytes(), before);
}

TEST_F(MemoryTrackerTest, TorchOpsAreCounted) {
  const at::Tensor a = at::ones({64, 32});
  const at::Tensor b = at::ones({32, 16});
  const std::int64_t before = tracker_->live_bytes();
  tracker_->begin_window();
  at::Tensor c = at::mm(a, b);
  const MemoryWindow window = tracker_->end_window();
  EXPECT_EQ(tracker_->live_bytes(), before + 64 * 16 * 4);
  EXPECT_FLOAT_EQ(c[3][5].item<float>(), 32.0f);
  const auto found = std::find_if(window.events.begin(), window.events.end(),
                                  [](const MemoryEvent& e) { return e.bytes == 64 * 16 * 4; });
  EXPECT_NE(found, window.events.end());
  c.reset();
  EXPECT_EQ(tracker_->live_bytes(), before);
}

TEST_F(MemoryTrackerTest, RawAllocateAndDeallocateThroughTheAllocator) {
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::CPU);
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  const std::int64_t before = tracker_->live_bytes();
  void* p = allocator->raw_allocate(333);
  EXPECT_EQ(tracker_->live_bytes(), before + 333);
  allocator->raw_deallocate(p);
  EXPECT_EQ(tracker_->live_bytes(), before);
}

TEST_F(MemoryTrackerTest, ForeignStorageIsIgnored) {
  static std::vector<float> buffer(256, 1.0f);
  int deleted = 0;
  const std::int64_t before = tracker_->live_bytes();
  const std::int64_t params = tracker_->live_bytes(Tag::parameter);
  {
    at::Tensor foreign = at::from_blob(
        buffer.data(), {256}, [&deleted](void*) { ++deleted; }, at::kFloat);
    EXPECT_EQ(tracker_->live_bytes(), before);
    EXPECT_FALSE(tracker_->retag(foreign, Tag::parameter));
    EXPECT_EQ(tracker_->live_bytes(Tag::parameter), params);
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(tracker_->live_bytes(), before);
  EXPECT_FALSE(tracker_->retag(at::Tensor(), Tag::parameter));
}

TEST_F(MemoryTrackerTest, ThreadsAllocateConcurrently) {
  const std::int64_t before = tracker_->live_bytes();
  const std::int64_t workspace = tracker_->live_bytes(Tag::workspace);
  constexpr int kThreads = 4;
  constexpr int kRounds = 1000;
  tracker_->begin_window();
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([k] {
      TagGuard tag(k % 2 == 0 ? Tag::workspace : Tag::activation);
      for (int i = 0; i < kRounds; ++i) {
        at::Tensor a = bytes(1 + (i * 7 + k) % 4096);
        at::Tensor b = bytes(64);
        a.reset();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const MemoryWindow window = tracker_->end_window();
  EXPECT_EQ(tracker_->live_bytes(), before);
  EXPECT_EQ(tracker_->live_bytes(Tag::workspace), workspace);
  EXPECT_EQ(window.events.size(), static_cast<std::size_t>(kThreads * kRounds * 4));
  std::int64_t sum = 0;
  std::int64_t workspace_events = 0;
  for (const MemoryEvent& e : window.events) {
    sum += e.bytes;
    if (e.tag == Tag::workspace) ++workspace_events;
  }
  EXPECT_EQ(sum, 0);
  EXPECT_EQ(workspace_events, kThreads / 2 * kRounds * 4);
  for (std::size_t i = 1; i < window.events.size(); ++i) {
    EXPECT_LE(window.events[i - 1].time_ns, window.events[i].time_ns);
  }
  EXPECT_GE(window.peak_bytes, before + 4096 + 64);
}

// ---------------------------------------------------------------------------------------------
// Tags and retag

TEST_F(MemoryTrackerTest, TagGuardsNest) {
  EXPECT_EQ(TagGuard::current(), Tag::activation);
  const std::int64_t params = tracker_->live_bytes(Tag::parameter);
  const std::int64_t grads = tracker_->live_bytes(Tag::gradient);
  at::Tensor p, g, p2;
  {
    TagGuard outer(Tag::parameter);
    EXPECT_EQ(TagGuard::current(), Tag::parameter);
    p = bytes(100);
    {
      TagGuard inner(Tag::gradient);
      EXPECT_EQ(TagGuard::current(), Tag::gradient);
      g = bytes(40);
    }
    EXPECT_EQ(TagGuard::current(), Tag::parameter);
    p2 = bytes(11);
  }
  EXPECT_EQ(TagGuard::current(), Tag::activation);
  EXPECT_EQ(tracker_->live_bytes(Tag::parameter), params + 111);
  EXPECT_EQ(tracker_->live_bytes(Tag::gradient), grads + 40);
  g.reset();
  EXPECT_EQ(tracker_->live_bytes(Tag::gradient), grads);
  // The tag is per thread.
  std::thread([] { EXPECT_EQ(TagGuard::current(), Tag::activation); }).join();
}

TEST_F(MemoryTrackerTest, RetagMovesBytesBetweenTags) {
  const std::int64_t live = tracker_->live_bytes();
  const std::int64_t activations = tracker_->live_bytes(Tag::activation);
  const std::int64_t states = tracker_->live_bytes(Tag::optimizer_state);
  at::Tensor t = bytes(2048);
  const at::Tensor view = t.slice(0, 100, 200);  // any view of the storage retags all of it
  EXPECT_TRUE(tracker_->retag(view, Tag::optimizer_state));
  EXPECT_EQ(tracker_->live_bytes(Tag::activation), activations);
  EXPECT_EQ(tracker_->live_bytes(Tag::optimizer_state), states + 2048);
  EXPECT_EQ(tracker_->live_bytes(), live + 2048);
  EXPECT_TRUE(tracker_->retag(t, Tag::optimizer_state));  // same tag: no change
  EXPECT_EQ(tracker_->live_bytes(Tag::optimizer_state), states + 2048);
  t.reset();
  EXPECT_EQ(tracker_->live_bytes(Tag::optimizer_state), states + 2048);  // the view keeps it
}

TEST_F(MemoryTrackerTest, FreeUsesTheRetaggedTag) {
  const std::int64_t activations = tracker_->live_bytes(Tag::activation);
  const std::int64_t grads = tracker_->live_bytes(Tag::gradient);
  {
    at::Tensor t = bytes(512);
    ASSERT_TRUE(tracker_->retag(t, Tag::gradient));
  }
  EXPECT_EQ(tracker_->live_bytes(Tag::activation), activations);
  EXPECT_EQ(tracker_->live_bytes(Tag::gradient), grads);
}

TEST_F(MemoryTrackerTest, RetagInWindowCountsFromTheFirstByte) {
  const std::int64_t transient = transient_live(*tracker_);
  tracker_->begin_window();
  at::Tensor a = bytes(1000);  // an activation now, a gradient in the end
  at::Tensor b = bytes(500);
  b.reset();
  ASSERT_TRUE(tracker_->retag(a, Tag::gradient));
  ASSERT_TRUE(tracker_->retag(a, Tag::workspace));  // retagged twice: the last one counts
  ASSERT_TRUE(tracker_->retag(a, Tag::gradient));
  const MemoryWindow window = tracker_->end_window();
  ASSERT_EQ(window.events.size(), 3u);
  EXPECT_EQ(window.events[0].bytes, 1000);
  EXPECT_EQ(window.events[0].tag, Tag::gradient);
  EXPECT_EQ(window.events[1].tag, Tag::activation);
  EXPECT_EQ(window.events[2].bytes, -500);
  EXPECT_EQ(window.peak_bytes, window.start_live_bytes + 1500);
  EXPECT_EQ(window.activation_peak_bytes, transient + 500);
  EXPECT_EQ(window.events[0].allocation + 1, window.events[1].allocation);
  EXPECT_EQ(window.events[1].allocation, window.events[2].allocation);
}

TEST_F(MemoryTrackerTest, RetagInWindowOfOlderAllocationShiftsTheStart) {
  at::Tensor old = bytes(2000);  // allocated before the window as an activation
  const std::int64_t live = tracker_->live_bytes();
  const std::int64_t params = tracker_->live_bytes(Tag::parameter);
  const std::int64_t activations = tracker_->live_bytes(Tag::activation);
  const std::int64_t transient = transient_live(*tracker_);
  tracker_->begin_window();
  ASSERT_TRUE(tracker_->retag(old, Tag::parameter));
  at::Tensor c = bytes(100);
  old.reset();  // freed in the window, under its final tag
  const MemoryWindow window = tracker_->end_window();
  EXPECT_EQ(window.start_live_bytes, live);
  EXPECT_EQ(window.start_live_by_tag[index(Tag::parameter)], params + 2000);
  EXPECT_EQ(window.start_live_by_tag[index(Tag::activation)], activations - 2000);
  EXPECT_EQ(std::accumulate(window.start_live_by_tag.begin(), window.start_live_by_tag.end(),
                            std::int64_t{0}),
            live);
  ASSERT_EQ(window.events.size(), 2u);
  EXPECT_EQ(window.events[1].bytes, -2000);
  EXPECT_EQ(window.events[1].tag, Tag::parameter);
  EXPECT_EQ(window.peak_bytes, live + 100);
  EXPECT_EQ(window.activation_peak_bytes, transient - 2000 + 100);
}

// ---------------------------------------------------------------------------------------------
// Windows: a constructed training step with known numbers

TEST_F(MemoryTrackerTest, TrainingStepPeaksPhasesAndSpans) {
  at::Tensor params;
  {
    TagGuard tag(Tag::parameter);
    params = bytes(4000);
  }
  const std::int64_t live = tracker_->live_bytes();
  const std::int64_t transient = transient_live(*tracker_);
  EXPECT_EQ(PhaseGuard::current(), Phase::idle);
  tracker_->begin_window();
  at::Tensor act1, act2, grad, work, state;
  {
    PhaseGuard phase(Phase::forward);
    SpanGuard span("forward", "phase");
    {
      SpanGuard layer("layer1", "forward");
      act1 = bytes(1000);
    }
    act2 = bytes(2000);  // transient peak: 3000
  }
  {
    PhaseGuard phase(Phase::backward);
    SpanGuard span("backward", "phase");
    {
      TagGuard tag(Tag::gradient);
      grad = bytes(4000);  // total peak: 4000 + 1000 + 2000 + 4000
    }
    act2.reset();
    {
      TagGuard tag(Tag::workspace);
      work = bytes(1500);
    }
    act1.reset();
    work.reset();
  }
  {
    PhaseGuard phase(Phase::optimizer);
    EXPECT_EQ(PhaseGuard::current(), Phase::optimizer);
    TagGuard tag(Tag::optimizer_state);
    state = bytes(800);
  }
  EXPECT_EQ(PhaseGuard::current(), Phase::idle);
  const MemoryWindow window = tracker_->end_window();
  EXPECT_FALSE(tracker_->window_open());

  EXPECT_EQ(window.start_live_bytes, live);
  EXPECT_EQ(window.peak_bytes, live + 7000);
  EXPECT_EQ(window.activation_peak_bytes, transient + 3000);
  const std::vector<std::int64_t> sizes{1000, 2000, 4000, -2000, 1500, -1000, -1500, 800};
  const std::vector<Phase> phases{Phase::forward,  Phase::forward,  Phase::backward,
                                  Phase::backward, Phase::backward, Phase::backward,
                                  Phase::backward, Phase::optimizer};
  const std::vector<Tag> tags{Tag::activation, Tag::activation,     Tag::gradient,
                              Tag::activation, Tag::workspace,      Tag::activation,
                              Tag::workspace,  Tag::optimizer_state};
  ASSERT_EQ(window.events.size(), sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(window.events[i].bytes, sizes[i]);
    EXPECT_EQ(window.events[i].phase, phases[i]);
    EXPECT_EQ(window.events[i].tag, tags[i]);
    EXPECT_GE(window.events[i].time_ns, i == 0 ? 0 : window.events[i - 1].time_ns);
    EXPECT_LE(window.events[i].time_ns, window.duration_ns);
  }

  ASSERT_EQ(window.spans.size(), 3u);  // in order of their end
  const Span& layer = window.spans[0];
  const Span& forward = window.spans[1];
  const Span& backward = window.spans[2];
  EXPECT_EQ(layer.name, "layer1");
  EXPECT_EQ(layer.category, "forward");
  EXPECT_EQ(forward.name, "forward");
  EXPECT_EQ(forward.category, "phase");
  EXPECT_EQ(backward.name, "backward");
  EXPECT_LE(0, forward.begin_ns);
  EXPECT_LE(forward.begin_ns, layer.begin_ns);
  EXPECT_LE(layer.begin_ns, layer.end_ns);
  EXPECT_LE(layer.end_ns, forward.end_ns);
  EXPECT_LE(forward.end_ns, backward.begin_ns);
  EXPECT_LE(backward.end_ns, window.duration_ns);
  EXPECT_LE(window.events[0].time_ns, layer.end_ns);
  EXPECT_GE(window.events[0].time_ns, layer.begin_ns);
  EXPECT_NE(layer.thread, 0u);
  EXPECT_EQ(layer.thread, backward.thread);
}

TEST_F(MemoryTrackerTest, PeaksIncludeTheStartingInstant) {
  at::Tensor old = bytes(700);
  const std::int64_t live = tracker_->live_bytes();
  const std::int64_t transient = transient_live(*tracker_);
  tracker_->begin_window();
  old.reset();  // the window only frees
  const MemoryWindow window = tracker_->end_window();
  ASSERT_EQ(window.events.size(), 1u);
  EXPECT_EQ(window.peak_bytes, live);
  EXPECT_EQ(window.activation_peak_bytes, transient);
  EXPECT_EQ(tracker_->live_bytes(), live - 700);
}

TEST_F(MemoryTrackerTest, SpansOnOtherThreadsGetOtherIds) {
  tracker_->begin_window();
  { SpanGuard span("main", "test"); }
  std::thread([] { SpanGuard span("worker", "test"); }).join();
  const MemoryWindow window = tracker_->end_window();
  ASSERT_EQ(window.spans.size(), 2u);
  EXPECT_NE(window.spans[0].thread, window.spans[1].thread);
}

TEST_F(MemoryTrackerTest, NothingIsRecordedOutsideAWindow) {
  { SpanGuard span("outside", "test"); }
  EXPECT_EQ(tracker_->now_ns(), 0);
  tracker_->record_span(Span{"ignored", "test", 0, 1, 1});
  at::Tensor before = bytes(10);
  auto straddling = std::make_unique<SpanGuard>("straddling", "test");  // made without a window
  tracker_->begin_window();
  EXPECT_TRUE(tracker_->window_open());
  straddling.reset();
  before.reset();
  { SpanGuard span("inside", "test"); }
  const MemoryWindow window = tracker_->end_window();
  ASSERT_EQ(window.spans.size(), 1u);
  EXPECT_EQ(window.spans[0].name, "inside");
  ASSERT_EQ(window.events.size(), 1u);
  EXPECT_EQ(window.events[0].bytes, -10);
  { SpanGuard span("after", "test"); }
  at::Tensor after = bytes(10);
  tracker_->begin_window();
  EXPECT_TRUE(tracker_->end_window().events.empty());
}

TEST_F(MemoryTrackerTest, BeginWindowDiscardsAnOpenOne) {
  tracker_->begin_window();
  at::Tensor first = bytes(10);
  SpanGuard* open = new SpanGuard("open", "test");
  tracker_->begin_window();
  at::Tensor second = bytes(20);
  delete open;  // began in the discarded window: starts at 0 in this one
  const MemoryWindow window = tracker_->end_window();
  ASSERT_EQ(window.events.size(), 1u);
  EXPECT_EQ(window.events[0].bytes, 20);
  EXPECT_EQ(window.start_live_bytes, tracker_->live_bytes() - 20);
  ASSERT_EQ(window.spans.size(), 1u);
  EXPECT_EQ(window.spans[0].begin_ns, 0);
}

TEST_F(MemoryTrackerTest, EndWindowWithoutBeginThrows) {
  EXPECT_THROW(tracker_->end_window(), std::logic_error);
  tracker_->begin_window();
  EXPECT_NO_THROW(tracker_->end_window());
  EXPECT_THROW(tracker_->end_window(), std::logic_error);
}

TEST(MemoryTrackerNames, AreAsDocumented) {
  EXPECT_STREQ(tag_name(Tag::parameter), "parameter");
  EXPECT_STREQ(tag_name(Tag::gradient), "gradient");
  EXPECT_STREQ(tag_name(Tag::optimizer_state), "optimizer_state");
  EXPECT_STREQ(tag_name(Tag::activation), "activation");
  EXPECT_STREQ(tag_name(Tag::workspace), "workspace");
  EXPECT_STREQ(phase_name(Phase::idle), "idle");
  EXPECT_STREQ(phase_name(Phase::forward), "forward");
  EXPECT_STREQ(phase_name(Phase::backward), "backward");
  EXPECT_STREQ(phase_name(Phase::optimizer), "optimizer");
}

// In a fresh process (a death test re-runs the binary for this test alone), before install():
// guards do nothing harmful, and tensors from before install() are never counted.
TEST(MemoryTrackerFreshProcess, BeforeInstall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto check = [](bool ok, const char* what) {
          if (!ok) {
            std::fprintf(stderr, "failed: %s\n", what);
            std::exit(1);
          }
        };
        check(MemoryTracker::installed() == nullptr, "not installed");
        { SpanGuard span("nothing", "test"); }
        at::Tensor early = bytes(4096);
        MemoryTracker& tracker = MemoryTracker::install();
        check(MemoryTracker::installed() == &tracker, "installed");
        check(tracker.live_bytes() == 0, "nothing live at install");
        check(!tracker.retag(early, Tag::parameter), "retag of an early tensor");
        at::Tensor late = bytes(100);
        check(tracker.live_bytes() == 100, "late tensor counted");
        early.reset();
        check(tracker.live_bytes() == 100, "early free not counted");
        late.reset();
        check(tracker.live_bytes() == 0, "late free counted");
        check(tracker.peak_bytes() == 100, "peak");
        try {
          tracker.end_window();
          check(false, "end_window without a window throws");
        } catch (const std::logic_error&) {
        }
        std::fprintf(stderr, "all good\n");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "all good");
}

// ---------------------------------------------------------------------------------------------
// Chrome trace

TEST(ChromeTrace, WritesSpansAndStackedCounters) {
  MemoryWindow window;
  window.start_live_by_tag[index(Tag::parameter)] = 100;
  window.start_live_bytes = 100;
  window.duration_ns = 5000;
  window.events = {{1000, 50, 1, Tag::activation, Phase::forward},
                   {2000, 20, 2, Tag::gradient, Phase::backward},
                   {3000, -50, 1, Tag::activation, Phase::backward}};
  window.spans = {{"layer", "forward", 500, 1500, 1},
                  {"forward", "phase", 0, 1800, 1},
                  {"other", "backward", 1900, 4000, 2}};
  TempDir dir;
  const std::string path = dir.file("trace.json");
  write_chrome_trace(path, window, "bench");
  const nlohmann::json trace = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  std::vector<nlohmann::json> spans, counters;
  bool named = false;
  for (const auto& event : trace.at("traceEvents")) {
    const std::string ph = event.at("ph");
    if (ph == "X") spans.push_back(event);
    if (ph == "C") counters.push_back(event);
    if (ph == "M" && event.at("name") == "process_name") {
      named = event.at("args").at("name") == "bench";
    }
  }
  EXPECT_TRUE(named);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].at("name"), "layer");
  EXPECT_EQ(spans[0].at("cat"), "forward");
  EXPECT_DOUBLE_EQ(spans[0].at("ts").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(spans[0].at("dur").get<double>(), 1.0);
  EXPECT_EQ(spans[0].at("pid"), 1);
  EXPECT_EQ(spans[0].at("tid"), 1);
  EXPECT_EQ(spans[2].at("tid"), 2);

  // One at 0 with the start values, one per event, one holding the last value to the end.
  ASSERT_EQ(counters.size(), 5u);
  const std::vector<double> times{0.0, 1.0, 2.0, 3.0, 5.0};
  const std::vector<std::vector<std::int64_t>> live{{100, 0, 0, 0, 0},
                                                    {100, 0, 0, 50, 0},
                                                    {100, 20, 0, 50, 0},
                                                    {100, 20, 0, 0, 0},
                                                    {100, 20, 0, 0, 0}};
  for (std::size_t i = 0; i < counters.size(); ++i) {
    SCOPED_TRACE("counter " + std::to_string(i));
    EXPECT_EQ(counters[i].at("name"), "live bytes");
    EXPECT_DOUBLE_EQ(counters[i].at("ts").get<double>(), times[i]);
    const auto& args = counters[i].at("args");
    ASSERT_EQ(args.size(), kNumTags);
    for (std::size_t t = 0; t < kNumTags; ++t) {
      EXPECT_EQ(args.at(tag_name(static_cast<Tag>(t))).get<std::int64_t>(), live[i][t]);
    }
  }
}

TEST_F(MemoryTrackerTest, ChromeTraceOfARecordedWindow) {
  tracker_->begin_window();
  {
    SpanGuard span("step", "phase");
    at::Tensor t = bytes(300);
  }
  const MemoryWindow window = tracker_->end_window();
  TempDir dir;
  write_chrome_trace(dir.file("t.json"), window);
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir.file("t.json")));
  int spans = 0, counters = 0;
  for (const auto& event : trace.at("traceEvents")) {
    spans += event.at("ph") == "X";
    counters += event.at("ph") == "C";
  }
  EXPECT_EQ(spans, 1);
  EXPECT_EQ(counters, 4);
  EXPECT_EQ(dir.entries(), std::set<std::string>{"t.json"});
}

TEST(ChromeTrace, ThrowsWhenItCannotWriteNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("missing/dir/trace.json");
  testing::expect_says(testing::message_of<std::runtime_error>(
                           [&] { write_chrome_trace(path, MemoryWindow{}); }),
                       "cannot write '" + path + "'");
}

}  // namespace
}  // namespace engram::memory
