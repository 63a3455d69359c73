#include "memory/ArenaPlanner.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace engram::memory {
namespace {

void validate(const std::vector<BlockUse>& blocks, std::int64_t alignment) {
  if (alignment < 1 || (alignment & (alignment - 1)) != 0)
    throw std::invalid_argument("arena alignment must be a power of two");
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const BlockUse& b = blocks[i];
    if (b.bytes < 0 || b.first < 0 || b.last < b.first) {
      throw std::invalid_argument("arena block " + std::to_string(i) +
                                  ": negative bytes or a lifetime ending before it starts");
    }
  }
}

bool live_together(const BlockUse& a, const BlockUse& b) {
  return a.first <= b.last && b.first <= a.last;
}

/// Places blocks in the given order, each at the best-fitting gap among the placed blocks that
/// share time with it (TFLite's offset calculation), else above them.
ArenaPlan place_in_order(const std::vector<BlockUse>& blocks, const std::vector<std::size_t>& order,
                         std::int64_t alignment, PlanStrategy strategy) {
  ArenaPlan plan;
  plan.strategy = strategy;
  plan.offsets.assign(blocks.size(), 0);
  plan.lower_bound = live_bytes_lower_bound(blocks, alignment);
  std::vector<std::size_t> placed;
  placed.reserve(blocks.size());
  std::vector<std::pair<std::int64_t, std::int64_t>> taken;  // offset, end of the sharing blocks
  for (std::size_t i : order) {
    const BlockUse& b = blocks[i];
    const std::int64_t size = aligned_bytes(b.bytes, alignment);
    taken.clear();
    for (std::size_t j : placed) {
      if (live_together(b, blocks[j]))
        taken.emplace_back(plan.offsets[j],
                           plan.offsets[j] + aligned_bytes(blocks[j].bytes, alignment));
    }
    std::sort(taken.begin(), taken.end());
    std::int64_t best = -1, best_gap = std::numeric_limits<std::int64_t>::max(), top = 0;
    for (const auto& [offset, end] : taken) {
      const std::int64_t gap = offset - top;
      if (gap >= size && gap < best_gap) {
        best = top;
        best_gap = gap;
      }
      top = std::max(top, end);
    }
    plan.offsets[i] = best >= 0 ? best : top;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

/// Bytes live at each instant 0..last event (aligned sizes).
std::vector<std::int64_t> breadth_at(const std::vector<BlockUse>& blocks, std::int64_t alignment) {
  int end = 0;
  for (const auto& b : blocks) end = std::max(end, b.last + 1);
  std::vector<std::int64_t> delta(static_cast<std::size_t>(end) + 1, 0);
  for (const auto& b : blocks) {
    const std::int64_t size = aligned_bytes(b.bytes, alignment);
    delta[static_cast<std::size_t>(b.first)] += size;
    delta[static_cast<std::size_t>(b.last) + 1] -= size;
  }
  std::vector<std::int64_t> breadth(static_cast<std::size_t>(end), 0);
  std::int64_t live = 0;
  for (int t = 0; t < end; ++t)
    breadth[static_cast<std::size_t>(t)] = live += delta[static_cast<std::size_t>(t)];
  return breadth;
}

}  // namespace

const char* strategy_name(PlanStrategy strategy) {
  return strategy == PlanStrategy::kGreedyBySize ? "greedy_by_size" : "greedy_by_breadth";
}

std::int64_t aligned_bytes(std::int64_t bytes, std::int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

std::int64_t live_bytes_lower_bound(const std::vector<BlockUse>& blocks, std::int64_t alignment) {
  validate(blocks, alignment);
  const auto breadth = breadth_at(blocks, alignment);
  return breadth.empty() ? 0 : *std::max_element(breadth.begin(), breadth.end());
}

ArenaPlan plan_greedy_by_size(const std::vector<BlockUse>& blocks, std::int64_t alignment) {
  validate(blocks, alignment);
  std::vector<std::size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; among equal sizes the earlier allocation first (a deterministic order).
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return aligned_bytes(blocks[a].bytes, alignment) > aligned_bytes(blocks[b].bytes, alignment);
  });
  return place_in_order(blocks, order, alignment, PlanStrategy::kGreedyBySize);
}

