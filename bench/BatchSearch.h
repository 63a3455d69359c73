#pragma once
/// \file
/// The largest batch that trains (`engram bench memory --find-max-batch`): whether a batch
/// trains is a trial (a few steps under a device-memory cap, trainer/MemoryCap.h), assumed to
/// hold for every smaller batch when it holds for one. The search doubles from a start until a
/// trial fails or the limit is reached, then bisects between the largest batch that trained and
/// the smallest that did not, until they are within `precision` of each other (relative to the
/// one that trained) or adjacent. Every trial is kept, in order. No torch.
///
/// \code
///   engram::bench::BatchSearch s = engram::bench::largest_training_batch(
///       {/*start=*/64, /*limit=*/4096, /*precision=*/0.125},
///       [&](long batch) { return train_a_few_steps(batch); });   // false: out of memory
///   s.largest;   // 0 when not even batch 1 trained
///   s.trials;    // each batch tried and whether it trained
/// \endcode

#include <functional>
#include <string_view>
#include <vector>

namespace engram::bench {

struct BatchSearchOptions {
  long start = 8;           ///< the first batch tried (at least 1)
  long limit = 4096;        ///< no batch above it is tried (at least start)
  double precision = 0.125; ///< stop once (failed - trained) <= precision * trained
  /// Asked before each trial (none: always yes); no: the search stops there, cut short (a time
  /// limit).
  std::function<bool()> may_go_on;
};

struct BatchTrial {
  long batch = 0;
  bool trained = false;
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
                                   const std::function<bool(long)>& trains);

/// Whether an error that is not c10::OutOfMemoryError still says the device ran out of memory:
/// under a cap, ATen's cuDNN convolution tries each engine, passes over those whose workspace
/// does not fit, and throws a plain c10::Error when none did ("... unable to find an engine to
/// execute this computation"); a library's own allocation that failed says ALLOC_FAILED or "out
/// of memory". A trial that throws one of these did not train; any other error is a bug.
bool says_out_of_memory(std::string_view error);

}  // namespace engram::bench
