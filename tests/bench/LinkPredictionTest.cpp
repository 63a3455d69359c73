#include "bench/LinkPrediction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

TEST(LinkPrediction, BetweenTwoMeasuredSegmentsTheMiddleOfTheConvexBounds) {
  std::vector<LinkPoint> fit;
  for (double b : {0.0, 1.25e9, 1.25e8, 2.5e7, 1.25e7}) fit.push_back({b, step_on(b)});
  // 400 Mb/s (x = 2e-8) between 1.25e8 (x = 8e-9, 0.4 s) and 2.5e7 (x = 4e-8, 1.54 s): the chord
  // says 0.8275; the segment beyond, 2.5e7 to 1.25e7 (2.98 s), extended back says 0.82, the
  // segment before (flat at 0.4) says 0.4. The middle of 0.82 and 0.8275.
  const double predicted = predict_step_seconds(fit, 5e7);
  EXPECT_NEAR(predicted, (0.8275 + 0.82) / 2, 1e-9);
  EXPECT_LT(std::abs(predicted - step_on(5e7)) / step_on(5e7), 0.005);
  // A rounded knee (compute and communication partly overlapping) is under the chord as well.
  const auto rounded = [](double b) {
    const double compute = 0.4, link = b > 0 ? 0.1 + 3.6e7 / b : 0.1;
    return std::sqrt(compute * compute + link * link);
  };
  std::vector<LinkPoint> smooth;
  for (double b : {0.0, 1.25e9, 1.25e8, 2.5e7, 1.25e7}) smooth.push_back({b, rounded(b)});
  const double chord_error = std::abs(0.0 + rounded(1.25e8) +
                                      (rounded(2.5e7) - rounded(1.25e8)) * (2e-8 - 8e-9) / 3.2e-8 -
                                      rounded(5e7)) / rounded(5e7);
  const double error = std::abs(predict_step_seconds(smooth, 5e7) - rounded(5e7)) / rounded(5e7);
  EXPECT_LT(error, chord_error);
}

TEST(LinkPrediction, NeedsTwoLinksAndAPositiveTarget) {
  EXPECT_THROW(predict_step_seconds({{1e8, 1.0}}, 1e7), std::invalid_argument);
  EXPECT_THROW(predict_step_seconds({{1e8, 1.0}, {1e8, 1.2}}, 1e7), std::invalid_argument);
  EXPECT_THROW(predict_step_seconds({{0, 1.0}, {1e8, 1.2}}, 0), std::invalid_argument);
  EXPECT_THROW(predict_step_seconds({{-1, 1.0}, {1e8, 1.2}}, 1e7), std::invalid_argument);
}

}  // namespace
}  // namespace engram::bench
