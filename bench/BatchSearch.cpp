#include "bench/BatchSearch.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace engram::bench {

namespace {

/// The two largest trained batches of `trials` that held memory (second: nullptr when only
/// one did; both nullptr when none did).
std::pair<const BatchTrial*, const BatchTrial*> largest_two(const std::vector<BatchTrial>& trials) {
  const BatchTrial* largest = nullptr;
  const BatchTrial* second = nullptr;
  for (const BatchTrial& t : trials) {
    if (!t.trained || t.held_bytes <= 0) continue;
    if (largest == nullptr || t.batch > largest->batch) {
      second = largest;
      largest = &t;
    } else if (t.batch < largest->batch && (second == nullptr || t.batch > second->batch)) {
      second = &t;
    }
  }
  return {largest, second};
}

/// Bytes per example of the line through `second` and `largest` (largest_two's); 0 without a
/// second, or where memory does not grow between them.
double slope(const BatchTrial* largest, const BatchTrial* second) {
  if (second == nullptr || largest->held_bytes <= second->held_bytes) return 0;
  return static_cast<double>(largest->held_bytes - second->held_bytes) /
         static_cast<double>(largest->batch - second->batch);
}

}  // namespace

double bytes_per_example(const std::vector<BatchTrial>& trials) {
  const auto [largest, second] = largest_two(trials);
  return slope(largest, second);
}

long batch_at_cap(const std::vector<BatchTrial>& trials, std::int64_t cap_bytes,
                  double prior_bytes_per_example) {
  const auto [largest, second] = largest_two(trials);
  if (largest == nullptr) return 0;
  const double per_example =
      second != nullptr ? slope(largest, second) : std::max(0.0, prior_bytes_per_example);
  if (!(per_example > 0) || !std::isfinite(per_example)) return 0;
  const double at_cap =
      static_cast<double>(largest->batch) +
      static_cast<double>(cap_bytes - largest->held_bytes) / per_example;
  // No batch beyond what a long holds comfortably: the caller clamps to its limit.
  return at_cap < 1 ? 0 : static_cast<long>(std::floor(std::min(at_cap, 1e15)));
}

BatchSearch largest_training_batch(const BatchSearchOptions& o,
                                   const std::function<TrialOutcome(long)>& trains) {
  if (o.start < 1 || o.limit < o.start || !(o.precision >= 0) || !std::isfinite(o.precision) ||
      o.cap_bytes < 0 || !(o.prior_bytes_per_example >= 0))
    throw std::invalid_argument("largest_training_batch: start " + std::to_string(o.start) +
                                ", limit " + std::to_string(o.limit) + ", precision " +
                                std::to_string(o.precision) + ", cap " +
                                std::to_string(o.cap_bytes));
  BatchSearch s;
  struct Cut {};
  const auto trial = [&](long batch, bool aimed) {
    if (o.may_go_on && !o.may_go_on()) throw Cut{};
    const TrialOutcome r = trains(batch);
    s.trials.push_back({batch, r.trained, r.trained ? r.held_bytes : 0, aimed});
    return r.trained;
  };
  long trained = 0;  // the largest batch known to train
  long failed = 0;   // the smallest batch known not to (0: none yet)
  try {
    // Growing from the start (aimed where it can be, else doubling), or halving down from it
    // when it fails.
    if (trial(o.start, false)) {
      trained = o.start;
      bool aiming = o.cap_bytes > 0;
      bool checking = false;  // the last trial was aimed and trained: this one checks the line
      while (trained < o.limit) {
        const long step = std::max(1L, static_cast<long>(o.precision * trained));
        long next = trained * 2;
        bool aimed = false;
        bool own_line = false;  // aimed along the row's own line, not the prior slope
        if (aiming && checking) {
          next = trained + step;
        } else if (aiming) {
          if (const long at_cap =
                  batch_at_cap(s.trials, o.cap_bytes, o.prior_bytes_per_example);
              at_cap > 0) {
            next = std::max(at_cap, trained + step);
            aimed = true;
            own_line = bytes_per_example(s.trials) > 0;
          }
        }
        next = std::min(o.limit, next);
        if (!trial(next, aimed)) {
          failed = next;
          break;
        }
        if (checking) aiming = false;  // the line fell short of what trains: doubling on
        // A batch the row's own line named is checked next; one the prior slope named gives
        // the row its second point, and its own line.
        checking = own_line;
        trained = next;
      }
    } else {
      failed = o.start;
      while (failed > 1) {
        const long next = failed / 2;
        if (trial(next, false)) {
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
      if (trial(middle, false)) {
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
