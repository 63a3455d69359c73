#include "trainer/TrainingOptions.h"

#include "common/Errors.h"

#include <cmath>

namespace engram::trainer {

void validate(const TrainingOptions& o) {
  if (o.steps < 0) throw InvalidOption("steps", "must not be negative");
  if (o.batch < 1) throw InvalidOption("batch", "must be at least 1");
  if (!(o.learning_rate > 0) || !std::isfinite(o.learning_rate))
    throw InvalidOption("learning_rate", "must be a positive number");
  if (!(o.grad_clip >= 0) || !std::isfinite(o.grad_clip))
    throw InvalidOption("grad_clip", "must be a non-negative number (0: no clipping)");
  if (o.threads < 0 || o.threads > 1024)
    throw InvalidOption("threads", "must be 0 (all cores) or between 1 and 1024");
  if (o.log_every < 1) throw InvalidOption("log_every", "must be at least 1");
  validate(o.memory);
}

void validate(const MemoryOptions& o) {
  bool units = false;
  for (const auto& t : o.techniques) {
    if (t == "recompute" || t == "swap" || t == "all") {
      units = true;
    } else if (t != "none" && t != "relu") {
      throw InvalidOption("memory.techniques",
                          "has an unknown technique '" + t +
                              "' (valid: none, relu, recompute, swap, all)");
    }
  }
  if (o.budget_bytes < 0) throw InvalidOption("memory.budget_bytes", "must not be negative");
  if (o.budget_bytes > 0 && !units)
    throw InvalidOption("memory.budget_bytes", "needs recompute or swap among the techniques");
  if (!(o.swap_bandwidth >= 0))
    throw InvalidOption("memory.swap_bandwidth",
                        "must be a non-negative number of bytes per second");
}

}  // namespace engram::trainer
