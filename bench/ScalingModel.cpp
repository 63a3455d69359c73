#include "bench/ScalingModel.h"

#include "bench/BenchSupport.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "parallel/LinkModel.h"
#include "parallel/OooPlan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <vector>

namespace engram::bench {
namespace {

using json = nlohmann::json;

constexpr double kBucketBytes = 25.0 * (1 << 20);  // DDP's bucket, which carries one latency

struct Link {
  std::string name;
  double bandwidth;  ///< bytes per second each way per GPU
  double hop_latency;
  std::vector<int> gpus;
};

const std::vector<Link>& links() {
  static const std::vector<Link> all{{"NVLink 4 (one node)", 450e9, 1e-6, {8}},
                                     {"100 Gb/s", 12.5e9, 5e-6, {64, 512}},
                                     {"400 Gb/s", 50e9, 5e-6, {64, 512}}};
  return all;
}

/// One profiled run: the model's layers in forward order, and the step outside them.
struct Profile {
  std::string workload;
  long batch = 0;
  std::string device;
  double measured_step = 0;  ///< the median one-stream step, seconds
  double step = 0, forward = 0, backward = 0;
  std::vector<parallel::BackwardSegment> segments;  ///< backward order
  double tail = 0;
};

Profile read_profile(const json& run) {
  Profile p;
  try {
    if (run.at("benchmark") != "streams") throw FormatError("not a `bench streams` run");
    p.workload = run.at("workload").get<std::string>();
    p.batch = run.at("batch").get<long>();
    p.device = run.at("device").get<std::string>();
    p.measured_step = run.at("one_stream_step_ms").get<double>() / 1e3;
    const json& prof = run.at("profile");
    p.step = prof.at("step_ms").get<double>() / 1e3;
    p.forward = prof.at("forward_ms").get<double>() / 1e3;
    p.backward = prof.at("backward_ms").get<double>() / 1e3;
    p.tail = prof.at("tail_chain_ms").get<double>() / 1e3;
    for (const json& s : prof.at("segments_ms")) {
      // A negative count would wrap to an enormous one.
      if (!s.at(2).is_number_unsigned())
        throw FormatError("bench scale: a segment's gradient bytes are " + s.at(2).dump() +
                          ", not a count");
      p.segments.push_back({s.at(0).get<double>() / 1e3, s.at(1).get<double>() / 1e3,
                            s.at(2).get<std::size_t>()});
    }
  } catch (const json::exception& e) {
    throw FormatError(std::string("bench scale: the input is not a `bench streams` profile (") +
                      e.what() + ")");
  }
  if (p.segments.empty()) throw FormatError("bench scale: the profile has no weight-gradient task");
  // Times a step is made of, measured: a zero step would divide the one-GPU check by zero, a
  // negative or infinite time would give predictions of nothing real.
  const auto time = [](double seconds, const char* what, bool positive) {
    if (!std::isfinite(seconds) || seconds < 0 || (positive && seconds == 0))
      throw FormatError(std::string("bench scale: the profile's ") + what + " is " +
                        std::to_string(seconds * 1e3) + " ms, not a" +
                        (positive ? " positive" : " non-negative") + " time");
  };
  time(p.measured_step, "one_stream_step_ms", true);
  time(p.step, "step_ms", true);
  time(p.forward, "forward_ms", false);
  time(p.backward, "backward_ms", false);
  time(p.tail, "tail_chain_ms", false);
  for (const auto& s : p.segments) {
    time(s.chain, "segments_ms chain", false);
    time(s.weight_grad, "segments_ms weight-gradient time", false);
  }
  return p;
}

/// The model's layers, forward order, for `gpus` over `link` (gpus 1: no exchange).
std::vector<parallel::LayerCost> layers_of(const Profile& p, int gpus, const Link* link) {
  std::vector<parallel::LayerCost> layers;
  double chains = p.tail;
  std::size_t total_bytes = 0;
  for (const auto& s : p.segments) {
    chains += s.chain;
    total_bytes += s.bytes;
  }
  const double latency_per_byte =
      link == nullptr ? 0
                      : 2.0 * (gpus - 1) * link->hop_latency *
                            std::ceil(static_cast<double>(total_bytes) / kBucketBytes) /
                            static_cast<double>(std::max<std::size_t>(total_bytes, 1));
  auto cost = [&](double chain, double weight_grad, std::size_t bytes) {
    parallel::LayerCost c;
    c.forward = chains > 0 ? p.forward * chain / chains : 0;
    c.input_grad = chain;
    c.weight_grad = weight_grad;
    if (link != nullptr && gpus > 1) {
      const parallel::LinkModel model{link->bandwidth, 0, /*payload_share=*/1.0};
      c.allreduce = model.allreduce_seconds(bytes, gpus) + latency_per_byte * bytes;
    }
    return c;
  };
  // Backward order is the reverse of forward order; the tail (after the last task) is nearest
  // the input.
  layers.push_back(cost(p.tail, 0, 0));
  for (auto s = p.segments.rbegin(); s != p.segments.rend(); ++s)
    layers.push_back(cost(s->chain, s->weight_grad, s->bytes));
  return layers;
}

}  // namespace

void run_scaling_model(const ScalingOptions& o, std::ostream& out) {
  if (o.from_path.empty()) throw InvalidOption("from_path", "is required");
  if (o.json_path.empty()) throw InvalidOption("json_path", "is required");
  check_writable(o.json_path);
  std::ifstream in(o.from_path);
  if (!in) throw std::runtime_error("bench scale: cannot read '" + o.from_path + "'");
  json input;
  try {
    input = json::parse(in);
  } catch (const json::exception& e) {
    throw FormatError("bench scale: " + o.from_path + " is not JSON (" + e.what() + ")");
  }
  std::vector<Profile> profiles;
  if (input.contains("runs")) {
    for (const json& run : input.at("runs")) profiles.push_back(read_profile(run));
  } else {
    profiles.push_back(read_profile(input));
  }
  json assumptions = json::array();
  for (const Link& l : links())
    assumptions.push_back({{"link", l.name},
                           {"bandwidth_bytes_per_second", l.bandwidth},
                           {"hop_latency_seconds", l.hop_latency},
                           {"gpus", l.gpus}});
  json predictions = json::array(), checks = json::array();
  out << std::left << std::setw(10) << "workload" << std::setw(7) << "batch" << std::setw(22)
      << "link" << std::right << std::setw(6) << "GPUs" << std::setw(11) << "after ms"
      << std::setw(12) << "overlap ms" << std::setw(9) << "ooo ms" << std::setw(4) << "k"
      << std::setw(13) << "ooo scaling\n";
  for (const Profile& p : profiles) {
    const double outside = p.step - p.forward - p.backward;  // batch, clip, optimizer
    const double one = parallel::predict_ooo_step(layers_of(p, 1, nullptr), 0) + outside;
    checks.push_back({{"workload", p.workload},
                      {"batch", p.batch},
                      {"device", p.device},
                      {"predicted_step_ms", one * 1e3},
                      {"measured_step_ms", p.measured_step * 1e3},
                      {"error", std::abs(one - p.measured_step) / p.measured_step}});
    for (const Link& link : links()) {
      for (int gpus : link.gpus) {
        const auto layers = layers_of(p, gpus, &link);
        double bytes = 0, exchange = 0;
        for (const auto& s : p.segments) bytes += static_cast<double>(s.bytes);
        for (const auto& l : layers) exchange += l.allreduce;
        const double after = one + exchange;
        const double overlap = parallel::predict_ooo_step(layers, 0) + outside;
        const std::size_t k = parallel::choose_ooo_k(layers);
        const double ooo = parallel::predict_ooo_step(layers, k) + outside;
        predictions.push_back({{"workload", p.workload},
                               {"batch_per_gpu", p.batch},
                               {"link", link.name},
                               {"gpus", gpus},
                               {"gradient_bytes", bytes},
                               {"exchange_ms", exchange * 1e3},
                               {"after_step_ms", after * 1e3},
                               {"overlap_step_ms", overlap * 1e3},
                               {"ooo_step_ms", ooo * 1e3},
                               {"ooo_k", k},
                               {"ooo_layers", layers.size()},
                               {"ooo_scaling_efficiency", one / ooo}});
        out << std::left << std::setw(10) << p.workload << std::setw(7) << p.batch
            << std::setw(22) << link.name << std::right << std::setw(6) << gpus << std::setw(11)
            << fixed(after * 1e3, 2) << std::setw(12) << fixed(overlap * 1e3, 2) << std::setw(9)
            << fixed(ooo * 1e3, 2) << std::setw(4) << k << std::setw(12)
            << fixed(one / ooo, 3) << "\n";
      }
    }
  }
  json report{{"benchmark", "scale"},
              {"from", o.from_path},
              {"links", assumptions},
              {"one_gpu_check", checks},
              {"predictions", predictions}};
  if (input.contains("commit")) report["from_commit"] = input["commit"];
  if (input.contains("machine")) report["from_machine"] = input["machine"];
  write_file_atomically(o.json_path, report.dump(2) + "\n");
  for (const json& c : checks)
    out << c["workload"].get<std::string>() << " batch " << c["batch"].get<long>()
        << ": one GPU predicted " << fixed(c["predicted_step_ms"].get<double>(), 2)
        << " ms, measured " << fixed(c["measured_step_ms"].get<double>(), 2) << " ms (error "
        << fixed(100 * c["error"].get<double>(), 1) << "%)\n";
  out << "wrote " << o.json_path << "\n";
}

}  // namespace engram::bench
