#include "memory/MemoryTracker.h"

#include "memory/detail/BlockSource.h"
#include "memory/detail/WindowReplay.h"

#include <c10/core/Allocator.h>
#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace engram::memory {
namespace {

/// Sits in front of every tracked allocation; 64 bytes so that the user data keeps c10's
/// alignment and the DataPtr's context can equal its data (which raw_deleter() requires).
struct alignas(64) Header {
  std::int64_t size = 0;  // bytes requested
  std::uint64_t id = 0;   // unique in the process
  Tag tag = Tag::activation;
  bool from_source = false;  // the block came from the BlockSource, which takes it back
};
constexpr std::size_t kHeaderBytes = sizeof(Header);
static_assert(kHeaderBytes == 64, "the header must not change the data's alignment");
static_assert(kHeaderBytes % c10::gAlignment == 0, "the header must keep c10's alignment");

Header* header_of(void* data) {
  return reinterpret_cast<Header*>(static_cast<char*>(data) - kHeaderBytes);
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

thread_local Tag t_tag = Tag::activation;
std::atomic<Phase> g_phase{Phase::idle};
std::atomic<std::uint64_t> g_next_thread{1};
std::atomic<MemoryTracker*> g_tracker{nullptr};
std::atomic<detail::BlockSource*> g_source{nullptr};

std::uint64_t thread_number() {
  thread_local const std::uint64_t number = g_next_thread.fetch_add(1);
  return number;
}

void tracked_delete(void* data);

}  // namespace

struct MemoryTracker::State {
  mutable std::mutex mutex;  // guards everything below except the atomics
  std::int64_t live = 0;
  std::array<std::int64_t, kNumTags> live_by_tag{};
  std::int64_t peak = 0;
  std::uint64_t next_id = 1;

  std::atomic<bool> window_open{false};
  std::atomic<std::int64_t> window_start_ns{0};  // steady clock
  // Allocations with an id below this one predate the window.
  std::uint64_t window_first_id = 0;
  std::int64_t window_start_live = 0;
  std::array<std::int64_t, kNumTags> window_start_by_tag{};
  std::vector<MemoryEvent> events;
  std::vector<Span> spans;
  detail::WindowRetags retags;

  // Both with `mutex` held.
  void record(std::int64_t bytes, const Header& header) {
    if (!window_open.load(std::memory_order_relaxed)) return;
    MemoryEvent event;
    event.time_ns = steady_ns() - window_start_ns.load(std::memory_order_relaxed);
    event.bytes = bytes;
    event.allocation = header.id;
    event.tag = header.tag;
    event.phase = g_phase.load(std::memory_order_relaxed);
    events.push_back(event);
  }
  void clear_window() {
    events.clear();
    spans.clear();
    retags.clear();
  }
};

/// Gives this file's allocator and guards the tracker's state.
struct TrackerAccess {
  static MemoryTracker::State& state(const MemoryTracker& tracker) { return *tracker.state_; }
  /// The installed tracker's state; only called by the allocator, which exists after install().
  static MemoryTracker::State& installed_state() {
    return *g_tracker.load(std::memory_order_relaxed)->state_;
  }
};

namespace {

void tracked_delete(void* data) {
  if (data == nullptr) return;
  Header* header = header_of(data);
  auto& state = TrackerAccess::installed_state();
  std::int64_t live = 0;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.live -= header->size;
    state.live_by_tag[static_cast<std::size_t>(header->tag)] -= header->size;
    live = state.live;
    state.record(-header->size, *header);
  }
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(data, -header->size, live, 0,
                                     c10::Device(c10::DeviceType::CPU));
  }
  if (header->from_source) {
    g_source.load(std::memory_order_acquire)->release(header);
  } else {
    c10::free_cpu(header);
  }
}

/// c10's default CPU allocator plus a header and the counting.
class TrackingAllocator final : public c10::Allocator {
 public:
  c10::DeleterFnPtr raw_deleter() const override { return &tracked_delete; }

