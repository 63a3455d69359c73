#include "memory/CudaMemoryTracker.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDAAllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

namespace engram::memory {
namespace {

// The caching allocator's constants (c10/cuda/CUDACachingAllocator.cpp).
constexpr std::uint64_t kMinBlockSize = 512;   // every size is rounded to a multiple of this
constexpr std::uint64_t kSmallSize = 1048576;  // the largest request of the small pool

// c10::DeviceIndex is an int8_t: device indices are below 128.
constexpr int kMaxDevices = 128;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr std::size_t index_of(Tag tag) { return static_cast<std::size_t>(tag); }

/// Ids of ledger allocations, unique in the process (as MemoryEvent::allocation promises).
std::atomic<std::uint64_t> g_next_id{1};

/// floor(log2(x)) for x > 0.
int floor_log2(std::uint64_t x) { return 63 - __builtin_clzll(x); }

std::array<std::atomic<CudaMemoryTracker*>, kMaxDevices> g_trackers{};
std::atomic<bool> g_hooked{false};
std::mutex g_install_mutex;  // install(): creating trackers and attaching the hook
std::string g_hook_status = "not attached: install() was not called";  // under g_install_mutex

CudaAllocatorAction action_of(c10::CachingDeviceAllocator::TraceEntry::Action action) {
  using Action = c10::CachingDeviceAllocator::TraceEntry::Action;
  switch (action) {
    case Action::ALLOC:
      return CudaAllocatorAction::alloc;
    case Action::FREE_REQUESTED:
      return CudaAllocatorAction::free_requested;
    case Action::FREE_COMPLETED:
      return CudaAllocatorAction::free_completed;
    case Action::SEGMENT_ALLOC:
      return CudaAllocatorAction::segment_alloc;
    case Action::SEGMENT_FREE:
      return CudaAllocatorAction::segment_free;
    case Action::SEGMENT_MAP:
      return CudaAllocatorAction::segment_map;
    case Action::SEGMENT_UNMAP:
      return CudaAllocatorAction::segment_unmap;
    default:
      return CudaAllocatorAction::other;
  }
}

/// The hook: called by the caching allocator, its lock held, for every traced action.
void forward_trace_entry(const c10::CachingDeviceAllocator::TraceEntry& entry) {
  CudaAllocatorEvent event;
  event.action = action_of(entry.action_);
  if (event.action == CudaAllocatorAction::other) return;
  event.addr = static_cast<std::uint64_t>(entry.addr_);
  event.size = static_cast<std::uint64_t>(entry.size_);
  event.device = static_cast<int>(entry.device_);
  CudaMemoryTracker::dispatch(event);
}

/// The process's allocator settings (PYTORCH_CUDA_ALLOC_CONF), as the allocator reads them. Reads
/// configuration only: initialises no CUDA state.
CudaAllocatorModel model_from_torch() {
  using Config = c10::CachingAllocator::AcceleratorAllocatorConfig;
  CudaAllocatorModel model;
  model.max_split_bytes = static_cast<std::uint64_t>(Config::max_split_size());
  model.expandable_segments =
      c10::cuda::CUDACachingAllocator::CUDAAllocatorConfig::expandable_segments();
  // The allocator looks the divisions up by floor(log2(size)).
  for (std::size_t k = 0; k < model.roundup_divisions.size(); ++k) {
    model.roundup_divisions[k] =
        static_cast<std::uint32_t>(Config::roundup_power2_divisions(std::size_t{1} << k));
  }
  return model;
}

/// Attaches the hook, once per process, where a CUDA device is visible; with g_install_mutex held.
void attach_hook_once() {
  static bool tried = false;
  if (tried) return;
  tried = true;
  try {
    // device_count() asks the driver how many devices there are, without a context; 0 without a
    // driver or a device.
    if (c10::cuda::device_count() <= 0) {
      g_hook_status = "not attached: no CUDA device is visible";
      return;
    }
    // The native allocator attaches hooks to its per-device allocators, which exist only once it
    // is initialised (torch's lazy CUDA initialisation); before that, attaching does nothing.
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(&forward_trace_entry);
    g_hooked.store(true);
    g_hook_status = "attached";
  } catch (const std::exception& e) {
    // A backend that takes no hooks (cudaMallocAsync) or a CUDA initialisation that failed.
    g_hook_status = std::string("not attached: ") + e.what();
    const auto line = g_hook_status.find('\n');
    if (line != std::string::npos) g_hook_status.resize(line);
  }
}

}  // namespace

// -------------------------------------------------------------------------------------------------
// MemoryLedger

void MemoryLedger::record(std::int64_t bytes, const Allocation& allocation) {
  if (!window_open_) return;
  MemoryEvent event;
  event.time_ns = steady_ns() - window_start_ns_;
  event.bytes = bytes;
  event.allocation = allocation.id;
  event.tag = allocation.tag;
  event.phase = PhaseGuard::current();
  events_.push_back(event);
}

void MemoryLedger::alloc(std::uint64_t key, std::int64_t bytes, Tag tag) {
  if (bytes <= 0) return;
  if (live_allocations_.count(key) != 0) free(key);
  Allocation allocation;
  allocation.id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  allocation.bytes = bytes;
  allocation.tag = tag;
  live_allocations_.emplace(key, allocation);
  live_ += bytes;
  live_by_tag_[index_of(tag)] += bytes;
  peak_ = std::max(peak_, live_);
  record(bytes, allocation);
}

bool MemoryLedger::free(std::uint64_t key) {
  const auto found = live_allocations_.find(key);
  if (found == live_allocations_.end()) return false;
  const Allocation allocation = found->second;
  live_allocations_.erase(found);
  live_ -= allocation.bytes;
  live_by_tag_[index_of(allocation.tag)] -= allocation.bytes;
  record(-allocation.bytes, allocation);
  return true;
}

bool MemoryLedger::retag(std::uint64_t key, Tag tag) {
  const auto found = live_allocations_.find(key);
  if (found == live_allocations_.end()) return false;
  Allocation& allocation = found->second;
  const Tag before = allocation.tag;
  if (before == tag) return true;
  live_by_tag_[index_of(before)] -= allocation.bytes;
  live_by_tag_[index_of(tag)] += allocation.bytes;
  allocation.tag = tag;
  if (window_open_) {
    detail::note_retag(retags_, allocation.id, before, tag, allocation.bytes);
  }
  return true;
}

std::int64_t MemoryLedger::bytes_of(std::uint64_t key) const {
  const auto found = live_allocations_.find(key);
  return found == live_allocations_.end() ? -1 : found->second.bytes;
}

void MemoryLedger::reserve(std::int64_t bytes) {
  if (bytes == 0) return;
  reserved_ += bytes;
  reserved_peak_ = std::max(reserved_peak_, reserved_);
  if (!window_open_) return;
  ReservedEvent event;
  event.time_ns = steady_ns() - window_start_ns_;
  event.bytes = bytes;
  event.after_events = events_.size();
  reserved_events_.push_back(event);
}

void MemoryLedger::reset_peak() {
  peak_ = live_;
  reserved_peak_ = reserved_;
}

void MemoryLedger::clear_window() {
  events_.clear();
  reserved_events_.clear();
  spans_.clear();
  retags_.clear();
}

void MemoryLedger::begin_window() {
  clear_window();
  window_first_id_ = g_next_id.load();
  window_start_live_ = live_;
  window_start_by_tag_ = live_by_tag_;
  window_start_reserved_ = reserved_;
  window_start_ns_ = steady_ns();
  window_open_ = true;
}

MemoryLedger::ClosedWindow MemoryLedger::close_window() {
  if (!window_open_) throw std::logic_error("end_window() without begin_window()");
  ClosedWindow closed;
  DeviceMemoryWindow& window = closed.window;
  window.duration_ns = steady_ns() - window_start_ns_;
  window_open_ = false;
  window.start_live_bytes = window_start_live_;
  window.start_live_by_tag = window_start_by_tag_;
  window.start_reserved_bytes = window_start_reserved_;
  window.events = std::move(events_);
  window.reserved_events = std::move(reserved_events_);
  window.spans = std::move(spans_);
  closed.retags = std::move(retags_);
  closed.first_id = window_first_id_;
  clear_window();
  return closed;
}

DeviceMemoryWindow MemoryLedger::end_window() { return replay(close_window()); }

DeviceMemoryWindow MemoryLedger::replay(ClosedWindow closed) {
  DeviceMemoryWindow window = std::move(closed.window);
  detail::apply_retags(window, closed.retags, closed.first_id);
  // Both timelines, live and reserved: a reserved event with after_events == i happened between
  // live events i - 1 and i.
  std::int64_t reserved = window.start_reserved_bytes;
  window.reserved_at_peak_bytes = reserved;
  window.reserved_peak_bytes = reserved;
  std::size_t next_reserved = 0;
  const auto apply_reserved_until = [&](std::size_t events_before) {
    while (next_reserved < window.reserved_events.size() &&
           window.reserved_events[next_reserved].after_events <= events_before) {
      reserved += window.reserved_events[next_reserved++].bytes;
      window.reserved_peak_bytes = std::max(window.reserved_peak_bytes, reserved);
    }
  };
  detail::replay_peaks(window, apply_reserved_until,
                       [&] { window.reserved_at_peak_bytes = reserved; });
  window.fragmentation_bytes = window.reserved_at_peak_bytes - window.peak_bytes;
  return window;
}

void MemoryLedger::record_span(Span span) {
  if (window_open_) spans_.push_back(std::move(span));
}

std::int64_t MemoryLedger::now_ns() const {
  return window_open_ ? steady_ns() - window_start_ns_ : 0;
}

// -------------------------------------------------------------------------------------------------
// CudaAllocatorModel

std::uint64_t CudaAllocatorModel::round_size(std::uint64_t requested) const {
  if (requested < kMinBlockSize) return kMinBlockSize;
  const std::uint64_t divisions =
      roundup_divisions[static_cast<std::size_t>(floor_log2(requested))];
  if (divisions > 1 && requested > kMinBlockSize * divisions) {
    // roundup_power2_next_division(): the next of `divisions` equal steps between two powers of 2.
    if ((requested & (requested - 1)) == 0) return requested;
    const std::uint64_t power2_floor = std::uint64_t{1} << floor_log2(requested);
    const std::uint64_t step = power2_floor >> floor_log2(divisions);
    if (step == 0) return power2_floor << 1;
    const std::uint64_t floor = requested & ~(step - 1);
    return floor == requested ? requested : floor + step;
  }
  return kMinBlockSize * ((requested + kMinBlockSize - 1) / kMinBlockSize);
}

bool CudaAllocatorModel::should_split(std::uint64_t block, std::uint64_t rounded) const {
  const std::uint64_t remaining = block - rounded;
  // The pool of a block is the pool of the requests it serves: small for rounded sizes <= 1 MiB.
  if (rounded <= kSmallSize || expandable_segments) return remaining >= kMinBlockSize;
  return rounded < max_split_bytes && remaining > kSmallSize;
}

// -------------------------------------------------------------------------------------------------
// CudaMemoryTracker

CudaMemoryTracker::CudaMemoryTracker(int device_index, CudaAllocatorModel model)
    : device_(device_index), model_(model) {}

CudaMemoryTracker::~CudaMemoryTracker() = default;

CudaMemoryTracker& CudaMemoryTracker::install(int device_index) {
  if (device_index < 0 || device_index >= kMaxDevices) {
    throw std::invalid_argument("CudaMemoryTracker: no CUDA device index " +
                                std::to_string(device_index));
  }
  std::lock_guard<std::mutex> lock(g_install_mutex);
  CudaMemoryTracker* tracker = g_trackers[static_cast<std::size_t>(device_index)].load();
  if (tracker == nullptr) {
    // Never deleted: the hook may call it until the process ends.
    tracker = new CudaMemoryTracker(device_index, model_from_torch());
    g_trackers[static_cast<std::size_t>(device_index)].store(tracker, std::memory_order_release);
    add_span_sink(tracker);
  }
  attach_hook_once();
  return *tracker;
}

CudaMemoryTracker* CudaMemoryTracker::installed(int device_index) {
  if (device_index < 0 || device_index >= kMaxDevices) return nullptr;
  return g_trackers[static_cast<std::size_t>(device_index)].load(std::memory_order_acquire);
}

bool CudaMemoryTracker::hooked() { return g_hooked.load(); }

std::string CudaMemoryTracker::hook_status() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  return g_hook_status;
}

