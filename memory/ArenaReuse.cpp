#include "memory/ArenaReuse.h"

#include "memory/ArenaPlanner.h"
#include "memory/MemoryTracker.h"
#include "memory/detail/BlockSource.h"

#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

namespace engram::memory {
namespace {

constexpr std::int64_t kAlignment = 64;  // c10's CPU alignment; the tracker's header keeps it

thread_local bool t_bypass = false;

/// A signature's plan: per allocation of the step, its bytes and offset (-1: ordinary heap).
struct Plan {
  std::vector<std::int64_t> bytes;
  std::vector<std::int64_t> offsets;
  std::int64_t arena_bytes = 0;
  std::int64_t lower_bound = 0;
  std::string strategy;
  double plan_seconds = 0;
};

/// An allocation of the step being recorded: bytes and lifetime in the step's events.
struct Recorded {
  std::int64_t bytes = 0;
  int first = 0;
  int last = -1;  // -1: still live when the step ended
};

}  // namespace

struct ArenaReuse::State final : public detail::BlockSource {
  mutable std::mutex mutex;  // guards everything below
  std::unordered_map<std::uint64_t, Plan> plans;
  char* arena = nullptr;
  std::int64_t capacity = 0;
  std::int64_t wanted = 0;                     // the largest plan's arena
  std::map<std::int64_t, std::int64_t> taken;  // live arena blocks: offset -> end

  // The open step. `active` mirrors `open` for the allocations of every thread to test unlocked.
  std::atomic<bool> active{false};
  bool open = false;
  std::thread::id thread;
  const Plan* plan = nullptr;  // serving; nullptr: recording
  std::size_t next = 0;        // index of the step's next allocation
  int events = 0;
  std::vector<Recorded> recorded;
  std::unordered_map<void*, std::size_t> recorded_live;  // block -> index in `recorded`
  ReuseStep step;

  void* allocate(std::size_t bytes) override {
    if (!active.load(std::memory_order_acquire) || t_bypass) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    if (!open) return nullptr;
    if (std::this_thread::get_id() != thread) {
      ++step.foreign;
      return nullptr;
    }
    ++step.allocations;
    const std::size_t index = next++;
    const auto size = static_cast<std::int64_t>(bytes);
    void* block = serve(index, size);
    if (block == nullptr) {
      ++step.heap;
      block = c10::alloc_cpu(bytes);
    }
    // Every step records its sequence: a step that missed its plan replaces it.
    recorded.push_back({size, events++, -1});
    recorded_live.emplace(block, index);
    return block;
  }

  /// The planned block for the step's allocation `index`, or nullptr (recording, a heap-planned
  /// allocation, or the step has left its plan).
  void* serve(std::size_t index, std::int64_t size) {
    if (plan == nullptr || step.missed) return nullptr;
    if (index >= plan->bytes.size() || plan->bytes[index] != size) {
      step.missed = true;
      return nullptr;
    }
    const std::int64_t offset = plan->offsets[index];
    if (offset < 0) return nullptr;
    const std::int64_t end = offset + aligned_bytes(size, kAlignment);
    if (end > capacity) {  // the arena could not grow yet (blocks of it were live)
      ++step.conflicts;
      return nullptr;
    }
    if (!is_free(offset, end)) {  // planned bytes still held by a block that outlived its plan
      ++step.conflicts;
      return nullptr;
    }
    taken.emplace(offset, end);
    ++step.hits;
    return arena + offset;
  }