  /// Copies between two blocks of this allocator (copy-on-write storages): plain CPU memory.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count > 0) std::memcpy(dest, src, count);
  }

  c10::DataPtr allocate(std::size_t nbytes) override {
    const c10::Device device(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &tracked_delete, device};
    TORCH_CHECK(
        nbytes <= static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()) - kHeaderBytes,
        "MemoryTracker: cannot allocate ", nbytes, " bytes");
    detail::BlockSource* source = g_source.load(std::memory_order_acquire);
    void* block = source != nullptr ? source->allocate(nbytes + kHeaderBytes) : nullptr;
    const bool from_source = block != nullptr;
    if (!from_source) block = c10::alloc_cpu(nbytes + kHeaderBytes);
    auto* header = new (block) Header();
    header->from_source = from_source;
    header->size = static_cast<std::int64_t>(nbytes);
    header->tag = TagGuard::current();
    void* data = static_cast<char*>(block) + kHeaderBytes;
    auto& state = TrackerAccess::installed_state();
    std::int64_t live = 0;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      header->id = state.next_id++;
      state.live += header->size;
      state.live_by_tag[static_cast<std::size_t>(header->tag)] += header->size;
      state.peak = std::max(state.peak, state.live);
      live = state.live;
      state.record(header->size, *header);
    }
    if (c10::memoryProfilingEnabled()) {
      c10::reportMemoryUsageToProfiler(data, header->size, live, 0, device);
    }
    return {data, data, &tracked_delete, device};
  }
};

}  // namespace

const char* tag_name(Tag tag) {
  switch (tag) {
    case Tag::parameter:
      return "parameter";
    case Tag::gradient:
      return "gradient";
    case Tag::optimizer_state:
      return "optimizer_state";
    case Tag::activation:
      return "activation";
    case Tag::workspace:
      return "workspace";
  }
  return "unknown";
}

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::idle:
      return "idle";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
  }
  return "unknown";
}

// -------------------------------------------------------------------------------------------------
// MemoryTracker

MemoryTracker::MemoryTracker() : state_(new State()) {}

MemoryTracker& MemoryTracker::install() {
  static MemoryTracker* const tracker = [] {
    auto* created = new MemoryTracker();
    g_tracker.store(created);  // before the allocator can be called
    // Never deleted: c10 keeps the pointer, and tensors may be freed during static destruction.
    static c10::Allocator* const allocator = new TrackingAllocator();
    c10::SetAllocator(c10::DeviceType::CPU, allocator, /*priority=*/255);
    return created;
  }();
  return *tracker;
}

MemoryTracker* MemoryTracker::installed() { return g_tracker.load(); }

void detail::set_block_source(BlockSource* source) {
  g_source.store(source, std::memory_order_release);
}

std::int64_t MemoryTracker::live_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->live;
}

std::int64_t MemoryTracker::live_bytes(Tag tag) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->live_by_tag[static_cast<std::size_t>(tag)];
}

std::int64_t MemoryTracker::peak_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->peak;
}

void MemoryTracker::reset_peak() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->peak = state_->live;
}

bool MemoryTracker::retag(const at::Tensor& tensor, Tag tag) {
  if (!tensor.defined() || !tensor.has_storage()) return false;
  const c10::DataPtr& data_ptr = tensor.storage().data_ptr();
  if (data_ptr.get_deleter() != &tracked_delete || data_ptr.get_context() == nullptr) return false;
  Header* header = header_of(data_ptr.get_context());
  State& state = *state_;
  std::lock_guard<std::mutex> lock(state.mutex);
  const Tag before = header->tag;
  if (before == tag) return true;
  state.live_by_tag[static_cast<std::size_t>(before)] -= header->size;
  state.live_by_tag[static_cast<std::size_t>(tag)] += header->size;
  header->tag = tag;
  if (state.window_open.load(std::memory_order_relaxed)) {
    detail::note_retag(state.retags, header->id, before, tag, header->size);
  }
  return true;
}

void MemoryTracker::begin_window() {
  if (installed() != this) throw std::logic_error("MemoryTracker: begin_window() before install()");
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->clear_window();
  state_->window_first_id = state_->next_id;
  state_->window_start_live = state_->live;
  state_->window_start_by_tag = state_->live_by_tag;
  state_->window_start_ns.store(steady_ns());
  state_->window_open.store(true);
}

