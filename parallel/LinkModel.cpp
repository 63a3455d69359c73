#include "parallel/LinkModel.h"

#include <algorithm>

namespace engram::parallel {

double LinkModel::allreduce_seconds(std::size_t bytes, int world) const {
  if (!emulated() || world <= 1) return 0;
  const double moved = 2.0 * (world - 1) / world * static_cast<double>(bytes);
  return latency + (bandwidth > 0 ? moved / payload_rate() : 0);
}

double LinkModel::broadcast_seconds(std::size_t bytes, int world) const {
  if (!emulated() || world <= 1) return 0;
  return latency + (bandwidth > 0 ? static_cast<double>(bytes) / payload_rate() : 0);
}

LinkSchedule::Clock::time_point LinkSchedule::complete_at(Clock::time_point launched,
                                                          double seconds) {
  const auto start = std::max(launched, free_at_);
  free_at_ =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  return free_at_;
}

}  // namespace engram::parallel