void CudaMemoryTracker::dispatch(const CudaAllocatorEvent& event) {
  if (event.device < 0 || event.device >= kMaxDevices) return;
  CudaMemoryTracker* tracker =
      g_trackers[static_cast<std::size_t>(event.device)].load(std::memory_order_acquire);
  if (tracker != nullptr) tracker->on_event(event);
}

void CudaMemoryTracker::split_at(std::uint64_t addr) {
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) return;
  --it;
  const std::uint64_t start = it->first;
  const std::uint64_t end = start + it->second.bytes;
  if (addr <= start || addr >= end) return;
  Block tail = it->second;
  tail.bytes = end - addr;
  it->second.bytes = addr - start;
  blocks_.emplace(addr, tail);
}

void CudaMemoryTracker::merge_free(std::uint64_t addr) {
  auto it = blocks_.find(addr);
  if (it == blocks_.end() || it->second.allocated) return;
  const auto mergeable = [](const auto& a, const auto& b) {  // a directly before b
    return !a.second.allocated && !b.second.allocated && a.second.segment == b.second.segment &&
           a.first + a.second.bytes == b.first;
  };
  const auto next = std::next(it);
  if (next != blocks_.end() && mergeable(*it, *next)) {
    it->second.bytes += next->second.bytes;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    const auto prev = std::prev(it);
    if (mergeable(*prev, *it)) {
      prev->second.bytes += it->second.bytes;
      blocks_.erase(it);
    }
  }
}

