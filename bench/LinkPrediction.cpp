#include "bench/LinkPrediction.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace engram::bench {

double predict_step_seconds(const std::vector<LinkPoint>& fit, double bandwidth) {
  if (!(bandwidth > 0)) throw std::invalid_argument("predict_step_seconds: bandwidth must be > 0");
  // (x, step) with x = 1 / bandwidth, sorted; one point per x.
  std::vector<std::pair<double, double>> points;
  for (const LinkPoint& p : fit) {
    if (p.bandwidth < 0) throw std::invalid_argument("predict_step_seconds: negative bandwidth");
    points.emplace_back(p.bandwidth > 0 ? 1 / p.bandwidth : 0, p.step_seconds);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               points.end());
  if (points.size() < 2)
    throw std::invalid_argument("predict_step_seconds: needs at least two different links");
  const double x = 1 / bandwidth;
  // The segment that holds x, or the nearest one at either end.
  std::size_t i = 1;
  while (i + 1 < points.size() && points[i].first < x) ++i;
  const auto line_at = [&](std::size_t a, std::size_t b) {
    const auto& [xa, ya] = points[a];
    const auto& [xb, yb] = points[b];
    return ya + (yb - ya) * (x - xa) / (xb - xa);
  };
  double y = line_at(i - 1, i);  // the chord
  const bool inside = points[i - 1].first <= x && x <= points[i].first;
  if (inside && i >= 2 && i + 1 < points.size()) {
    // A convex function lies under its chord and over its neighbouring segments extended.
    const double below = std::max(line_at(i - 2, i - 1), line_at(i, i + 1));
    if (below < y) y = (y + below) / 2;
  }
  return std::max(y, points.front().second);
}

}  // namespace engram::bench
