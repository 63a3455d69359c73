#include "memory/detail/StreamUses.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

namespace engram::memory::detail {
namespace {

/// Stand-ins for CUDA streams and events: each stream counts the events recorded on it and how
/// many it has passed; an event has completed once its stream has passed it.
struct Stream {
  int id = 0;
  bool operator==(const Stream& other) const { return id == other.id; }
};

struct Progress {
  std::map<int, int> recorded;  ///< events recorded, by stream
  std::map<int, int> passed;    ///< events the stream has passed
};

struct Event {
  const Progress* progress = nullptr;
  int stream = 0;
  int number = 0;  ///< the stream's n-th event, from 1
  bool query() const {
    const auto it = progress->passed.find(stream);
    return it != progress->passed.end() && it->second >= number;
  }
};

class StreamUsesTest : public ::testing::Test {
 protected:
  /// The release of `offset`, recording the events it needs on `progress_`.
  bool release(std::int64_t offset) {
    return uses_.release(offset, [this](const Stream& s) {
      return Event{&progress_, s.id, ++progress_.recorded[s.id]};
    });
  }
  /// The offsets poll() hands on now, in order.
  std::vector<std::int64_t> poll() {
    std::vector<std::int64_t> vacated;
    uses_.poll([&](std::int64_t offset) { vacated.push_back(offset); });
    return vacated;
  }
  /// Stream `id` has passed everything recorded on it.
  void catch_up(int id) { progress_.passed[id] = progress_.recorded[id]; }
  int events_recorded() const {
    int n = 0;
    for (const auto& [stream, count] : progress_.recorded) n += count;
    return n;
  }

  StreamUses<Stream, Event> uses_;
  Progress progress_;
  const Stream compute_{1};
  const Stream copy_{2};
  const Stream comm_{3};
};

TEST_F(StreamUsesTest, ABlockOnlyItsOwnStreamUsedIsFreeAtOnceWithoutEvents) {
  uses_.served(0, compute_);
  uses_.used(0, compute_);  // recordStream on the serving stream: ordered already
  EXPECT_TRUE(release(0));
  EXPECT_EQ(events_recorded(), 0);
  EXPECT_EQ(uses_.pending(), 0u);
  EXPECT_TRUE(poll().empty());
}

TEST_F(StreamUsesTest, ABlockAnotherStreamUsedWaitsUntilThatStreamPassesItsRelease) {
  uses_.served(512, compute_);
  uses_.used(512, copy_);
  uses_.used(512, copy_);  // noted once
  EXPECT_FALSE(release(512));
  EXPECT_EQ(progress_.recorded[copy_.id], 1);
  EXPECT_EQ(progress_.recorded[compute_.id], 0);  // the serving stream needs no event
  EXPECT_EQ(uses_.pending(), 1u);
  EXPECT_TRUE(poll().empty());
  catch_up(compute_.id);
  EXPECT_TRUE(poll().empty()) << "the serving stream's progress frees nothing";
  catch_up(copy_.id);
  EXPECT_EQ(poll(), std::vector<std::int64_t>{512});
  EXPECT_EQ(uses_.pending(), 0u);
  EXPECT_TRUE(poll().empty()) << "vacated once";
}

TEST_F(StreamUsesTest, EveryOtherStreamMustPass) {
  uses_.served(0, compute_);
  uses_.used(0, copy_);
  uses_.used(0, comm_);
  EXPECT_FALSE(release(0));
  EXPECT_EQ(events_recorded(), 2);
  catch_up(copy_.id);
  EXPECT_TRUE(poll().empty());
  catch_up(comm_.id);
  EXPECT_EQ(poll(), std::vector<std::int64_t>{0});
}

TEST_F(StreamUsesTest, ReleasesAreHandedOnAsTheirStreamsPassNotInReleaseOrder) {
  uses_.served(0, compute_);
  uses_.used(0, copy_);
  uses_.served(1024, compute_);
  uses_.used(1024, comm_);
  EXPECT_FALSE(release(0));
  EXPECT_FALSE(release(1024));
  catch_up(comm_.id);
  EXPECT_EQ(poll(), std::vector<std::int64_t>{1024});
  EXPECT_EQ(uses_.pending(), 1u);
  catch_up(copy_.id);
  EXPECT_EQ(poll(), std::vector<std::int64_t>{0});
}

TEST_F(StreamUsesTest, AnEventRecordedBeforeTheReleaseDoesNotFreeIt) {
  // The copy stream passed an earlier event; the release's event is a later one.
  progress_.recorded[copy_.id] = 3;
  catch_up(copy_.id);
  uses_.served(0, compute_);
  uses_.used(0, copy_);
  EXPECT_FALSE(release(0));
  EXPECT_TRUE(poll().empty());
  catch_up(copy_.id);
  EXPECT_EQ(poll(), std::vector<std::int64_t>{0});
}

TEST_F(StreamUsesTest, ABlockServedAgainForgetsTheUsesOfItsLastLife) {
  uses_.served(0, compute_);
  uses_.used(0, copy_);
  EXPECT_FALSE(release(0));
  catch_up(copy_.id);
  EXPECT_EQ(poll(), std::vector<std::int64_t>{0});
  uses_.served(0, compute_);
  EXPECT_TRUE(release(0)) << "the copy stream used the block's last life, not this one";
}

TEST_F(StreamUsesTest, TheStreamThatServedTheBlockLastIsItsOwn) {
  uses_.served(0, compute_);
  EXPECT_TRUE(release(0));
  uses_.served(0, copy_);  // the next step runs on another stream
  uses_.used(0, copy_);
  EXPECT_TRUE(release(0));
  uses_.served(0, copy_);
  uses_.used(0, compute_);
  EXPECT_FALSE(release(0)) << "the first stream is another stream now";
}

}  // namespace
}  // namespace engram::memory::detail