bool CudaMemoryTracker::remove_range(std::uint64_t addr, std::uint64_t bytes) {
  split_at(addr);
  split_at(addr + bytes);
  auto first = blocks_.lower_bound(addr);
  auto last = blocks_.lower_bound(addr + bytes);
  const bool any = first != last;
  blocks_.erase(first, last);
  return any;
}

void CudaMemoryTracker::add_free_range(std::uint64_t addr, std::uint64_t bytes) {
  remove_range(addr, bytes);  // stale blocks, if the model missed a release
  // A mapped range extends the expandable segment it adjoins, if any.
  std::uint64_t segment = 0;
  const auto after = blocks_.lower_bound(addr);
  if (after != blocks_.begin()) {
    const auto before = std::prev(after);
    if (before->first + before->second.bytes == addr &&
        segment_expandable_.count(before->second.segment) != 0 &&
        segment_expandable_[before->second.segment]) {
      segment = before->second.segment;
    }
  }
  if (segment == 0 && after != blocks_.end() && after->first == addr + bytes &&
      segment_expandable_.count(after->second.segment) != 0 &&
      segment_expandable_[after->second.segment]) {
    segment = after->second.segment;
  }
  if (segment == 0) {
    segment = next_segment_++;
    segment_expandable_[segment] = true;
  }
  Block block;
  block.bytes = bytes;
  block.segment = segment;
  blocks_.emplace(addr, block);
  merge_free(addr);
}

