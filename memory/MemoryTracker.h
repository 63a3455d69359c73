#pragma once
/// \file
/// Exact CPU memory accounting (docs/ARCHITECTURE.md): a c10 allocator, installed for the CPU
/// device through c10::SetAllocator, that counts live and peak bytes, tags every allocation with
/// what it holds, and records a timeline of allocations, frees and named spans while a window is
/// open. Every memory figure Engram reports on CPU comes from here.
///
/// \code
///   auto& tracker = engram::memory::MemoryTracker::install();  // once per process, idempotent
///   {
///     engram::memory::TagGuard tag(engram::memory::Tag::parameter);
///     model = build_model();                       // its tensors are tagged `parameter`
///   }
///   tracker.begin_window();                        // one training step
///   {
///     engram::memory::PhaseGuard phase(engram::memory::Phase::forward);
///     engram::memory::SpanGuard span("forward", "phase");
///     loss = model->forward(x);
///   }
///   ...
///   engram::memory::MemoryWindow w = tracker.end_window();
///   w.peak_bytes;  w.activation_peak_bytes;  w.events;  w.spans;
/// \endcode
///
/// Definitions used everywhere in Engram:
///   peak_bytes             the maximum of live bytes during the window (a training step);
///   activation_peak_bytes  the maximum over the window of live bytes minus the parameter,
///                          gradient and optimizer-state bytes live at that same instant.
/// Both are computed when the window ends, from its events and the allocations' *final* tags, so
/// a retag() during the window (say, of a gradient that autograd allocated as a temporary and
/// then kept) counts from the allocation's first byte.
///
/// Tags come from the allocating thread's innermost TagGuard (default: activation; so memory that
/// an intra-op worker thread allocates is an activation unless retagged). Phases are
/// process-wide (the training step sets them). Only memory that goes through c10's CPU allocator
/// is counted: every ATen CPU tensor; not BLAS-internal buffers or std::vector.

#include <ATen/core/Tensor.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace engram::memory {

/// What an allocation holds.
enum class Tag : std::uint8_t { parameter, gradient, optimizer_state, activation, workspace };
inline constexpr std::size_t kNumTags = 5;
/// "parameter", "gradient", "optimizer_state", "activation", "workspace".
const char* tag_name(Tag tag);

/// Where in a training step the process is.
enum class Phase : std::uint8_t { idle, forward, backward, optimizer };
/// "idle", "forward", "backward", "optimizer".
const char* phase_name(Phase phase);

/// One allocation (bytes > 0) or free (bytes < 0) inside a window.
struct MemoryEvent {
  std::int64_t time_ns = 0;      ///< since the window began
  std::int64_t bytes = 0;        ///< + allocated, - freed
  std::uint64_t allocation = 0;  ///< id of the allocation, unique in the process
  Tag tag = Tag::activation;     ///< the allocation's final tag (after retags)
  Phase phase = Phase::idle;     ///< the process phase when the event happened
};

/// A named interval inside a window (a layer's forward, a phase...), nested spans allowed.
struct Span {
  std::string name;
  std::string category;                   ///< e.g. "phase", "forward", "backward", "weight_grad"
  std::int64_t begin_ns = 0, end_ns = 0;  ///< since the window began
  std::uint64_t thread = 0;               ///< small id of the recording thread
};

/// What end_window() returns.
struct MemoryWindow {
  std::int64_t start_live_bytes = 0;                       ///< live bytes when the window began
  std::array<std::int64_t, kNumTags> start_live_by_tag{};  ///< the same, per tag (final tags)
  std::int64_t peak_bytes = 0;                             ///< see the file comment
  std::int64_t activation_peak_bytes = 0;                  ///< see the file comment
  std::int64_t duration_ns = 0;
  std::vector<MemoryEvent> events;  ///< in time order
  std::vector<Span> spans;          ///< in order of their end
};

