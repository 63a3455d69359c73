#include "trainer/BatchSampler.h"

#include <algorithm>
#include <numeric>
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

}  // namespace engram::trainer
