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

/// Shortest examples first ("baby steps", Bengio et al., "Curriculum Learning", ICML 2009): for
/// the first `steps` batches the sampler draws only from the examples no longer than a bound that
/// climbs through the examples' distinct lengths, one length per equal share of those steps
/// (shortest first); from then on, from every example. Within a stage the stage's examples are
/// visited as an epoch is (a batch larger than the stage's examples repeats some).
struct Curriculum {
  std::vector<int> lengths;  ///< each example's length; empty: no curriculum
  std::size_t steps = 0;     ///< batches until every example is in; 0: no curriculum
  bool active() const { return !lengths.empty() && steps > 0; }
};

class BatchSampler {
 public:
  /// `batch` is clamped to 1..examples; throws std::invalid_argument when examples is 0, or when
  /// a curriculum's lengths are not one per example.
  BatchSampler(std::size_t examples, std::size_t batch, std::uint64_t seed,
               Curriculum curriculum = {});
  /// The next batch's example indices.
  std::vector<std::size_t> next();
  std::size_t batch_size() const { return batch_; }

  /// Where the sampler is: its generator, the epoch's order and the position in it. Restoring
  /// a saved state continues with the same batches (resumable training, trainer/TrainingState.h).
  struct State {
    std::string rng;  ///< the generator's state as std::mt19937_64 writes it
    std::vector<std::size_t> order;
    std::size_t cursor = 0;
    std::size_t drawn = 0;  ///< batches drawn so far (where a curriculum is)
  };
  State state() const;
  /// Throws std::invalid_argument when `state` is of another number of examples (or, under a
  /// curriculum, another stage's) or malformed, changing nothing.
  void restore(const State& state);

 private:
  /// The curriculum's stage after `drawn` batches: an index into levels_.
  std::size_t stage_of(std::size_t drawn) const;
  /// The examples of a stage, in index order (all of them without a curriculum).
  std::vector<std::size_t> pool(std::size_t stage) const;

  std::size_t batch_;
  std::mt19937_64 rng_;
  std::vector<std::size_t> order_;
  std::size_t cursor_ = 0;
  std::size_t examples_;
  Curriculum curriculum_;
  std::vector<int> levels_;  ///< the curriculum's distinct lengths, ascending
  std::size_t drawn_ = 0;
  std::size_t stage_ = 0;
};

}  // namespace engram::trainer
