#pragma once
/// \file
/// Link emulation (docs/ARCHITECTURE.md): what a slower network would do to a schedule, on one
/// machine. A collective over an emulated link cannot complete before the time a serialised
/// link of that bandwidth and latency would need: a ring all-reduce moves 2(N-1)/N of the buffer
/// through each rank's link, and a collective starts on the link only when the previous one has
/// left it. The delay is waited for with a timed sleep, so emulation costs no CPU.
///
/// \code
///   engram::parallel::LinkModel link{/*bandwidth=*/100e6, /*latency=*/0};
///   link.allreduce_seconds(10'000'000, /*world=*/2);   // 0.1: 10 MB moved 2*(1/2) times
///   engram::parallel::LinkSchedule schedule(link);
///   auto done = schedule.complete_at(now, link.allreduce_seconds(bytes, world));  // after the
///                                                                           // previous one
/// \endcode

#include <chrono>
#include <cstddef>

namespace engram::parallel {

struct LinkModel {
  double bandwidth = 0;  ///< bytes per second; 0: not emulated
  double latency = 0;    ///< seconds per collective
  bool emulated() const { return bandwidth > 0 || latency > 0; }
  /// Seconds a ring all-reduce of `bytes` among `world` ranks occupies the link.
  double allreduce_seconds(std::size_t bytes, int world) const;
  /// Seconds a broadcast of `bytes` occupies the link (the buffer crosses each link once).
  double broadcast_seconds(std::size_t bytes, int world) const;
};

/// The link's timeline: collectives occupy it one after another, in launch order.
class LinkSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LinkSchedule(LinkModel model) : model_(model) {}
  /// When a collective launched at `launched` that occupies the link for `seconds` leaves it:
  /// it starts when both it is launched and the previous one has left.
  Clock::time_point complete_at(Clock::time_point launched, double seconds);
  const LinkModel& model() const { return model_; }

 private:
  LinkModel model_;
  Clock::time_point free_at_{};
};

}  // namespace engram::parallel
