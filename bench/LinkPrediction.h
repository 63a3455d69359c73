#pragma once
/// \file
/// The link what-if of `engram bench dp --predict-link` (delay injection, as US10453167B1 and
/// US20200065214A1 describe it): the step time measured on a few emulated links is a function of
/// x = 1 / bandwidth (0 for the unthrottled link), roughly constant while compute dominates and
/// linear in x once the link does: convex, the larger of two lines with a rounded knee where
/// communication and compute overlap. Between two measured links the step lies under their chord
/// and over the neighbouring measured segments extended; with a measured segment on both sides
/// the prediction is the middle of those bounds (its error at most half their gap), else the
/// chord. Beyond the measured links it extrapolates along the nearest segment. Never below the
/// fastest link's step. Pure: no torch, no clock.
///
/// \code
///   std::vector<engram::bench::LinkPoint> fit{{0, 0.41}, {1.25e9, 0.46}, {1.25e8, 0.62}};
///   double t = engram::bench::predict_step_seconds(fit, 5e7);   // 400 Mb/s, not measured
/// \endcode

#include <vector>

namespace engram::bench {

/// One measured link: bytes per second (0: unthrottled) and the step time there.
struct LinkPoint {
  double bandwidth = 0;
  double step_seconds = 0;
};

/// The predicted step time on a link of `bandwidth` bytes per second (> 0) from `fit` (at least
/// two links of different bandwidth). Throws std::invalid_argument otherwise.
double predict_step_seconds(const std::vector<LinkPoint>& fit, double bandwidth);

}  // namespace engram::bench
