#include "bench/StreamsBench.h"

#include "bench/BenchSupport.h"
#include "bench/MemoryBenchParts.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "parallel/OooPlan.h"
#include "trainer/BackwardProfile.h"
#include "trainer/Device.h"
#include "trainer/Trainer.h"

#include <c10/cuda/CUDAFunctions.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <vector>

namespace engram::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void validate(const StreamsBenchOptions& o) {
  if (o.json_path.empty()) throw InvalidOption("json_path", "is required");
  if (!detail::is_resnet(o.workload))
    throw InvalidOption("workload", "'" + o.workload + "' is not one of resnet, resnet50");
  if (o.batch < 0 || o.batch > 65536)
    throw InvalidOption("batch", "must be 0 (the workload's default) or 1..65536");
  if (o.warmup < 1) throw InvalidOption("warmup", "must be at least 1 (cuDNN's plans)");
  if (o.steps < 1) throw InvalidOption("steps", "must be at least 1");
  if (o.rounds < 1) throw InvalidOption("rounds", "must be at least 1");
  if (o.device == "cpu")
    throw InvalidOption("device",
                        "is cpu: the second stream is a CUDA stream (on the CPU, --ooo-threads 2 "
                        "and `bench npi` measure the second thread)");
}

}  // namespace

void run_streams_bench(const StreamsBenchOptions& o, std::ostream& out) {
  validate(o);
  check_writable(o.json_path);
  const c10::Device device = trainer::resolve_device(o.device);
  MemoryBenchOptions m;
  m.workload = o.workload;
  m.seed = o.seed;
  m.device = o.device;
  const long batch = o.batch > 0 ? o.batch : (o.workload == "resnet50" ? 64 : 256);
  detail::PreparedWorkload w = detail::make_resnet(m, batch);
  trainer::Workload& workload = *w.workload;
  workload.to_device(device);

  trainer::TrainingOptions to = detail::row_training_options(m, "none", batch);
  to.device = o.device;
  // A session's timed steps (each to the end of its kernels), after its warm-up.
  auto timed = [&](int streams, std::vector<double>& ms) {
    to.ooo_streams = streams;
    trainer::TrainingSession session(workload, to);
    for (long i = 0; i < o.warmup; ++i) session.step(w.batch);
    for (long i = 0; i < o.steps; ++i) {
      c10::cuda::device_synchronize();
      const auto start = Clock::now();
      session.step(w.batch);
      c10::cuda::device_synchronize();
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
  };
  std::vector<double> one, two;
  for (int r = 0; r < o.rounds; ++r) {
    timed(1, one);
    timed(2, two);
  }
  // The model's input: the backward's stretches on one stream.
  to.ooo_streams = 1;
  trainer::BackwardProfile profile;
  {
    trainer::TrainingSession session(workload, to);
    session.step(w.batch);
    profile = trainer::profile_backward(session, w.batch);
  }
  double chain = profile.tail_chain, weight_grads = 0;
  json segments = json::array();
  for (const auto& s : profile.segments) {
    chain += s.chain;
    weight_grads += s.weight_grad;
    segments.push_back({s.chain * 1e3, s.weight_grad * 1e3, s.bytes});
  }
  const double two_stream_backward =
      parallel::predict_two_stream_backward(profile.segments, profile.tail_chain);
  const double hidden_ms = (profile.backward_seconds - two_stream_backward) * 1e3;
  const double one_ms = median(one), two_ms = median(two);
  const double predicted_ms = one_ms - hidden_ms;
  json report{
      {"benchmark", "streams"},
      {"workload", o.workload},
      {"device", trainer::describe_device(device)},
      {"config", w.config},
      {"batch", batch},
      {"warmup", o.warmup},
      {"steps", o.steps},
      {"rounds", o.rounds},
      {"one_stream_step_ms", one_ms},
      {"two_streams_step_ms", two_ms},
      {"speedup", one_ms / two_ms},
      {"predicted_two_streams_step_ms", predicted_ms},
      {"predicted_speedup", one_ms / predicted_ms},
      {"prediction_error", std::abs(predicted_ms - two_ms) / two_ms},
      {"predicted_hidden_ms", hidden_ms},
      // What the second stream hid, as a share of what the model says it can.
      {"hidden_share", hidden_ms > 0 ? (one_ms - two_ms) / hidden_ms : 0.0},
      {"one_stream_step_ms_per_step", one},
      {"two_streams_step_ms_per_step", two},
      {"profile",
       {{"step_ms", profile.step_seconds * 1e3},
        {"forward_ms", profile.forward_seconds * 1e3},
        {"backward_ms", profile.backward_seconds * 1e3},
        {"chain_ms", chain * 1e3},
        {"weight_grad_ms", weight_grads * 1e3},
        {"tail_chain_ms", profile.tail_chain * 1e3},
        {"segments_ms", segments},
        {"segment_fields", {"chain_ms", "weight_grad_ms", "gradient_bytes"}}}},
      {"machine", machine_json()},
      {"versions", versions_json()}};
  write_file_atomically(o.json_path, report.dump(2) + "\n");
  out << o.workload << ", batch " << batch << ", " << report["device"].get<std::string>()
      << ": one stream " << fixed(one_ms, 2) << " ms, two streams " << fixed(two_ms, 2)
      << " ms (" << fixed(one_ms / two_ms, 3) << "x); the model predicts " << fixed(predicted_ms, 2)
      << " ms (" << fixed(one_ms / predicted_ms, 3) << "x): weight gradients "
      << fixed(weight_grads * 1e3, 2) << " of " << fixed(profile.backward_seconds * 1e3, 2)
      << " ms of backward, " << fixed(hidden_ms, 2) << " ms hideable\n";
  out << "wrote " << o.json_path << "\n";
}

}  // namespace engram::bench
