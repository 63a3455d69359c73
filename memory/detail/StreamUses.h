#pragma once
/// \file
/// The stream-order rule of memory/DeviceArenaReuse.h without CUDA, so that it is tested on any
/// machine: which stream served each arena block, which other streams used it (recordStream),
/// and the blocks released while such a stream may still be using them. A block used only on the
/// stream that served it may be served again at once, since later work on that stream runs after
/// its last use; one that other streams used waits for an event recorded on each of them at its
/// release. Its owner holds the lock.
///
/// `Stream` is copyable and equality-comparable (c10::cuda::CUDAStream); `Event` is movable and
/// has `bool query() const`, true once the stream it was recorded on has passed it
/// (c10::cuda::CUDAEvent).
///
/// \code
///   detail::StreamUses<CUDAStream, CUDAEvent> uses;
///   uses.served(offset, stream);              // the arena block at `offset` served on `stream`
///   uses.used(offset, other);                 // recordStream(block, other)
///   if (uses.release(offset, record_on))      // record_on(stream) -> an event recorded there
///     sequence.vacate(offset);                // no other stream: its bytes are free now
///   uses.poll([&](std::int64_t o) { sequence.vacate(o); });  // the others, once passed
/// \endcode

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace engram::memory::detail {

template <class Stream, class Event>
class StreamUses {
 public:
  /// The block at `offset` was served on `stream` (a block served again replaces the last).
  void served(std::int64_t offset, const Stream& stream) {
    served_on_.insert_or_assign(offset, stream);
  }

  /// `stream` used the block at `offset`: nothing when it is the serving stream or one already
  /// noted.
  void used(std::int64_t offset, const Stream& stream) {
    const auto served = served_on_.find(offset);
    if (served != served_on_.end() && served->second == stream) return;
    auto& streams = used_on_[offset];
    for (const auto& known : streams)
      if (known == stream) return;
    streams.push_back(stream);
  }

  /// The block at `offset` was released. True when its bytes may be served again at once (no
  /// other stream used it); otherwise `record_on(stream)` makes an event on each stream that used
  /// it, and poll() hands the offset on once every one has passed.
  template <class RecordOn>
  bool release(std::int64_t offset, RecordOn&& record_on) {
    served_on_.erase(offset);
    const auto used = used_on_.find(offset);
    if (used == used_on_.end()) return true;
    Pending p;
    p.offset = offset;
    for (const auto& stream : used->second) p.events.push_back(record_on(stream));
    used_on_.erase(used);
    pending_.push_back(std::move(p));
    return false;
  }

  /// Calls `vacate(offset)` for every released block whose streams have all passed their events,
  /// in the order they were released, and forgets it.
  template <class Vacate>
  void poll(Vacate&& vacate) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool passed = true;
      for (const auto& e : it->events) passed = passed && e.query();
      if (!passed) {
        ++it;
        continue;
      }
      const std::int64_t offset = it->offset;
      it = pending_.erase(it);
      vacate(offset);
    }
  }

  /// Released blocks still waiting for another stream.
  std::size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    std::int64_t offset = 0;
    std::vector<Event> events;
  };
  std::map<std::int64_t, Stream> served_on_;
  std::map<std::int64_t, std::vector<Stream>> used_on_;
  std::vector<Pending> pending_;
};

}  // namespace engram::memory::detail
