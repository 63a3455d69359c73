#include "trainer/BatchSampler.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace engram::trainer {

BatchSampler::BatchSampler(std::size_t examples, std::size_t batch, std::uint64_t seed,
                           Curriculum curriculum)
    : batch_(std::clamp<std::size_t>(batch, 1, std::max<std::size_t>(examples, 1))),
      rng_(seed),
      examples_(examples),
      curriculum_(std::move(curriculum)) {
  if (examples == 0) throw std::invalid_argument("no training examples");
  if (curriculum_.active()) {
    if (curriculum_.lengths.size() != examples)
      throw std::invalid_argument("a curriculum needs one length per example");
    levels_ = curriculum_.lengths;
    std::sort(levels_.begin(), levels_.end());
    levels_.erase(std::unique(levels_.begin(), levels_.end()), levels_.end());
  }
  order_ = pool(stage_);
  std::shuffle(order_.begin(), order_.end(), rng_);
}

std::size_t BatchSampler::stage_of(std::size_t drawn) const {
  if (levels_.empty() || drawn >= curriculum_.steps)
    return levels_.empty() ? 0 : levels_.size() - 1;
  return drawn * levels_.size() / curriculum_.steps;
}

std::vector<std::size_t> BatchSampler::pool(std::size_t stage) const {
  std::vector<std::size_t> examples;
  if (levels_.empty()) {
    examples.resize(examples_);
    std::iota(examples.begin(), examples.end(), 0);
    return examples;
  }
  for (std::size_t i = 0; i < examples_; ++i)
    if (curriculum_.lengths[i] <= levels_[stage]) examples.push_back(i);
  return examples;
}

std::vector<std::size_t> BatchSampler::next() {
  const std::size_t stage = stage_of(drawn_);
  if (stage != stage_) {  // the next length comes in: a fresh epoch over the larger pool
    stage_ = stage;
    order_ = pool(stage_);
    std::shuffle(order_.begin(), order_.end(), rng_);
    cursor_ = 0;
  }
  ++drawn_;
  std::vector<std::size_t> indices;
  indices.reserve(batch_);
  while (indices.size() < batch_) {
    if (cursor_ == order_.size()) {
      std::shuffle(order_.begin(), order_.end(), rng_);
      cursor_ = 0;
    }
    indices.push_back(order_[cursor_++]);
  }
  return indices;
}

BatchSampler::State BatchSampler::state() const {
  std::ostringstream rng;
  rng << rng_;
  return {rng.str(), order_, cursor_, drawn_};
}

void BatchSampler::restore(const State& state) {
  // next() enters a stage when it draws the stage's first batch: after `drawn` batches the
  // sampler is in the stage of the last one drawn.
  const std::size_t stage = state.drawn == 0 ? 0 : stage_of(state.drawn - 1);
  const std::vector<std::size_t> examples = pool(stage);
  if (state.order.size() != examples.size())
    throw std::invalid_argument("a sampler state of " + std::to_string(state.order.size()) +
                                " examples, this sampler has " + std::to_string(examples.size()) +
                                (levels_.empty() ? "" : " at that point of its curriculum"));
  if (state.cursor > state.order.size())
    throw std::invalid_argument("a sampler state positioned past its epoch");
  std::vector<bool> in_pool(examples_, false), seen(examples_, false);
  for (std::size_t i : examples) in_pool[i] = true;
  for (std::size_t i : state.order) {
    if (i >= seen.size() || seen[i] || !in_pool[i])
      throw std::invalid_argument("a sampler state whose order is not a permutation");
    seen[i] = true;
  }
  std::mt19937_64 rng;
  std::istringstream in(state.rng);
  in >> rng;
  if (!in) throw std::invalid_argument("a sampler state with a malformed generator state");
  rng_ = rng;
  order_ = state.order;
  cursor_ = state.cursor;
  drawn_ = state.drawn;
  stage_ = stage;
}

}  // namespace engram::trainer