MemoryWindow MemoryTracker::end_window() {
  MemoryWindow window;
  detail::WindowRetags retags;
  std::uint64_t first_id = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->window_open.load()) {
      throw std::logic_error("MemoryTracker: end_window() without begin_window()");
    }
    window.duration_ns = steady_ns() - state_->window_start_ns.load();
    state_->window_open.store(false);
    window.start_live_bytes = state_->window_start_live;
    window.start_live_by_tag = state_->window_start_by_tag;
    window.events = std::move(state_->events);
    window.spans = std::move(state_->spans);
    retags = std::move(state_->retags);
    first_id = state_->window_first_id;
    state_->clear_window();
  }
  detail::apply_retags(window, retags, first_id);
  detail::replay_peaks(window, [](std::size_t) {}, [] {});
  return window;
}

bool MemoryTracker::window_open() const { return state_->window_open.load(); }

void MemoryTracker::record_span(Span span) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->window_open.load(std::memory_order_relaxed)) return;
  state_->spans.push_back(std::move(span));
}

std::int64_t MemoryTracker::now_ns() const {
  if (!state_->window_open.load()) return 0;
  return steady_ns() - state_->window_start_ns.load();
}

// -------------------------------------------------------------------------------------------------
// Guards

TagGuard::TagGuard(Tag tag) : previous_(t_tag) { t_tag = tag; }
TagGuard::~TagGuard() { t_tag = previous_; }
Tag TagGuard::current() { return t_tag; }

PhaseGuard::PhaseGuard(Phase phase) : previous_(g_phase.exchange(phase)) {}
PhaseGuard::~PhaseGuard() { g_phase.store(previous_); }
Phase PhaseGuard::current() { return g_phase.load(); }

// begin_ns_ holds the steady clock when the span began (not window-relative), so that a span that
// outlives a discarded window is clipped to the window that sees its end.
namespace {

constexpr std::size_t kMaxSpanSinks = 16;
std::array<std::atomic<SpanSink*>, kMaxSpanSinks> g_span_sinks{};
std::atomic<std::size_t> g_span_sink_count{0};

/// Whether any registered sink has an open window.
bool sinks_recording() {
  const std::size_t n = g_span_sink_count.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    const SpanSink* sink = g_span_sinks[i].load(std::memory_order_acquire);
    if (sink != nullptr && sink->window_start_steady_ns() >= 0) return true;
  }
  return false;
}

}  // namespace

void add_span_sink(SpanSink* sink) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const std::size_t n = g_span_sink_count.load();
  if (n == kMaxSpanSinks) throw std::length_error("add_span_sink: at most 16 sinks");
  g_span_sinks[n].store(sink, std::memory_order_release);
  g_span_sink_count.store(n + 1, std::memory_order_release);
}

SpanGuard::SpanGuard(const char* name, const char* category) : name_(name), category_(category) {
  MemoryTracker* tracker = g_tracker.load(std::memory_order_relaxed);
  if ((tracker != nullptr && tracker->window_open()) || sinks_recording()) begin_ns_ = steady_ns();}

SpanGuard::~SpanGuard() {
  if (begin_ns_ < 0) return;
  const std::int64_t end = steady_ns();
  auto span_since = [&](std::int64_t start) {
    Span span;
    span.name = name_;
    span.category = category_;
    span.end_ns = end - start;
    span.begin_ns = std::clamp<std::int64_t>(begin_ns_ - start, 0, span.end_ns);
    span.thread = thread_number();
    return span;
  };
  MemoryTracker* tracker = g_tracker.load(std::memory_order_relaxed);
  if (tracker != nullptr && tracker->window_open())
    tracker->record_span(span_since(TrackerAccess::state(*tracker).window_start_ns.load()));
  const std::size_t n = g_span_sink_count.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    SpanSink* sink = g_span_sinks[i].load(std::memory_order_acquire);
    if (sink == nullptr) continue;
    const std::int64_t start = sink->window_start_steady_ns();
    if (start >= 0) sink->record_span(span_since(start));
  }
}

}  // namespace engram::memory
