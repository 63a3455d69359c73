#pragma once
/// \file
/// CUDA memory accounting: the figures of MemoryTracker (live and peak bytes by Tag, windows with
/// their events, per-tag start figures, peak and activation peak, phases, spans) for the memory
/// of one CUDA device, observed on LibTorch's CUDA caching allocator through its trace hook
/// (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker), plus the allocator's reserved
/// bytes (its cudaMalloc'd segments) and the fragmentation at the live peak.
///
/// \code
///   auto& gpu = engram::memory::CudaMemoryTracker::install(0);  // before the first CUDA tensor
///   {
///     engram::memory::TagGuard tag(engram::memory::Tag::parameter);
///     model->to(torch::kCUDA);                     // its CUDA tensors are tagged `parameter`
///   }
///   gpu.begin_window();
///   ... one training step, under PhaseGuards ...
///   engram::memory::DeviceMemoryWindow w = gpu.end_window();
///   w.peak_bytes;  w.activation_peak_bytes;  w.reserved_at_peak_bytes;  w.fragmentation_bytes;
/// \endcode
///
/// Three layers, each testable without a GPU:
///   MemoryLedger       allocator-agnostic accounting: alloc(key, bytes, tag), free(key),
///                      retag(key, tag), reserve(±bytes); windows; no locking of its own.
///   CudaMemoryTracker  one device: turns allocator events (CudaAllocatorEvent, the hook's plain
///                      fields) into ledger calls, under its own mutex. The trace gives each
///                      allocation's *requested* size; the tracker recovers the allocator's
///                      *block* size (what torch.cuda.memory_allocated() and
///                      getDeviceStats().allocated_bytes count) from a model of the allocator's
///                      segments and blocks, fed by the same events (see CudaAllocatorModel).
///   the hook           one process-wide callback, attached once by the first install(), that
///                      converts each c10 TraceEntry and hands it to dispatch(), which forwards it
///                      to the installed tracker of the entry's device, if any.
///
/// Definitions (as MemoryTracker's, for the device):
///   live bytes      block bytes of allocations made since install() and not yet freed; a free
///                   counts when it is requested (FREE_REQUESTED), as torch's allocated_bytes
///                   stat does, not when the allocator can reuse the block (FREE_COMPLETED);
///   reserved bytes  bytes of the allocator's segments allocated (or mapped, with expandable
///                   segments) since install() and not yet released; torch.cuda.memory_reserved()
///                   where install() came before the first CUDA allocation;
///   fragmentation   reserved minus live bytes at the live peak: what the allocator held but
///                   did not hand out when memory use was highest.
/// Tags come from the allocating thread's innermost TagGuard, phases from PhaseGuard, as on CPU.
/// Allocations and segments from before install() are not counted, nor their frees; install()
/// before the first CUDA allocation for figures that match torch's.
///
/// SpanGuard's spans go into an installed tracker's open window as into the CPU tracker's (the
/// tracker registers itself as a SpanSink); record_span() takes others. write_chrome_trace()
/// (MemoryTracker.h) takes a DeviceMemoryWindow as it is a MemoryWindow (live bytes by tag; the
/// reserved figures are not drawn). A window closes as the CPU tracker's does
/// (memory/detail/WindowReplay.h), with the reserved bytes replayed beside the live ones.
///
/// This header includes no CUDA header (torch's only through MemoryTracker.h, for the shared
/// types); the .cpp includes c10's CUDA headers.

#include "memory/MemoryTracker.h"
#include "memory/detail/WindowReplay.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace engram::memory {

/// A change of reserved bytes inside a window.
struct ReservedEvent {
  std::int64_t time_ns = 0;  ///< since the window began
  std::int64_t bytes = 0;    ///< + segment allocated or mapped, - released or unmapped
  /// How many of the window's MemoryEvents happened before it: orders the two timelines exactly.
  std::size_t after_events = 0;
};

/// What a device tracker's end_window() returns: MemoryWindow's figures, plus reserved memory.
struct DeviceMemoryWindow : MemoryWindow {
  std::int64_t start_reserved_bytes = 0;  ///< reserved bytes when the window began
  /// Reserved bytes at the first instant of the window at which live bytes reached peak_bytes
  /// (the window's start where they never exceeded start_live_bytes).
  std::int64_t reserved_at_peak_bytes = 0;
  std::int64_t reserved_peak_bytes = 0;  ///< maximum of reserved bytes during the window
  /// reserved_at_peak_bytes - peak_bytes: memory held by the allocator but not handed out at the
  /// live peak (cached free blocks, the unused tails of segments).
  std::int64_t fragmentation_bytes = 0;
  std::vector<ReservedEvent> reserved_events;  ///< in time order
};

