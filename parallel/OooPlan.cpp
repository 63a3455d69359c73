#include "parallel/OooPlan.h"

#include <algorithm>
#include <stdexcept>

namespace engram::parallel {

double predict_ooo_step(const std::vector<LayerCost>& layers, std::size_t k) {
  const std::size_t n = layers.size();
  if (k > n) throw std::invalid_argument("predict_ooo_step: k is more than the layers");
  double t = 0;          // the compute thread, from this backward's start
  double link_free = 0;  // when the link has carried every collective launched so far
  double busy = 0;       // the link's busy time in the step
  double last_blocking = 0;
  auto send = [&](double ready, double seconds) {
    link_free = std::max(link_free, ready) + seconds;
    busy += seconds;
    return link_free;
  };
  for (std::size_t j = n; j-- > 0;) {
    t += layers[j].input_grad;
    if (j >= k) {
      t += layers[j].weight_grad;
      last_blocking = send(t, layers[j].allreduce);
    }
  }
  std::vector<double> arrived(k);
  for (std::size_t j = 0; j < k; ++j) {
    t += layers[j].weight_grad;
    arrived[j] = send(t, layers[j].allreduce);
  }
  // The step ends when backward is done and the non-deferred collectives have arrived; then the
  // next forward, each deferred layer waiting for its own collective.
  t = std::max(t, last_blocking);
  for (std::size_t j = 0; j < n; ++j) {
    if (j < k) t = std::max(t, arrived[j]);
    t += layers[j].forward;
  }
  return std::max(t, busy);
}

std::size_t choose_ooo_k(const std::vector<LayerCost>& layers, double margin) {
  std::vector<double> times;
  for (std::size_t k = 0; k <= layers.size(); ++k) times.push_back(predict_ooo_step(layers, k));
  const double fastest = *std::min_element(times.begin(), times.end());
  std::size_t k = 0;
  while (times[k] > fastest * (1 + margin)) ++k;
  return k;
}

double predict_two_stream_backward(const std::vector<BackwardSegment>& segments,
                                   double tail_chain, double interference) {
  if (!(interference >= 0 && interference <= 1))
    throw std::invalid_argument("predict_two_stream_backward: interference outside [0, 1]");
  double chain = 0, side = 0, one_stream = tail_chain;
  for (const auto& s : segments) {
    chain += s.chain;
    side = std::max(side, chain) + s.weight_grad;
    one_stream += s.chain + s.weight_grad;
  }
  const double two_streams = std::max(chain + tail_chain, side);
  return two_streams + interference * (one_stream - two_streams);
}

}  // namespace engram::parallel
