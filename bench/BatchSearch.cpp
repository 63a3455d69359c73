#include "bench/BatchSearch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace engram::bench {

BatchSearch largest_training_batch(const BatchSearchOptions& o,
                                   const std::function<bool(long)>& trains) {
  if (o.start < 1 || o.limit < o.start || !(o.precision >= 0))
    throw std::invalid_argument("largest_training_batch: start " + std::to_string(o.start) +
                                ", limit " + std::to_string(o.limit) + ", precision " +
                                std::to_string(o.precision));
  BatchSearch s;
  struct Cut {};
  const auto trial = [&](long batch) {
    if (o.may_go_on && !o.may_go_on()) throw Cut{};
    const bool ok = trains(batch);
    s.trials.push_back({batch, ok});
    return ok;
  };
  long trained = 0;  // the largest batch known to train
  long failed = 0;   // the smallest batch known not to (0: none yet)
  try {
    // Doubling up from the start, or halving down from it when it fails.
    if (trial(o.start)) {
      trained = o.start;
      while (trained < o.limit) {
        const long next = std::min(o.limit, trained * 2);
        if (!trial(next)) {
          failed = next;
          break;
        }
        trained = next;
      }
    } else {
      failed = o.start;
      while (failed > 1) {
        const long next = failed / 2;
        if (trial(next)) {
          trained = next;
          break;
        }
        failed = next;
      }
    }
    // Bisection between them.
    while (trained > 0 && failed > 0 && failed - trained > 1 &&
           static_cast<double>(failed - trained) > o.precision * static_cast<double>(trained)) {
      const long middle = trained + (failed - trained) / 2;
      if (trial(middle)) {
        trained = middle;
      } else {
        failed = middle;
      }
    }
  } catch (const Cut&) {
    s.cut = true;  // trained and failed hold what the trials so far showed
  }
  s.largest = trained;
  s.smallest_failed = failed;
  return s;
}

bool says_out_of_memory(std::string_view error) {
  // cuDNN 9 names its allocation failures ..._ALLOCATION_FAILED; before, ..._ALLOC_FAILED.
  for (const std::string_view says :
       {"unable to find an engine", "ALLOC_FAILED", "ALLOCATION_FAILED", "out of memory"})
    if (error.find(says) != std::string_view::npos) return true;
  return false;
}

}  // namespace engram::bench