/// Allocator-agnostic accounting of keyed allocations (a key is an address or any other id that
/// is unique among the live allocations) and of reserved bytes, with MemoryTracker's windows.
/// Not thread-safe: its owner serialises the calls. Time is the steady clock; the phase of each
/// event is PhaseGuard::current() when it is recorded.
class MemoryLedger {
 public:
  /// Counts an allocation of `bytes` (> 0) under `key`. A key that is still live (its free was
  /// missed) is freed first.
  void alloc(std::uint64_t key, std::int64_t bytes, Tag tag);
  /// Uncounts the allocation under `key`; returns false (and does nothing) for an unknown key.
  bool free(std::uint64_t key);
  /// Re-tags the live allocation under `key` (for a window, from its first byte, as
  /// MemoryTracker::retag); returns false for an unknown key.
  bool retag(std::uint64_t key, Tag tag);
  /// The bytes of the live allocation under `key`, or -1.
  std::int64_t bytes_of(std::uint64_t key) const;
  /// Reserved bytes change by `bytes` (+ segment allocated or mapped, - released or unmapped).
  void reserve(std::int64_t bytes);

  std::int64_t live_bytes() const { return live_; }
  std::int64_t live_bytes(Tag tag) const { return live_by_tag_[static_cast<std::size_t>(tag)]; }
  /// Maximum of live_bytes() since construction or the last reset_peak().
  std::int64_t peak_bytes() const { return peak_; }
  std::int64_t reserved_bytes() const { return reserved_; }
  /// Maximum of reserved_bytes() since construction or the last reset_peak().
  std::int64_t reserved_peak_bytes() const { return reserved_peak_; }
  void reset_peak();

  /// As MemoryTracker's: a window already open is discarded; end_window() throws
  /// std::logic_error without an open window.
  void begin_window();
  DeviceMemoryWindow end_window();
  bool window_open() const { return window_open_; }
  void record_span(Span span);
  /// Nanoseconds since the open window began (0 without one).
  std::int64_t now_ns() const;

 private:
  struct Allocation {
    std::uint64_t id = 0;
    std::int64_t bytes = 0;
    Tag tag = Tag::activation;
  };
  /// A closed window before its replay: end_window() is close_window() (cheap, done under the
  /// owner's lock) then replay() (the rest, which CudaMemoryTracker runs without its lock).
  struct ClosedWindow {
    DeviceMemoryWindow window;
    detail::WindowRetags retags;
    std::uint64_t first_id = 0;
  };
  ClosedWindow close_window();
  static DeviceMemoryWindow replay(ClosedWindow closed);
  friend class CudaMemoryTracker;

  void record(std::int64_t bytes, const Allocation& allocation);
  void clear_window();

  std::unordered_map<std::uint64_t, Allocation> live_allocations_;
  std::int64_t live_ = 0;
  std::array<std::int64_t, kNumTags> live_by_tag_{};
  std::int64_t peak_ = 0;
  std::int64_t reserved_ = 0;
  std::int64_t reserved_peak_ = 0;

  bool window_open_ = false;
  std::int64_t window_start_ns_ = 0;
  std::uint64_t window_first_id_ = 0;  // allocations with a smaller id predate the window
  std::int64_t window_start_live_ = 0;
  std::array<std::int64_t, kNumTags> window_start_by_tag_{};
  std::int64_t window_start_reserved_ = 0;
  std::vector<MemoryEvent> events_;
  std::vector<ReservedEvent> reserved_events_;
  std::vector<Span> spans_;
  detail::WindowRetags retags_;
};

/// The allocator actions the tracker reads (c10's TraceEntry::Action, less SNAPSHOT and OOM,
/// which arrive as `other` and are ignored).
enum class CudaAllocatorAction : std::uint8_t {
  alloc,           ///< a block handed out: addr, size = the *requested* bytes
  free_requested,  ///< the caller freed it: live bytes drop here
  free_completed,  ///< the allocator can reuse it (after the streams that used it are done)
  segment_alloc,   ///< cudaMalloc of a segment: addr, size = segment bytes
  segment_free,    ///< cudaFree of a segment
  segment_map,     ///< expandable segments: pages mapped at addr
  segment_unmap,   ///< expandable segments: pages unmapped
  other,
};

/// One allocator event in plain fields: what the hook hands to CudaMemoryTracker::dispatch(), and
/// what tests feed to on_event() or dispatch().
struct CudaAllocatorEvent {
  CudaAllocatorAction action = CudaAllocatorAction::other;
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  int device = 0;
};

/// The caching allocator's rules that decide a block's size from a request (its round_size and
/// should_split, c10/cuda/CUDACachingAllocator.cpp, torch 2.11) and the settings they read from
/// PYTORCH_CUDA_ALLOC_CONF. The defaults are torch's defaults; install() reads the process's.
struct CudaAllocatorModel {
  /// max_split_size_mb: blocks of at least this many bytes are never split.
  std::uint64_t max_split_bytes = std::numeric_limits<std::uint64_t>::max();
  /// expandable_segments:True: blocks split whenever at least 512 bytes remain.
  bool expandable_segments = false;
  /// roundup_power2_divisions, by floor(log2(size)): 0 or 1 rounds sizes to 512 bytes.
  std::array<std::uint32_t, 64> roundup_divisions{};

