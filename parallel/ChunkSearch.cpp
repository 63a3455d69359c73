#include "parallel/ChunkSearch.h"

#include <algorithm>
#include <stdexcept>

namespace engram::parallel {

ChunkSearch::ChunkSearch(std::size_t layers) : layers_(layers) {
  if (layers == 0) throw std::invalid_argument("ChunkSearch: no layers");
  done_ = layers == 1;
}

void ChunkSearch::record(double seconds) {
  if (done_) throw std::logic_error("ChunkSearch::record: the search has ended");
  path_.emplace_back(current_, seconds);
  const bool slower = path_.size() >= 2 && seconds > path_[path_.size() - 2].second;
  if (slower || current_ >= layers_) {
    done_ = true;
    current_ = std::min_element(path_.begin(), path_.end(), [](const auto& a, const auto& b) {
                 return a.second < b.second;
               })->first;
    return;
  }
  current_ = std::min(layers_, 2 * current_);
}

}  // namespace engram::parallel
