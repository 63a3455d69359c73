#include "trainer/ProgressBar.h"

#include <cstdio>

namespace engram::trainer {

ProgressBar::ProgressBar(long total, bool enabled)
    : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()), last_(start_) {}

void ProgressBar::update(long done, double loss) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done != total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr int kWidth = 30;
  const double fraction = total_ > 0 ? static_cast<double>(done) / total_ : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = fraction > 0 ? elapsed / fraction - elapsed : 0;
  std::fprintf(stderr, "\r[");
  for (int i = 0; i < kWidth; ++i) std::fputc(i < filled ? '#' : '.', stderr);
  std::fprintf(stderr, "] %ld/%ld loss %.4f  %.0fs elapsed, %.0fs left ", done, total_, loss,
               elapsed, eta);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) std::fputc('\n', stderr);
}

}  // namespace engram::trainer