  /// The allocator's round_size(): 512 at least, then multiples of 512 or power-of-2 divisions.
  std::uint64_t round_size(std::uint64_t requested) const;
  /// The allocator's should_split(): whether a free block of `block` bytes that serves a
  /// request rounded to `rounded` bytes is split (the rest stays free) or handed out whole.
  bool should_split(std::uint64_t block, std::uint64_t rounded) const;
};

/// The live, peak and reserved bytes of one CUDA device's caching allocator (file comment). An
/// installed tracker is a SpanSink: SpanGuard's spans (the step's phases) go into its windows.
class CudaMemoryTracker : public SpanSink {
 public:
  /// The installed tracker of device `device_index` (created by the first call for that device)
  /// with the process's allocator settings. The first call in the process attaches the allocator
  /// hook, once, if a CUDA device is visible: the caching allocator only takes hooks once it is
  /// initialised, so this initialises torch's CUDA state (at::globalContext().lazyInitDevice),
  /// as the first CUDA tensor would. Without a visible device (no GPU, no driver) nothing is
  /// initialised or attached, the call succeeds, and the tracker counts only what dispatch() is
  /// given. Nor is anything attached when the allocator backend takes no hooks
  /// (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync). hooked() says which.
  static CudaMemoryTracker& install(int device_index = 0);
  /// The installed tracker of `device_index`, or nullptr.
  static CudaMemoryTracker* installed(int device_index = 0);
  /// Whether the allocator hook is attached (see install()).
  static bool hooked();
  /// Why the hook is or is not attached, in words ("attached", "not attached: no CUDA device is
  /// visible", the error that attaching raised...).
  static std::string hook_status();
  /// The hook's entry point: hands `event` to the installed tracker of event.device, if any.
  /// Called with the allocator's lock held; takes the tracker's mutex, never calls into torch.
  static void dispatch(const CudaAllocatorEvent& event);

  /// A tracker of `device_index` that no hook feeds: it counts what on_event() is given (tests,
  /// replays of recorded traces).
  explicit CudaMemoryTracker(int device_index, CudaAllocatorModel model = {});
  ~CudaMemoryTracker();
  CudaMemoryTracker(const CudaMemoryTracker&) = delete;
  CudaMemoryTracker& operator=(const CudaMemoryTracker&) = delete;

  /// Counts one allocator event; events of other devices are ignored. An alloc is tagged with
  /// the calling thread's TagGuard::current(); a free of an unknown address is ignored.
  void on_event(const CudaAllocatorEvent& event);

  int device_index() const { return device_; }
  std::int64_t live_bytes() const;
  std::int64_t live_bytes(Tag tag) const;
  /// Maximum of live_bytes() since install() or the last reset_peak().
  std::int64_t peak_bytes() const;
  std::int64_t reserved_bytes() const;
  /// Maximum of reserved_bytes() since install() or the last reset_peak().
  std::int64_t reserved_peak_bytes() const;
  /// Resets both peaks to the current figures.
  void reset_peak();
  /// Allocations whose block size was not found in the model of the allocator's blocks (they
  /// were served from a segment allocated before install()); they count their rounded size.
  std::int64_t unmodelled_allocations() const;

  /// Re-tags the allocation behind `tensor`'s storage (looked up by its data pointer); false for
  /// an undefined tensor, one not on this tracker's device, a zero-byte storage or memory the
  /// tracker did not see allocated.
  bool retag(const at::Tensor& tensor, Tag tag);
  /// The same by the allocation's address.
  bool retag(std::uint64_t addr, Tag tag);

  /// As MemoryTracker's windows, plus the reserved figures of DeviceMemoryWindow.
  void begin_window();
  DeviceMemoryWindow end_window();
  bool window_open() const;
  void record_span(Span span) override;
  /// SpanSink: when the open window began on the steady clock, or -1.
  std::int64_t window_start_steady_ns() const override;
  std::int64_t now_ns() const;

 private:
  struct Block {
    std::uint64_t bytes = 0;
    std::uint64_t segment = 0;
    bool allocated = false;
  };
  std::uint64_t block_bytes_for(std::uint64_t addr, std::uint64_t requested);
  // The model of the allocator's blocks; all with mutex_ held.
  void split_at(std::uint64_t addr);
  void merge_free(std::uint64_t addr);
  void add_free_range(std::uint64_t addr, std::uint64_t bytes);
  bool remove_range(std::uint64_t addr, std::uint64_t bytes);

  const int device_;
  const CudaAllocatorModel model_;
  mutable std::mutex mutex_;  // guards everything below
  MemoryLedger ledger_;
  // The model of the allocator's blocks: every block of every segment seen since construction,
  // by address, and whether each segment is expandable (its mapped ranges merge).
  std::map<std::uint64_t, Block> blocks_;
  std::unordered_map<std::uint64_t, bool> segment_expandable_;
  std::uint64_t next_segment_ = 1;
  std::int64_t unmodelled_ = 0;
};

}  // namespace engram::memory