ArenaPlan plan_greedy_by_breadth(const std::vector<BlockUse>& blocks, std::int64_t alignment) {
  validate(blocks, alignment);
  const auto breadth = breadth_at(blocks, alignment);
  // Instants by breadth, widest first; at each, its unplaced blocks largest first. A block is
  // placed at the widest instant it is live at, so the order is by that instant (its breadth,
  // then the instant itself), then by size: found with a range maximum over each lifetime.
  const std::size_t n = breadth.size();
  std::vector<std::vector<int>> widest;  // sparse table of argmax instants
  if (n > 0) {
    widest.emplace_back(n);
    std::iota(widest[0].begin(), widest[0].end(), 0);
    for (std::size_t k = 1; (std::size_t{1} << k) <= n; ++k) {
      const std::size_t half = std::size_t{1} << (k - 1);
      widest.emplace_back(n - (std::size_t{1} << k) + 1);
      for (std::size_t i = 0; i < widest[k].size(); ++i) {
        const int a = widest[k - 1][i], b = widest[k - 1][i + half];
        widest[k][i] =
            breadth[static_cast<std::size_t>(b)] > breadth[static_cast<std::size_t>(a)] ? b : a;
      }
    }
  }
  auto widest_in = [&](int first, int last) {
    std::size_t k = 0;
    while ((std::size_t{2} << k) <= static_cast<std::size_t>(last - first + 1)) ++k;
    const int a = widest[k][static_cast<std::size_t>(first)];
    const int b = widest[k][static_cast<std::size_t>(last) + 1 - (std::size_t{1} << k)];
    return breadth[static_cast<std::size_t>(b)] > breadth[static_cast<std::size_t>(a)] ? b : a;
  };
  std::vector<int> at(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i)
    at[i] = widest_in(blocks[i].first, blocks[i].last);
  std::vector<std::size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const std::int64_t wa = breadth[static_cast<std::size_t>(at[a])];
    const std::int64_t wb = breadth[static_cast<std::size_t>(at[b])];
    if (wa != wb) return wa > wb;
    if (at[a] != at[b]) return at[a] < at[b];
    return aligned_bytes(blocks[a].bytes, alignment) > aligned_bytes(blocks[b].bytes, alignment);
  });
  return place_in_order(blocks, order, alignment, PlanStrategy::kGreedyByBreadth);
}

ArenaPlan plan_arena(const std::vector<BlockUse>& blocks, std::int64_t alignment) {
  ArenaPlan by_size = plan_greedy_by_size(blocks, alignment);
  ArenaPlan by_breadth = plan_greedy_by_breadth(blocks, alignment);
  return by_breadth.arena_bytes < by_size.arena_bytes ? by_breadth : by_size;
}

std::string check_plan(const std::vector<BlockUse>& blocks, const ArenaPlan& plan,
                       std::int64_t alignment) {
  std::ostringstream problem;
  if (plan.offsets.size() != blocks.size()) return "a plan of another number of blocks";
  std::vector<std::size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return plan.offsets[a] < plan.offsets[b]; });
  for (std::size_t x = 0; x < order.size(); ++x) {
    const std::size_t i = order[x];
    const std::int64_t end_i = plan.offsets[i] + aligned_bytes(blocks[i].bytes, alignment);
    if (plan.offsets[i] < 0 || plan.offsets[i] % alignment != 0 || end_i > plan.arena_bytes) {
      problem << "block " << i << " at " << plan.offsets[i] << " lies outside the arena or "
              << "off the alignment";
      return problem.str();
    }
    for (std::size_t y = x + 1; y < order.size() && plan.offsets[order[y]] < end_i; ++y) {
      const std::size_t j = order[y];
      if (blocks[j].bytes > 0 && blocks[i].bytes > 0 && live_together(blocks[i], blocks[j])) {
        problem << "blocks " << i << " and " << j << " are live together and overlap at "
                << plan.offsets[j];
        return problem.str();
      }
    }
  }
  return "";
}

std::vector<BlockUse> step_blocks(const std::vector<AllocationEvent>& events,
                                  std::int64_t* outliving_bytes) {
  std::unordered_map<std::uint64_t, std::size_t> open;  // id -> index in `allocated`
  struct Allocated {
    std::int64_t bytes;
    int first;
    int last;
  };
  std::vector<Allocated> allocated;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const AllocationEvent& e = events[i];
    if (e.bytes > 0) {
      open[e.id] = allocated.size();
      allocated.push_back({e.bytes, static_cast<int>(i), -1});
    } else if (e.bytes < 0) {
      const auto it = open.find(e.id);
      if (it == open.end()) continue;  // made before the sequence
      allocated[it->second].last = static_cast<int>(i);
      open.erase(it);
    }
  }
  std::vector<BlockUse> blocks;
  std::int64_t outliving = 0;
  for (const Allocated& a : allocated) {
    if (a.last < 0) {
      outliving += a.bytes;
    } else {
      blocks.push_back({a.bytes, a.first, a.last});
    }
  }
  if (outliving_bytes != nullptr) *outliving_bytes = outliving;
  return blocks;
}

}  // namespace engram::memory