class MemoryTracker {
 public:
  /// Installs the tracking allocator for the CPU device (first call) and returns it. Tensors
  /// allocated before the first call are not counted (their frees are not either).
  static MemoryTracker& install();
  /// The installed tracker, or nullptr.
  static MemoryTracker* installed();

  /// Bytes allocated through the tracker and not yet freed, in all or with one tag.
  std::int64_t live_bytes() const;
  std::int64_t live_bytes(Tag tag) const;
  /// Maximum of live_bytes() since install() or the last reset_peak().
  std::int64_t peak_bytes() const;
  void reset_peak();

  /// Re-tags the allocation behind `tensor`'s storage; returns false (and does nothing) for an
  /// undefined tensor, a zero-byte storage (it holds no allocation) or storage the tracker did
  /// not allocate (from before install(), from_blob...). Inside a window, the new tag applies to
  /// the allocation's whole life (see the file comment).
  bool retag(const at::Tensor& tensor, Tag tag);

  /// Starts recording events and spans (a window already open is discarded).
  void begin_window();
  /// Stops recording and returns the window's figures and timeline. Throws std::logic_error
  /// when no window is open.
  MemoryWindow end_window();
  bool window_open() const;

  /// Used by SpanGuard.
  void record_span(Span span);
  /// Nanoseconds since the open window began (0 without one).
  std::int64_t now_ns() const;

  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

 private:
  MemoryTracker();
  struct State;
  State* state_;  // never freed: allocations may outlive every other static
  friend struct TrackerAccess;
};

/// Sets the calling thread's allocation tag for its scope.
class TagGuard {
 public:
  explicit TagGuard(Tag tag);
  ~TagGuard();
  TagGuard(const TagGuard&) = delete;
  TagGuard& operator=(const TagGuard&) = delete;
  /// The calling thread's current tag.
  static Tag current();

 private:
  Tag previous_;
};

/// Sets the process-wide phase for its scope.
class PhaseGuard {
 public:
  explicit PhaseGuard(Phase phase);
  ~PhaseGuard();
  PhaseGuard(const PhaseGuard&) = delete;
  PhaseGuard& operator=(const PhaseGuard&) = delete;
  static Phase current();

 private:
  Phase previous_;
};

/// Records a span into the installed tracker's open window, if any; costs a branch otherwise.
/// The span is recorded only if a window was open both when the guard was made and when it ends
/// (a span that outlives a discarded window starts at 0 in the new one). `name` and `category`
/// are kept as pointers: pass string literals, or strings that outlive the guard.
/// Another tracker whose windows SpanGuard's spans also go to (memory/CudaMemoryTracker.h registers
/// each device tracker), so that a device's window carries the step's phases as the CPU's does.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  /// The steady clock's nanoseconds (std::chrono::steady_clock) at which the sink's open window
  /// began; -1 without an open window.
  virtual std::int64_t window_start_steady_ns() const = 0;
  /// Records `span` (times relative to that start) into the open window, if one is still open.
  virtual void record_span(Span span) = 0;
};

/// Registers `sink` for the rest of the process (it must live as long); at most 16 sinks.
/// Throws std::length_error beyond that.
void add_span_sink(SpanSink* sink);

/// Records a span into the CPU tracker's open window and every registered sink's open window.
class SpanGuard {
 public:
  SpanGuard(const char* name, const char* category);
  ~SpanGuard();
  SpanGuard(const SpanGuard&) = delete;
  SpanGuard& operator=(const SpanGuard&) = delete;

 private:
  const char* name_;
  const char* category_;
  std::int64_t begin_ns_ = -1;
};

/// Writes a window as a Chrome trace (chrome://tracing, Perfetto): spans as complete events
/// and a "live bytes" counter stacked by tag, atomically (common/AtomicFile.h). Throws
/// std::runtime_error when the file cannot be written.
void write_chrome_trace(const std::string& path, const MemoryWindow& window,
                        const std::string& process_name = "engram");

}  // namespace engram::memory