std::uint64_t CudaMemoryTracker::block_bytes_for(std::uint64_t addr, std::uint64_t requested) {
  const std::uint64_t rounded = model_.round_size(requested);
  auto it = blocks_.upper_bound(addr);
  if (it != blocks_.begin()) {
    --it;
    if (!it->second.allocated && addr < it->first + it->second.bytes) {
      if (it->first != addr) {
        // The allocator hands out blocks from their start: a model that disagrees is mended.
        split_at(addr);
        it = blocks_.find(addr);
      }
      Block& block = it->second;
      if (block.bytes >= rounded) {
        if (model_.should_split(block.bytes, rounded)) {
          Block rest = block;
          rest.bytes = block.bytes - rounded;
          block.bytes = rounded;
          blocks_.emplace(addr + rounded, rest);
        }
        block.allocated = true;
        return block.bytes;
      }
    }
  }
  // From a segment allocated before the tracker saw it, or a model that went wrong.
  ++unmodelled_;
  return rounded;
}

void CudaMemoryTracker::on_event(const CudaAllocatorEvent& event) {
  if (event.device != device_) return;
  switch (event.action) {
    case CudaAllocatorAction::alloc: {
      const Tag tag = TagGuard::current();
      std::lock_guard<std::mutex> lock(mutex_);
      const std::uint64_t bytes = block_bytes_for(event.addr, event.size);
      ledger_.alloc(event.addr, static_cast<std::int64_t>(bytes), tag);
      return;
    }
    case CudaAllocatorAction::free_requested: {
      std::lock_guard<std::mutex> lock(mutex_);
      ledger_.free(event.addr);
      return;
    }
    case CudaAllocatorAction::free_completed: {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto found = blocks_.find(event.addr);
      if (found != blocks_.end() && found->second.allocated) {
        found->second.allocated = false;
        merge_free(event.addr);
      }
      return;
    }
    case CudaAllocatorAction::segment_alloc: {
      if (event.size == 0) return;
      std::lock_guard<std::mutex> lock(mutex_);
      remove_range(event.addr, event.size);  // stale blocks, if the model missed a release
      Block block;
      block.bytes = event.size;
      block.segment = next_segment_++;
      segment_expandable_[block.segment] = false;
      blocks_.emplace(event.addr, block);
      ledger_.reserve(static_cast<std::int64_t>(event.size));
      return;
    }
    case CudaAllocatorAction::segment_map: {
      if (event.size == 0) return;
      std::lock_guard<std::mutex> lock(mutex_);
      add_free_range(event.addr, event.size);
      ledger_.reserve(static_cast<std::int64_t>(event.size));
      return;
    }
    case CudaAllocatorAction::segment_free:
    case CudaAllocatorAction::segment_unmap: {
      if (event.size == 0) return;
      std::lock_guard<std::mutex> lock(mutex_);
      std::uint64_t segment = 0;
      const auto first = blocks_.find(event.addr);
      if (first != blocks_.end()) segment = first->second.segment;
      // A segment (or range) the tracker never saw reserved is not unreserved either.
      if (remove_range(event.addr, event.size)) {
        ledger_.reserve(-static_cast<std::int64_t>(event.size));
      }
      if (event.action == CudaAllocatorAction::segment_free && segment != 0) {
        segment_expandable_.erase(segment);
      }
      return;
    }
    case CudaAllocatorAction::other:
      return;
  }
}

