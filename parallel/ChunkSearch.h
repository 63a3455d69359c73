#pragma once
/// \file
/// The chunk-size search of host-side accumulation (parallel::GradSync::host, `--chunk auto`): a
/// chunk is that many consecutive layers whose gradients go to the host and are summed as one.
/// Sizes 1, 2, 4, ... (the last capped at the number of layers) are tried one after another,
/// each on a measured step; the search grows while a step gets faster, stops at the first size
/// whose step is slower than the one before (or at the cap), and keeps the fastest size seen.
/// Pure: no torch, no clock; the caller measures.
///
/// \code
///   engram::parallel::ChunkSearch search(41);          // 41 layers
///   while (!search.done()) search.record(time_a_step_with(search.current()));
///   std::size_t chunk = search.current();         // the fastest seen
/// \endcode

#include <cstddef>
#include <utility>
#include <vector>

namespace engram::parallel {

class ChunkSearch {
 public:
  /// `layers` at least 1 (std::invalid_argument otherwise).
  explicit ChunkSearch(std::size_t layers);
  /// The size to try next; once done(), the fastest seen.
  std::size_t current() const { return current_; }
  bool done() const { return done_; }
  /// The step time (seconds) measured with current(); moves on, or ends the search.
  void record(double seconds);
  /// Each size tried and its step, in order.
  const std::vector<std::pair<std::size_t, double>>& path() const { return path_; }

 private:
  std::size_t layers_;
  std::size_t current_ = 1;
  bool done_ = false;
  std::vector<std::pair<std::size_t, double>> path_;
};

}  // namespace engram::parallel
