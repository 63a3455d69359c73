#include "trainer/BatchSampler.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace engram::trainer {

BatchSampler::BatchSampler(std::size_t examples, std::size_t batch, std::uint64_t seed)
    : batch_(std::clamp<std::size_t>(batch, 1, std::max<std::size_t>(examples, 1))),
      rng_(seed),
      order_(examples) {
  if (examples == 0) throw std::invalid_argument("no training examples");
  std::iota(order_.begin(), order_.end(), 0);
  std::shuffle(order_.begin(), order_.end(), rng_);
}

std::vector<std::size_t> BatchSampler::next() {
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
  return {rng.str(), order_, cursor_};
}

void BatchSampler::restore(const State& state) {
  if (state.order.size() != order_.size())
    throw std::invalid_argument("a sampler state of " + std::to_string(state.order.size()) +
                                " examples, this sampler has " + std::to_string(order_.size()));
  if (state.cursor > state.order.size())
    throw std::invalid_argument("a sampler state positioned past its epoch");
  std::vector<bool> seen(order_.size(), false);
  for (std::size_t i : state.order) {
    if (i >= seen.size() || seen[i])
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
}

}  // namespace engram::trainer