std::int64_t CudaMemoryTracker::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.live_bytes();
}

std::int64_t CudaMemoryTracker::live_bytes(Tag tag) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.live_bytes(tag);
}

std::int64_t CudaMemoryTracker::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.peak_bytes();
}

std::int64_t CudaMemoryTracker::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.reserved_bytes();
}

std::int64_t CudaMemoryTracker::reserved_peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.reserved_peak_bytes();
}

void CudaMemoryTracker::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_.reset_peak();
}

std::int64_t CudaMemoryTracker::unmodelled_allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unmodelled_;
}

bool CudaMemoryTracker::retag(const at::Tensor& tensor, Tag tag) {
  if (!tensor.defined() || !tensor.has_storage()) return false;
  const c10::Device device = tensor.device();
  if (!device.is_cuda() || device.index() != device_) return false;
  const void* data = tensor.storage().data_ptr().get();
  if (data == nullptr) return false;
  return retag(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(data)), tag);
}

bool CudaMemoryTracker::retag(std::uint64_t addr, Tag tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.retag(addr, tag);
}

void CudaMemoryTracker::begin_window() {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_.begin_window();
}

DeviceMemoryWindow CudaMemoryTracker::end_window() {
  MemoryLedger::ClosedWindow closed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed = ledger_.close_window();
  }
  return MemoryLedger::replay(std::move(closed));
}

bool CudaMemoryTracker::window_open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.window_open();
}

void CudaMemoryTracker::record_span(Span span) {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_.record_span(std::move(span));
}

std::int64_t CudaMemoryTracker::now_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.now_ns();
}

std::int64_t CudaMemoryTracker::window_start_steady_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.window_open_ ? ledger_.window_start_ns_ : -1;
}

}  // namespace engram::memory
