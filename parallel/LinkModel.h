#pragma once
/// \file
/// Link emulation (docs/ARCHITECTURE.md): what a slower network would do to a schedule, on one
/// machine. A collective over an emulated link cannot complete before the time a serialised
/// link of that bandwidth and latency would need: a ring all-reduce moves 2(N-1)/N of the buffer
/// through each rank's link, and a collective starts on the link only when the previous one has
/// left it. The delay is waited for with a timed sleep, so emulation costs no CPU.
///
/// The bandwidth is the wire's, as a link is rated: of every 1514-byte Ethernet frame (MTU 1500,
/// the size a Linux shaper counts) TCP with timestamps carries 1448 bytes of payload, so a
/// collective's bytes cross at 95.6% of it. Measured on links shaped between hosts (`engram bench
/// dp --hosts netns`): the payload rate came to 95.2-95.3% of the shaper's at 400 and 200 Mb/s.
/// A physical link's preamble, frame check and gap (24 bytes more per frame) would make it 94.1%.
///
/// \code
///   engram::parallel::LinkModel link{/*bandwidth=*/100e6, /*latency=*/0};
///   link.allreduce_seconds(10'000'000, /*world=*/2);   // 0.1046: 10 MB moved 2*(1/2) times at
///                                                      // 95.6 MB/s of payload
///   engram::parallel::LinkSchedule schedule(link);
///   auto done = schedule.complete_at(now, link.allreduce_seconds(bytes, world));  // after the
///                                                                           // previous one
/// \endcode

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace engram::parallel {

/// The share of a link's bytes that are TCP payload: 1448 of each 1514-byte Ethernet frame.
inline constexpr double kTcpPayloadShare = 1448.0 / 1514.0;

struct LinkModel {
  double bandwidth = 0;  ///< bytes per second on the wire; 0: not emulated
  double latency = 0;    ///< seconds per collective
  double payload_share = kTcpPayloadShare;  ///< of the bandwidth, what carries the buffers
  bool emulated() const { return bandwidth > 0 || latency > 0; }
  /// Bytes of payload per second.
  double payload_rate() const { return bandwidth * payload_share; }
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

/// The link's timeline when a collective's start is known only after its launch: a collective on
/// CUDA tensors reaches the link when the device has run what was queued before it, which the
/// host learns later (a CUDA event), not when the host launched it. The collectives still occupy
/// the link in launch order: done_at() first settles every collective launched before.
///
/// \code
///   LinkQueue queue(link);
///   auto a = queue.push(seconds_a, [] { return when_the_device_got_there(); });
///   auto b = queue.push(seconds_b, [t = Clock::now()] { return t; });  // host memory: now
///   queue.done_at(b);  // settles a first (its start() may block), then b behind it
/// \endcode
class LinkQueue {
 public:
  using Clock = LinkSchedule::Clock;
  /// When the collective could start; may block until that is known.
  using StartTime = std::function<Clock::time_point()>;
  struct Ticket;

  explicit LinkQueue(LinkModel model) : schedule_(model) {}
  /// A collective occupying the link for `seconds` from `start()`, launched now: its ticket.
  std::shared_ptr<Ticket> push(double seconds, StartTime start);
  /// When the ticket's collective leaves the link. Thread-safe; push() never waits for it.
  /// Throws what a start() threw (its collective and the ones before are settled regardless).
  Clock::time_point done_at(const std::shared_ptr<Ticket>& ticket);
  /// The model of the collectives launched from now on (those launched before are settled on
  /// the old one first).
  void reset(LinkModel model);

 private:
  /// Settles the pending tickets up to `last`, in order; caller holds settle_mutex_.
  void settle_through(const Ticket& last);
  /// Settles the first pending ticket, `first`; caller holds settle_mutex_. A start() that throws
  /// settles it from now, then the exception goes on.
  void settle_first(const std::shared_ptr<Ticket>& first);

  std::mutex settle_mutex_;  ///< one settling at a time, in order; guards schedule_, Ticket::done
  std::mutex queue_mutex_;   ///< guards pending_ only, so that push() never waits on a start()
  LinkSchedule schedule_;
  std::deque<std::shared_ptr<Ticket>> pending_;
};

struct LinkQueue::Ticket {
  double seconds = 0;
  StartTime start;
  std::optional<Clock::time_point> done;
};

/// When points on devices' streams were reached, on the host's clock: a LinkQueue's StartTime for
/// collectives on CUDA tensors, which reach the link once the device has run what was queued
/// before them (the host runs ahead of it). A point is timed by its device against the last point
/// settled on the same device, whose host time is known, and the first against an anchor the
/// host waited for; timing each against the last keeps float milliseconds fine-grained.
///
/// `Event` (at::cuda::CUDAEvent) has `void synchronize() const` and `float elapsed_time(const
/// Event& later) const` in milliseconds. A device's points are settled in the order they were
/// recorded (LinkQueue settles in launch order). Thread-safe.
///
/// \code
///   DeviceTimeline<CUDAEvent> timeline;
///   timeline.anchor_once(device, [&] { return waited_for_event_and_now(); });
///   auto point = recorded_event();                // after the anchor, on the device's stream
///   Clock::time_point at = timeline.reached(device, point);  // waits for it
/// \endcode
template <class Event>
class DeviceTimeline {
 public:
  using Clock = LinkQueue::Clock;
  struct Anchor {
    std::shared_ptr<Event> event;  ///< reached at `at`
    Clock::time_point at;
  };

  /// Gives `device` the anchor `make_anchor()` returns unless it has one: an event the host has
  /// waited for, and the host's time then.
  template <class MakeAnchor>
  void anchor_once(int device, MakeAnchor&& make_anchor) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (anchors_.count(device) == 0) anchors_.emplace(device, make_anchor());
  }

  /// Waits for `point`, recorded on `device` after its anchor, and says when it was reached.
  /// Throws std::out_of_range for a device without an anchor.
  Clock::time_point reached(int device, const std::shared_ptr<Event>& point) {
    point->synchronize();
    std::lock_guard<std::mutex> lock(mutex_);
    Anchor& anchor = anchors_.at(device);
    const double ms = anchor.event->elapsed_time(*point);
    anchor.at += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(ms));
    anchor.event = point;
    return anchor.at;
  }

 private:
  std::mutex mutex_;
  std::map<int, Anchor> anchors_;
};

}  // namespace engram::parallel
