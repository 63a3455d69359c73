#include "bench/LinkPrediction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace engram::bench {
namespace {

/// A schedule whose step is compute (0.4 s) until the link carries 36 MB more slowly, as a ring
/// all-reduce of two ranks would: max(0.4, 0.1 + 3.6e7 / bandwidth).
double step_on(double bandwidth) {
  return bandwidth > 0 ? std::max(0.4, 0.1 + 3.6e7 / bandwidth) : 0.4;
}

TEST(LinkPrediction, InterpolatesAndExtrapolatesInOneOverBandwidth) {
  std::vector<LinkPoint> fit;
  for (double b : {0.0, 1.25e9, 1.25e8, 2.5e7}) fit.push_back({b, step_on(b)});
  // Between 1.25e8 (x = 8e-9, 0.4 s) and 2.5e7 (x = 4e-8, 1.54 s): a line in x.
  const double slope = (1.54 - 0.4) / (4e-8 - 8e-9);
  EXPECT_NEAR(predict_step_seconds(fit, 5e7), 0.4 + slope * (2e-8 - 8e-9), 1e-12);
  // Beyond the slowest measured link: along the last segment.
  EXPECT_NEAR(predict_step_seconds(fit, 1.25e7), 1.54 + slope * (8e-8 - 4e-8), 1e-12);
  // Within 2% of the true curve at both (the knee at 1e8 is what a line cannot follow).
  for (double target : {5e7, 1.25e7}) {
    const double truth = step_on(target);
    EXPECT_LT(std::abs(predict_step_seconds(fit, target) - truth) / truth, 0.02) << target;
  }
  // Faster than every measured link: never below the fastest one's step.
  EXPECT_DOUBLE_EQ(predict_step_seconds(fit, 1e12), 0.4);
}

TEST(LinkPrediction, NeedsTwoLinksAndAPositiveTarget) {
  EXPECT_THROW(predict_step_seconds({{1e8, 1.0}}, 1e7), std::invalid_argument);
  EXPECT_THROW(predict_step_seconds({{1e8, 1.0}, {1e8, 1.2}}, 1e7), std::invalid_argument);
  EXPECT_THROW(predict_step_seconds({{0, 1.0}, {1e8, 1.2}}, 0), std::invalid_argument);
  EXPECT_THROW(predict_step_seconds({{-1, 1.0}, {1e8, 1.2}}, 1e7), std::invalid_argument);
}

}  // namespace
}  // namespace engram::bench
