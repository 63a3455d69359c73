#include "bench/BatchSearch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace engram::bench {
namespace {

/// A device on which batches up to `fits` train.
struct Device {
  long fits;
  std::vector<long> tried;
  bool operator()(long batch) {
    tried.push_back(batch);
    return batch <= fits;
  }
};

TEST(BatchSearchTest, DoublesThenBisectsToThePrecision) {
  Device d{700, {}};
  const BatchSearch s = largest_training_batch({64, 4096, 0.125}, std::ref(d));
  // 64, 128, 256, 512 train, 1024 fails; then 768 fails, 640 trains, 704 fails: 704 - 640 = 64
  // <= 0.125 * 640.
  EXPECT_EQ(d.tried, (std::vector<long>{64, 128, 256, 512, 1024, 768, 640, 704}));
  EXPECT_EQ(s.largest, 640);
  EXPECT_EQ(s.smallest_failed, 704);
  ASSERT_EQ(s.trials.size(), d.tried.size());
  EXPECT_TRUE(s.trials[3].trained);
  EXPECT_FALSE(s.trials[4].trained);
}

TEST(BatchSearchTest, PrecisionZeroFindsTheExactBatch) {
  for (const long fits : {1L, 2L, 37L, 100L, 255L, 256L, 257L}) {
    Device d{fits, {}};
    const BatchSearch s = largest_training_batch({8, 4096, 0}, std::ref(d));
    EXPECT_EQ(s.largest, fits);
    EXPECT_EQ(s.smallest_failed, fits + 1);
  }
}

TEST(BatchSearchTest, HalvesWhenTheStartFailsAndReportsNoneWhenNothingTrains) {
  Device d{5, {}};
  BatchSearch s = largest_training_batch({64, 4096, 0}, std::ref(d));
  EXPECT_EQ(s.largest, 5);
  EXPECT_EQ((std::vector<long>(d.tried.begin(), d.tried.begin() + 5)),
            (std::vector<long>{64, 32, 16, 8, 4}));
  Device none{0, {}};
  s = largest_training_batch({4, 4096, 0}, std::ref(none));
  EXPECT_EQ(s.largest, 0);
  EXPECT_EQ(s.smallest_failed, 1);
  EXPECT_EQ(none.tried, (std::vector<long>{4, 2, 1}));
}

TEST(BatchSearchTest, StopsAtTheLimitWhenEverythingTrains) {
  Device d{1 << 20, {}};
  const BatchSearch s = largest_training_batch({100, 1000, 0.125}, std::ref(d));
  EXPECT_EQ(d.tried, (std::vector<long>{100, 200, 400, 800, 1000}));
  EXPECT_EQ(s.largest, 1000);
  EXPECT_EQ(s.smallest_failed, 0);
}

/// A device whose allocator holds `fixed + per_example * batch` bytes at a batch, and on which
/// batches up to `fits` train; it reports `reported_per_example` per example, which a real
/// allocator's rounding and caching make differ from what fits.
struct MemoryDevice {
  long fits;
  std::int64_t fixed, reported_per_example;
  std::vector<long> tried;
  TrialOutcome operator()(long batch) {
    tried.push_back(batch);
    if (batch > fits) return false;
    return {true, fixed + reported_per_example * batch};
  }
};

TEST(BatchSearchTest, AimedAtTheCapTheSearchTakesFourTrialsWhereMemoryIsAStraightLine) {
  // 1000 + 10 * batch bytes under a cap of 8000: batch 700 holds the cap. 64 and 128 train and
  // draw the line, which names 700; it trains, 787 (700 + 12.5%) does not, and the search ends.
  MemoryDevice d{700, 1000, 10, {}};
  const BatchSearch s = largest_training_batch({64, 4096, 0.125, 8000}, std::ref(d));
  EXPECT_EQ(d.tried, (std::vector<long>{64, 128, 700, 787}));
  EXPECT_EQ(s.largest, 700);
  EXPECT_EQ(s.smallest_failed, 787);
  ASSERT_EQ(s.trials.size(), 4u);
  EXPECT_FALSE(s.trials[1].aimed);
  EXPECT_TRUE(s.trials[2].aimed);
  EXPECT_EQ(s.trials[2].held_bytes, 8000);
  EXPECT_EQ(s.trials[3].held_bytes, 0);  // it did not train
  // Unaimed (no cap), the same device takes the eight trials of doubling and bisection.
  MemoryDevice doubling{700, 1000, 10, {}};
  EXPECT_EQ(largest_training_batch({64, 4096, 0.125}, std::ref(doubling)).trials.size(), 8u);
}

TEST(BatchSearchTest, ALineThatFallsShortOfWhatTrainsGivesWayToDoubling) {
  // Twice what fits is reported: the line names 350, which trains, and so does 393 above it;
  // doubling from there fails at 786, and bisection finds 687.
  MemoryDevice d{700, 1000, 20, {}};
  const BatchSearch s = largest_training_batch({64, 4096, 0.125, 8000}, std::ref(d));
  EXPECT_EQ(d.tried, (std::vector<long>{64, 128, 350, 393, 786, 589, 687, 736}));
  EXPECT_EQ(s.largest, 687);
  EXPECT_EQ(s.smallest_failed, 736);
  EXPECT_FALSE(s.trials[4].aimed);
}

TEST(BatchSearchTest, ALineThatOvershootsIsBisectedBack) {
  // Half of what fits is reported: the line names 1400, which fails; bisection from 128.
  MemoryDevice d{700, 1000, 5, {}};
  const BatchSearch s = largest_training_batch({64, 4096, 0.125, 8000}, std::ref(d));
  EXPECT_EQ(d.tried, (std::vector<long>{64, 128, 1400, 764, 446, 605, 684}));
  EXPECT_EQ(s.largest, 684);
  EXPECT_EQ(s.smallest_failed, 764);
  // The limit bounds an aimed batch as a doubled one.
  MemoryDevice bounded{700, 1000, 5, {}};
  EXPECT_EQ(largest_training_batch({64, 1000, 0.125, 8000}, std::ref(bounded)).trials[2].batch,
            1000);
}

TEST(BatchSearchTest, APriorSlopeAimsFromTheFirstBatchWhereDoublingWouldOvershoot) {
  // A row starting at 600, near the cap (batch 700). Doubling: 1200, 900 and 750 fail before
  // 675 trains.
  MemoryDevice doubling{700, 1000, 10, {}};
  EXPECT_EQ(largest_training_batch({600, 4096, 0.125, 8000}, std::ref(doubling)).largest, 675);
  EXPECT_EQ(doubling.tried, (std::vector<long>{600, 1200, 900, 750, 675}));
  // The slope of an earlier row (10 bytes per example) names 700 from 600's 7000 bytes; it
  // trains, the row's own line names 700 again, and 787 (700 + 12.5%) fails.
  MemoryDevice d{700, 1000, 10, {}};
  BatchSearchOptions o{600, 4096, 0.125, 8000};
  o.prior_bytes_per_example = 10;
  const BatchSearch s = largest_training_batch(o, std::ref(d));
  EXPECT_EQ(d.tried, (std::vector<long>{600, 700, 787}));
  EXPECT_EQ(s.largest, 700);
  EXPECT_TRUE(s.trials[1].aimed);
  // A prior flatter than the row's own slope overshoots, and bisection brings the search back.
  MemoryDevice flatter{700, 1000, 10, {}};
  o.prior_bytes_per_example = 5;
  EXPECT_EQ(largest_training_batch(o, std::ref(flatter)).largest, 700);
  EXPECT_EQ(flatter.tried, (std::vector<long>{600, 800, 700, 750}));
  // A steeper one falls short: its batch trains and gives the row its own line.
  MemoryDevice steeper{700, 1000, 10, {}};
  o.start = 128;
  o.prior_bytes_per_example = 20;
  EXPECT_EQ(largest_training_batch(o, std::ref(steeper)).largest, 700);
  EXPECT_EQ(steeper.tried, (std::vector<long>{128, 414, 700, 787}));
}

TEST(BatchSearchTest, WithoutWhatTrialsHeldAnAimedSearchDoubles) {
  Device d{700, {}};
  const BatchSearch s = largest_training_batch({64, 4096, 0.125, 8000}, std::ref(d));
  EXPECT_EQ(d.tried, (std::vector<long>{64, 128, 256, 512, 1024, 768, 640, 704}));
  for (const BatchTrial& t : s.trials) EXPECT_FALSE(t.aimed);
}

TEST(BatchSearchTest, TheBatchAtTheCapIsOnTheLineThroughTheTwoLargestThatTrained) {
  using T = BatchTrial;
  EXPECT_EQ(batch_at_cap({}, 8000), 0);
  EXPECT_EQ(batch_at_cap({T{64, true, 1640}}, 8000), 0);  // one point draws no line
  EXPECT_EQ(batch_at_cap({T{64, true, 1640}, T{128, true, 2280}}, 8000), 700);
  // The two largest that trained and held memory, in any order: not 16, not 1024 (failed), not
  // 512 (held nothing known).
  EXPECT_EQ(batch_at_cap({T{128, true, 2280}, T{16, true, 9999}, T{1024, false, 0},
                          T{512, true, 0}, T{64, true, 1640}},
                         8000),
            700);
  EXPECT_EQ(batch_at_cap({T{64, true, 2000}, T{128, true, 2000}}, 8000), 0);  // flat
  EXPECT_EQ(batch_at_cap({T{64, true, 3000}, T{128, true, 2000}}, 8000), 0);  // falling
  // Above the cap already at the larger batch: the line's batch is below it, at least 1, else
  // none.
  EXPECT_EQ(batch_at_cap({T{64, true, 7000}, T{128, true, 9000}}, 8000), 96);
  EXPECT_EQ(batch_at_cap({T{1, true, 9000}, T{2, true, 10000}}, 8000), 0);
  // One batch draws a line only with a prior slope; two ignore it.
  EXPECT_EQ(batch_at_cap({T{600, true, 7000}}, 8000, 10), 700);
  EXPECT_EQ(batch_at_cap({T{600, true, 7000}, T{32, false, 0}}, 8000, 0), 0);
  EXPECT_EQ(batch_at_cap({T{64, true, 1640}, T{128, true, 2280}}, 8000, 1), 700);
  EXPECT_EQ(bytes_per_example({T{64, true, 1640}, T{128, true, 2280}}), 10.0);
  EXPECT_EQ(bytes_per_example({T{64, true, 1640}}), 0.0);
  EXPECT_EQ(bytes_per_example({T{64, true, 3000}, T{128, true, 2280}}), 0.0);
}

TEST(BatchSearchTest, OptionsOutOfRangeAreRefused) {
  Device d{10, {}};
  EXPECT_THROW(largest_training_batch({0, 10, 0.1}, std::ref(d)), std::invalid_argument);
  EXPECT_THROW(largest_training_batch({20, 10, 0.1}, std::ref(d)), std::invalid_argument);
  EXPECT_THROW(largest_training_batch({1, 10, -1}, std::ref(d)), std::invalid_argument);
  EXPECT_THROW(largest_training_batch({1, 10, 0.1, -1}, std::ref(d)), std::invalid_argument);
  EXPECT_THROW(largest_training_batch({1, 10, std::numeric_limits<double>::infinity()},
                                      std::ref(d)),
               std::invalid_argument);
  BatchSearchOptions negative_prior{1, 10, 0.1, 100};
  negative_prior.prior_bytes_per_example = -1;
  EXPECT_THROW(largest_training_batch(negative_prior, std::ref(d)), std::invalid_argument);
  EXPECT_TRUE(d.tried.empty());
}

TEST(BatchSearchTest, ATimeLimitCutsTheSearchKeepingWhatTheTrialsShowed) {
  // Three trials allowed: 64 and 128 train, 256 does not; the bisection is cut before 192.
  Device d{150, {}};
  int asked = 0;
  BatchSearchOptions o{64, 4096, 0.125};
  o.may_go_on = [&] { return ++asked <= 3; };
  const BatchSearch s = largest_training_batch(o, std::ref(d));
  EXPECT_EQ(d.tried, (std::vector<long>{64, 128, 256}));
  EXPECT_TRUE(s.cut);
  EXPECT_EQ(s.largest, 128);
  EXPECT_EQ(s.smallest_failed, 256);
  EXPECT_EQ(s.trials.size(), 3u);
  // No time at all: nothing tried, nothing known.
  Device none{150, {}};
  o.may_go_on = [] { return false; };
  const BatchSearch nothing = largest_training_batch(o, std::ref(none));
  EXPECT_TRUE(nothing.cut && none.tried.empty());
  EXPECT_EQ(nothing.largest, 0);
  EXPECT_EQ(nothing.smallest_failed, 0);
  // Time enough: the search as without a limit, not cut.
  Device all{150, {}};
  o.may_go_on = [] { return true; };
  const BatchSearch whole = largest_training_batch(o, std::ref(all));
  EXPECT_FALSE(whole.cut);
  EXPECT_EQ(whole.largest, 144);
}

TEST(BatchSearchTest, ErrorsThatSayTheDeviceRanOutOfMemoryAreToldFromBugs) {
  // What ATen, cuDNN, cuBLAS and the CUDA runtime say when an allocation of their own fails.
  for (const char* oom :
       {"GET was unable to find an engine to execute this computation",
        "FIND was unable to find an engine to execute this computation after trying 8 plans.",
        "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
        "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED",
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported"})
    EXPECT_TRUE(says_out_of_memory(oom)) << oom;
  for (const char* bug : {"CUDA error: an illegal memory access was encountered",
                          "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED",
                          "Expected all tensors to be on the same device, but found cuda:0 and cpu",
                          ""})
    EXPECT_FALSE(says_out_of_memory(bug)) << bug;
}

}  // namespace
}  // namespace engram::bench
