#include "memory/ArenaReuse.h"

#include "memory/MemoryTracker.h"
#include "memory/detail/BlockSource.h"
#include "memory/detail/ReuseSequence.h"

#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace engram::memory {
namespace {

constexpr std::int64_t kAlignment = 64;  // c10's CPU alignment; the tracker's header keeps it

thread_local bool t_bypass = false;

}  // namespace

bool detail::reuse_bypassed() { return t_bypass; }

struct ArenaReuse::State final : public detail::BlockSource {
  mutable std::mutex mutex;  // guards everything below
  detail::ReuseSequence sequence{kAlignment};
  char* arena = nullptr;

  // The open step. `active` mirrors the sequence's open step for every thread to test unlocked.
  std::atomic<bool> active{false};
  std::thread::id thread;

  void* allocate(std::size_t bytes) override {
    if (!active.load(std::memory_order_acquire) || t_bypass) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    if (!sequence.open()) return nullptr;
    if (std::this_thread::get_id() != thread) {
      sequence.note_foreign();
      return nullptr;
    }
    const auto at = sequence.allocate(static_cast<std::int64_t>(bytes));
    void* block = at.offset >= 0 ? arena + at.offset : c10::alloc_cpu(bytes);
    sequence.bind(at.index, block);
    return block;
  }

  void release(void* block) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      const std::int64_t offset = sequence.released(block, arena);
      if (offset >= 0) {
        sequence.vacate(offset);  // one thread's step: its later uses are ordered after this
        return;
      }
    }
    c10::free_cpu(block);
  }

  /// Grows the arena to the largest plan's size when no arena block is live
  /// (ReuseSequence::grow: a size the host refuses is not tried again until a plan wants more).
  void grow_if_idle() {
    sequence.grow(
        [this] {
          if (arena != nullptr) c10::free_cpu(arena);
          arena = nullptr;
        },
        [this](std::int64_t bytes) {
          try {
            arena = static_cast<char*>(c10::alloc_cpu(static_cast<std::size_t>(bytes)));
          } catch (const c10::Error&) {  // c10's "not enough memory"
            arena = nullptr;
          }
          return arena != nullptr;
        });
  }
};

namespace {
std::atomic<ArenaReuse*> g_installed{nullptr};
}  // namespace

ReuseBypass::ReuseBypass() : before_(t_bypass) { t_bypass = true; }
ReuseBypass::~ReuseBypass() { t_bypass = before_; }

ArenaReuse::ArenaReuse() : state_(new State()) {}

ArenaReuse& ArenaReuse::install() {
  static ArenaReuse* const reuse = [] {
    MemoryTracker::install();
    auto* created = new ArenaReuse();  // never deleted, like the tracker
    detail::set_block_source(created->state_);
    g_installed.store(created);
    return created;
  }();
  return *reuse;
}

ArenaReuse* ArenaReuse::installed() { return g_installed.load(); }

void ArenaReuse::begin_step(std::uint64_t signature) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.grow_if_idle();  // never while a step is open: begin() then throws std::logic_error
  s.sequence.begin(signature);
  s.thread = std::this_thread::get_id();
  s.active.store(true, std::memory_order_release);
}

ReuseStep ArenaReuse::end_step() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  ReuseStep step = s.sequence.end();
  s.active.store(false, std::memory_order_release);
  s.grow_if_idle();
  return step;
}

long ArenaReuse::plans() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->sequence.plans();
}

std::int64_t ArenaReuse::capacity_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->sequence.capacity();
}

bool ArenaReuse::in_arena(const void* data) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->sequence.offset_in_arena(data, state_->arena) >= 0;
}

}  // namespace engram::memory
