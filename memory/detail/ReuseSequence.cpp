#include "memory/detail/ReuseSequence.h"

#include "memory/ArenaPlanner.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <stdexcept>

namespace engram::memory::detail {

ReuseSequence::ReuseSequence(std::int64_t alignment) : alignment_(alignment) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    throw std::invalid_argument("ReuseSequence: the alignment must be a power of two");
}

void ReuseSequence::begin(std::uint64_t signature) {
  if (open_) throw std::logic_error("fixed-structure reuse: begin_step() while a step is open");
  open_ = true;
  const auto found = plans_.find(signature);
  plan_ = found == plans_.end() ? nullptr : &found->second;
  next_ = 0;
  events_ = 0;
  recorded_.clear();
  recorded_live_.clear();
  step_ = ReuseStep{};
  step_.signature = signature;
  step_.recorded = plan_ == nullptr;
}

ReuseSequence::Placement ReuseSequence::allocate(std::int64_t bytes) {
  if (!open_) throw std::logic_error("fixed-structure reuse: an allocation without a step");
  ++step_.allocations;
  Placement at;
  at.index = next_++;
  at.offset = serve(at.index, bytes);
  if (at.offset < 0) ++step_.heap;
  // Every step records its sequence: a step that missed its plan replaces it.
  recorded_.push_back({bytes, events_++, -1});
  return at;
}

void ReuseSequence::bind(std::size_t index, const void* block) {
  if (open_ && index < recorded_.size()) recorded_live_[block] = index;
}

std::int64_t ReuseSequence::serve(std::size_t index, std::int64_t bytes) {
  if (plan_ == nullptr || step_.missed) return -1;
  if (index >= plan_->bytes.size() || plan_->bytes[index] != bytes) {
    step_.missed = true;
    return -1;
  }
  const std::int64_t offset = plan_->offsets[index];
  if (offset < 0) return -1;
  const std::int64_t end = offset + aligned_bytes(bytes, alignment_);
  // The arena could not grow yet (bytes of it were taken), or the planned bytes are still held
  // by a block that outlived its plan: this allocation gets bytes of its own.
  if (end > capacity_ || !is_free(offset, end)) {
    ++step_.conflicts;
    return -1;
  }
  taken_.emplace(offset, end);
  ++step_.hits;
  return offset;
}

std::int64_t ReuseSequence::released(const void* block, const void* arena) {
  if (open_) {
    const auto found = recorded_live_.find(block);
    if (found != recorded_live_.end()) {
      recorded_[found->second].last = events_++;
      recorded_live_.erase(found);
    }
  }
  return offset_in_arena(block, arena);
}

std::int64_t ReuseSequence::offset_in_arena(const void* block, const void* arena) const {
  const auto* data = static_cast<const char*>(block);
  const auto* base = static_cast<const char*>(arena);
  if (base == nullptr || data < base || data >= base + capacity_) return -1;
  return data - base;
}

void ReuseSequence::vacate(std::int64_t offset) { taken_.erase(offset); }

bool ReuseSequence::is_free(std::int64_t offset, std::int64_t end) const {
  auto after = taken_.lower_bound(offset);
  if (after != taken_.end() && after->first < end) return false;
  if (after != taken_.begin() && std::prev(after)->second > offset) return false;
  return true;
}

void ReuseSequence::set_capacity(std::int64_t bytes) {
  if (!taken_.empty())
    throw std::logic_error("fixed-structure reuse: the arena replaced while bytes of it are taken");
  capacity_ = bytes;
}

void ReuseSequence::forget_plans() {
  if (open_) throw std::logic_error("fixed-structure reuse: plans dropped while a step is open");
  plans_.clear();
  wanted_ = 0;
  refused_ = 0;
}

std::int64_t ReuseSequence::growth() const {
  if (open_ || wanted_ <= capacity_ || wanted_ == refused_ || !taken_.empty()) return 0;
  return wanted_;
}

bool ReuseSequence::grow(const std::function<void()>& free_arena,
                         const std::function<bool(std::int64_t)>& allocate_arena) {
  const std::int64_t bytes = growth();
  if (bytes == 0) return false;
  const std::int64_t had = capacity_;
  free_arena();
  capacity_ = 0;
  if (allocate_arena(bytes)) {
    capacity_ = bytes;
    return true;
  }
  refuse_growth(bytes);
  if (had > 0 && allocate_arena(had)) capacity_ = had;
  return false;
}

ReuseStep ReuseSequence::end() {
  if (!open_) throw std::logic_error("fixed-structure reuse: end_step() without begin_step()");
  open_ = false;
  // Blocks still live belong to no plan; their releases are ordinary from now on.
  recorded_live_.clear();
  if (plan_ != nullptr && step_.allocations != static_cast<long>(plan_->bytes.size()))
    step_.missed = true;  // fewer allocations than planned: another sequence as well
  if (plan_ == nullptr || step_.missed) {
    // The first step of a signature, or one that left its plan (the first steps of training
    // allocate the gradients and the optimizer's state once): its own sequence is the plan now.
    step_.replanned = plan_ != nullptr;
    Plan& entry = plans_[step_.signature];
    entry = make_plan();
    plan_ = &entry;
    wanted_ = std::max(wanted_, entry.arena_bytes);
    step_.plan_seconds = entry.plan_seconds;
  }
  step_.arena_bytes = plan_->arena_bytes;
  step_.lower_bound = plan_->lower_bound;
  step_.strategy = plan_->strategy;
  plan_ = nullptr;
  return step_;
}

ReuseSequence::Plan ReuseSequence::make_plan() const {
  const auto start = std::chrono::steady_clock::now();
  std::vector<BlockUse> blocks;
  std::vector<std::size_t> planned;  // index in recorded_ of each block
  for (std::size_t i = 0; i < recorded_.size(); ++i) {
    if (recorded_[i].last < 0) continue;  // outlives the step: ordinary allocator
    blocks.push_back({recorded_[i].bytes, recorded_[i].first, recorded_[i].last});
    planned.push_back(i);
  }
  const ArenaPlan arena_plan = plan_arena(blocks, alignment_);
  Plan p;
  p.bytes.reserve(recorded_.size());
  for (const auto& r : recorded_) p.bytes.push_back(r.bytes);
  p.offsets.assign(recorded_.size(), -1);
  for (std::size_t b = 0; b < planned.size(); ++b) p.offsets[planned[b]] = arena_plan.offsets[b];
  p.arena_bytes = arena_plan.arena_bytes;
  p.lower_bound = arena_plan.lower_bound;
  p.strategy = strategy_name(arena_plan.strategy);
  p.plan_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

}  // namespace engram::memory::detail