  void release(void* block) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (open) {
        const auto found = recorded_live.find(block);
        if (found != recorded_live.end()) {
          recorded[found->second].last = events++;
          recorded_live.erase(found);
        }
      }
      auto* data = static_cast<char*>(block);
      if (arena != nullptr && data >= arena && data < arena + capacity) {
        taken.erase(data - arena);
        return;
      }
    }
    c10::free_cpu(block);
  }

  /// No live arena block overlaps [offset, end).
  bool is_free(std::int64_t offset, std::int64_t end) const {
    auto after = taken.lower_bound(offset);
    if (after != taken.end() && after->first < end) return false;
    if (after != taken.begin() && std::prev(after)->second > offset) return false;
    return true;
  }

  /// Grows the arena to the largest plan's size when no arena block is live.
  void grow_if_idle() {
    if (wanted <= capacity || !taken.empty()) return;
    if (arena != nullptr) c10::free_cpu(arena);
    arena = static_cast<char*>(c10::alloc_cpu(static_cast<std::size_t>(wanted)));
    capacity = wanted;
  }

  Plan make_plan() const {
    const auto start = std::chrono::steady_clock::now();
    std::vector<BlockUse> blocks;
    std::vector<std::size_t> planned;  // index in `recorded` of each block
    for (std::size_t i = 0; i < recorded.size(); ++i) {
      if (recorded[i].last < 0) continue;  // outlives the step: ordinary allocator
      blocks.push_back({recorded[i].bytes, recorded[i].first, recorded[i].last});
      planned.push_back(i);
    }
    const ArenaPlan arena_plan = plan_arena(blocks, kAlignment);
    Plan p;
    p.bytes.reserve(recorded.size());
    for (const auto& r : recorded) p.bytes.push_back(r.bytes);
    p.offsets.assign(recorded.size(), -1);
    for (std::size_t b = 0; b < planned.size(); ++b) p.offsets[planned[b]] = arena_plan.offsets[b];
    p.arena_bytes = arena_plan.arena_bytes;
    p.lower_bound = arena_plan.lower_bound;
    p.strategy = strategy_name(arena_plan.strategy);
    p.plan_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return p;
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
  if (s.open) throw std::logic_error("ArenaReuse: begin_step() while a step is open");
  s.grow_if_idle();
  s.open = true;
  s.thread = std::this_thread::get_id();
  const auto found = s.plans.find(signature);
  s.plan = found == s.plans.end() ? nullptr : &found->second;
  s.next = 0;
  s.events = 0;
  s.recorded.clear();
  s.recorded_live.clear();
  s.step = ReuseStep{};
  s.step.signature = signature;
  s.step.recorded = s.plan == nullptr;
  s.active.store(true, std::memory_order_release);
}

ReuseStep ArenaReuse::end_step() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.open) throw std::logic_error("ArenaReuse: end_step() without begin_step()");
  s.open = false;
  s.active.store(false, std::memory_order_release);
  // Blocks still live belong to no plan; their frees are ordinary from now on.
  s.recorded_live.clear();
  if (s.plan != nullptr && s.step.allocations != static_cast<long>(s.plan->bytes.size()))
    s.step.missed = true;  // fewer allocations than planned: another sequence as well
  if (s.plan == nullptr || s.step.missed) {
    // The first step of a signature, or one that left its plan (the first steps of training
    // allocate the gradients and the optimizer's state once): its own sequence is the plan now.
    s.step.replanned = s.plan != nullptr;
    Plan& entry = s.plans[s.step.signature];
    entry = s.make_plan();
    s.plan = &entry;
    s.wanted = std::max(s.wanted, entry.arena_bytes);
    s.step.plan_seconds = entry.plan_seconds;
  }
  s.step.arena_bytes = s.plan->arena_bytes;
  s.step.lower_bound = s.plan->lower_bound;
  s.step.strategy = s.plan->strategy;
  s.plan = nullptr;
  s.grow_if_idle();
  return s.step;
}

long ArenaReuse::plans() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return static_cast<long>(state_->plans.size());
}

std::int64_t ArenaReuse::capacity_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->capacity;
}

bool ArenaReuse::in_arena(const void* data) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto* p = static_cast<const char*>(data);
  return state_->arena != nullptr && p >= state_->arena && p < state_->arena + state_->capacity;
}

}  // namespace engram::memory
