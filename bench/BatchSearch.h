#pragma once
/// \file
/// The largest batch that trains (`engram bench memory --find-max-batch`): whether a batch
/// trains is a trial (a few steps under a device-memory cap, trainer/MemoryCap.h), assumed to
/// hold for every smaller batch when it holds for one. The search grows from a start until a
/// trial fails or the limit is reached, then bisects between the largest batch that trained and
/// the smallest that did not, until they are within `precision` of each other (relative to the
/// one that trained) or adjacent. Every trial is kept, in order. No torch.
///
/// Growing doubles the batch, unless the search is aimed: given the cap and, from each trial that
/// trained, the most memory the allocator held in it, the straight line through the two largest
/// batches that trained and what they held names the batch that would hold the cap, and that is
/// tried next (at least `precision` above the largest that trained); with one such batch and a
/// prior slope (bytes per example, another row's), the line through it with that slope, whose
/// batch, when it trains, draws the row's own line. A batch the row's own line named that trains
/// is checked `precision` above it, which ends the search when that fails; when it trains too,
/// the line fell short of what trains and growing doubles from there on. Memory that grows as a
/// straight line in the batch (activations) takes four trials from a start whose double still
/// trains.
///
/// \code
///   engram::bench::BatchSearch s = engram::bench::largest_training_batch(
///       {/*start=*/64, /*limit=*/4096, /*precision=*/0.125, /*cap_bytes=*/8ll << 30},
///       [&](long batch) -> engram::bench::TrialOutcome {
///         return train_a_few_steps(batch);   // {false} out of memory, else {true, held bytes}
///       });
///   s.largest;   // 0 when not even batch 1 trained
///   s.trials;    // each batch tried, whether it trained, what it held, whether it was aimed
/// \endcode

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace engram::bench {

struct BatchSearchOptions {
  long start = 8;           ///< the first batch tried (at least 1)
  long limit = 4096;        ///< no batch above it is tried (at least start)
  double precision = 0.125; ///< stop once (failed - trained) <= precision * trained (finite)
  /// The memory a trial may hold (the cap); 0: the search is not aimed, and doubles.
  std::int64_t cap_bytes = 0;
  /// Bytes per example for a line through a single trained batch (bytes_per_example() of an
  /// earlier search: a technique that saves memory has a flatter line, so the aim falls short
  /// and the next trial draws the row's own line); 0: a single batch draws no line.
  double prior_bytes_per_example = 0;
  /// Asked before each trial (none: always yes); no: the search stops there, cut short (a time
  /// limit).
  std::function<bool()> may_go_on;
};

/// What one trial showed. Converts from a bool (trained, nothing held known).
struct TrialOutcome {
  TrialOutcome(bool trained, std::int64_t held_bytes = 0)  // NOLINT: a bool is an outcome
      : trained(trained), held_bytes(held_bytes) {}
  bool trained;
  /// The most memory the allocator held during the trial, when it trained (0: not known).
  std::int64_t held_bytes;
};

struct BatchTrial {
  long batch = 0;
  bool trained = false;
  std::int64_t held_bytes = 0;  ///< as the trial reported it
  bool aimed = false;           ///< chosen by the line through what trials held (file comment)
};

struct BatchSearch {
  long largest = 0;            ///< the largest batch that trained; 0: none did
  long smallest_failed = 0;    ///< the smallest batch that did not; 0: none failed (the limit)
  /// may_go_on said no before the search's end: largest is only a batch that trained (a lower
  /// bound of the largest), smallest_failed one that did not, if any.
  bool cut = false;
  std::vector<BatchTrial> trials;
};

/// Searches (see the file comment). Throws std::invalid_argument for options out of range;
/// whatever `trains` throws goes through.
BatchSearch largest_training_batch(const BatchSearchOptions& options,
                                   const std::function<TrialOutcome(long)>& trains);

/// The batch at which the straight line through the two largest trained batches of `trials`
/// that held memory reaches `cap_bytes` (rounded down); with only one such batch, the line
/// through it with slope `prior_bytes_per_example` (> 0). 0 when there is no line, or memory
/// does not grow along it.
long batch_at_cap(const std::vector<BatchTrial>& trials, std::int64_t cap_bytes,
                  double prior_bytes_per_example = 0);

/// The slope of that line through the two largest trained batches of `trials` that held
/// memory, in bytes per example; 0 when there are not two, or memory does not grow.
double bytes_per_example(const std::vector<BatchTrial>& trials);

/// Whether an error that is not c10::OutOfMemoryError still says the device ran out of memory:
/// under a cap, ATen's cuDNN convolution tries each engine, passes over those whose workspace
/// does not fit, and throws a plain c10::Error when none did ("... unable to find an engine to
/// execute this computation"); a library's own allocation that failed says ALLOC_FAILED or "out
/// of memory". A trial that throws one of these did not train; any other error is a bug.
bool says_out_of_memory(std::string_view error);

}  // namespace engram::bench
