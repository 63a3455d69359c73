#pragma once
/// \file
/// The order in which a session visits its examples: epochs of a seeded shuffle, a batch of
/// `batch` indices at a time, without replacement within an epoch (a batch may span two
/// epochs). Every caller that trains or times training steps draws its batches here, so a
/// benchmark steps through the same batches as `engram train` on the same seed.
///
/// \code
///   engram::trainer::BatchSampler sampler(/*examples=*/100, /*batch=*/8, /*seed=*/1);
///   std::vector<std::size_t> first = sampler.next();   // 8 distinct indices in 0..99
/// \endcode

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace engram::trainer {

class BatchSampler {
 public:
  /// `batch` is clamped to 1..examples; throws std::invalid_argument when examples is 0.
  BatchSampler(std::size_t examples, std::size_t batch, std::uint64_t seed);
  /// The next batch's example indices.
  std::vector<std::size_t> next();
  std::size_t batch_size() const { return batch_; }

  /// Where the sampler is: its generator, the epoch's order and the position in it. Restoring
  /// a saved state continues with the same batches (resumable training, trainer/TrainingState.h).
  struct State {
    std::string rng;  ///< the generator's state as std::mt19937_64 writes it
    std::vector<std::size_t> order;
    std::size_t cursor = 0;
  };
  State state() const;
  /// Throws std::invalid_argument when `state` is of another number of examples or malformed,
  /// changing nothing.
  void restore(const State& state);

 private:
  std::size_t batch_;
  std::mt19937_64 rng_;
  std::vector<std::size_t> order_;
  std::size_t cursor_ = 0;
};

}  // namespace engram::trainer
