#include "bench/MemoryBench.h"

#include "bench/BenchSupport.h"
#include "bench/ResNetWorkload.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "datasets/TraceFile.h"
#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "npi/NpiData.h"
#include "npi/NpiModel.h"
#include "npi/NpiWorkload.h"
#include "trainer/FusedAdam.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <iomanip>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <unordered_set>

namespace engram::bench {
namespace {

using memory::MemoryTracker;
using memory::MemoryWindow;
using memory::Phase;
using memory::Tag;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kWarmupSteps = 1;
constexpr double kLearningRate = 1e-3;  // trainer::TrainerOptions defaults
constexpr long kDefaultNpiBatch = 8;
constexpr long kDefaultResNetBatch = 32;
constexpr double kMiB = 1024.0 * 1024.0;

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

/// A workload ready to train on one fixed batch, and what describes it in the report.
struct PreparedWorkload {
  std::shared_ptr<const void> data;  ///< what `workload` refers to; outlives it
  std::unique_ptr<trainer::Workload> workload;
  std::vector<std::size_t> batch;  ///< the examples every step trains on
  json config;
};

/// ResNet-18 (CIFAR layout) on `batch` synthetic images, the model built under the parameter tag.
PreparedWorkload make_resnet(const MemoryBenchOptions& o, long batch) {
  const nn::ResNetOptions model_options = nn::ResNetOptions().widths(
      {o.width, 2 * int64_t{o.width}, 4 * int64_t{o.width}, 8 * int64_t{o.width}});
  SyntheticImages images;
  images.num_examples = static_cast<std::size_t>(batch);
  images.image_size = o.image_size;
  images.seed = o.seed;
  PreparedWorkload w;
  torch::manual_seed(o.seed);
  {
    memory::TagGuard tag(Tag::parameter);
    w.workload = std::make_unique<ResNetWorkload>(nn::ResNet(model_options), images);
  }
  w.batch.resize(static_cast<std::size_t>(batch));
  std::iota(w.batch.begin(), w.batch.end(), 0);
  w.config = {{"model", "resnet18-cifar"},
              {"batch", batch},
              {"image_size", o.image_size},
              {"channels", images.channels},
              {"num_classes", images.num_classes},
              {"widths", model_options.widths()},
              {"blocks_per_stage", model_options.blocks_per_stage()},
              {"layers", "engram"}};
  return w;
}

/// The addition NPI on `batch` traces drawn from the task's default training data (as
/// `engram data gen` makes it); the model built under the parameter tag.
PreparedWorkload make_npi(const MemoryBenchOptions& o, long batch) {
  const auto& task = datasets::task_by_name("addition");
  datasets::GenerateOptions gen;
  gen.min_length = task.min_length();
  gen.per_length = 32;
  gen.seed = o.seed;
  auto traces = datasets::generate_traces(task, gen).traces;
  if (static_cast<std::size_t>(batch) > traces.size()) {
    throw UsageError("--batch: at most " + std::to_string(traces.size()) + " NPI traces");
  }
  std::mt19937_64 rng(o.seed);
  std::shuffle(traces.begin(), traces.end(), rng);
  traces.resize(static_cast<std::size_t>(batch));

  npi::NpiConfig config = npi::NpiConfig::for_task(task);
  config.hidden = o.hidden;
  config.layers_impl = o.layers;
  // Only the batch's traces are kept: the data set's tensors are live (activation) bytes.
  auto data = std::make_shared<const npi::NpiDataset>(task, traces);
  PreparedWorkload w;
  torch::manual_seed(o.seed);
  {
    memory::TagGuard tag(Tag::parameter);
    w.workload = std::make_unique<npi::NpiWorkload>(npi::NpiModel(config), *data);
  }
  w.data = data;
  w.batch.resize(static_cast<std::size_t>(batch));
  std::iota(w.batch.begin(), w.batch.end(), 0);
  w.config = {{"model", "npi"},
              {"task", task.name()},
              {"batch", batch},
              {"rows", data->num_steps()},
              {"hidden", o.hidden},
              {"layers", o.layers},
              {"min_len", gen.min_length},
              {"max_len", gen.max_length}};
  return w;
}

/// One training step (see the header): trainer::run_step_forward_backward, then the optimizer.
/// Gradients that autograd allocated (the torch-layer path) are retagged once backward is done;
/// nn/ layers tag theirs as they store them.
void train_step(trainer::Workload& workload, const std::vector<std::size_t>& batch,
                const std::vector<at::Tensor>& params, trainer::FusedAdam& optimizer,
                MemoryTracker& tracker) {
  optimizer.zero_grad();
  trainer::run_step_forward_backward(workload, batch);
  for (const auto& p : params) tracker.retag(p.grad(), Tag::gradient);
  memory::PhaseGuard phase(Phase::optimizer);
  memory::TagGuard tag(Tag::optimizer_state);
  memory::SpanGuard span("optimizer", "phase");
  optimizer.step();
}

json bytes_by_tag(const std::array<std::int64_t, memory::kNumTags>& bytes) {
  json j = json::object();
  for (std::size_t t = 0; t < memory::kNumTags; ++t) {
    j[memory::tag_name(static_cast<Tag>(t))] = bytes[t];
  }
  return j;
}

/// Where in a step its activation peak lies, replayed from the window's timeline.
struct PeakAttribution {
  Phase phase = Phase::idle;        ///< the phase of the event that reached the peak
  std::int64_t end_of_forward = 0;  ///< activation bytes after the last forward event
  std::array<std::int64_t, memory::kNumTags> live_at_peak{};  ///< live bytes by tag there
  /// The activation peak when gradient-tagged allocations that the step both makes and frees
  /// (the working buffers of weight-gradient computations, which the gradient scheduler's tag
  /// covers) count as workspace: only what outlives the step as a gradient is left out. This is
  /// what a profiler that knows only the final .grad tensors can see (the peer's definition).
  std::int64_t peak_counting_gradient_temporaries = 0;
};

PeakAttribution attribute_peak(const MemoryWindow& w) {
  std::unordered_set<std::uint64_t> allocated, transient;
  for (const auto& e : w.events) {
    if (e.bytes > 0) {
      allocated.insert(e.allocation);
    } else if (allocated.count(e.allocation) > 0) {
      transient.insert(e.allocation);
    }
  }
  const auto excluded = [](std::size_t tag) {
    const auto t = static_cast<Tag>(tag);
    return t == Tag::parameter || t == Tag::gradient || t == Tag::optimizer_state;
  };
  std::int64_t activation = 0;
  for (std::size_t t = 0; t < memory::kNumTags; ++t) {
    if (!excluded(t)) activation += w.start_live_by_tag[t];
  }
  std::int64_t gradient_temporaries = 0;
  PeakAttribution p;
  auto live = w.start_live_by_tag;
  std::int64_t best = activation;
  p.live_at_peak = live;
  p.peak_counting_gradient_temporaries = activation;
  for (const auto& e : w.events) {
    const auto tag = static_cast<std::size_t>(e.tag);
    live[tag] += e.bytes;
    if (!excluded(tag)) activation += e.bytes;
    if (e.tag == Tag::gradient && transient.count(e.allocation) > 0) {
      gradient_temporaries += e.bytes;
    }
    if (activation > best) {
      best = activation;
      p.phase = e.phase;
      p.live_at_peak = live;
    }
    p.peak_counting_gradient_temporaries =
        std::max(p.peak_counting_gradient_temporaries, activation + gradient_temporaries);
    if (e.phase == Phase::forward) p.end_of_forward = activation;
  }
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Trains a fresh workload with `technique` and measures its steps; `last` receives the last
/// measured step's window.
json measure(const MemoryBenchOptions& o, long batch, const std::string& technique,
             MemoryTracker& tracker, MemoryWindow& last, json& config) {
  PreparedWorkload w = o.workload == "resnet" ? make_resnet(o, batch) : make_npi(o, batch);
  config = w.config;
  auto params = w.workload->parameters();
  std::int64_t param_count = 0;
  for (const auto& p : params) param_count += p.numel();
  config["parameters"] = param_count;
  // FusedAdam allocates its state in its constructor.
  std::optional<trainer::FusedAdam> optimizer;
  {
    memory::TagGuard tag(Tag::optimizer_state);
    optimizer.emplace(params, kLearningRate);
  }

  for (int i = 0; i < kWarmupSteps; ++i)
    train_step(*w.workload, w.batch, params, *optimizer, tracker);
  std::vector<std::int64_t> peaks, activation_peaks;
  std::vector<double> ms;
  for (long i = 0; i < o.steps; ++i) {
    tracker.begin_window();
    const auto start = Clock::now();
    train_step(*w.workload, w.batch, params, *optimizer, tracker);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    last = tracker.end_window();
    peaks.push_back(last.peak_bytes);
    activation_peaks.push_back(last.activation_peak_bytes);
  }
  const PeakAttribution where = attribute_peak(last);
  return {{"technique", technique},
          {"peak_bytes", *std::max_element(peaks.begin(), peaks.end())},
          {"activation_peak_bytes",
           *std::max_element(activation_peaks.begin(), activation_peaks.end())},
          {"step_ms", median(ms)},
          {"peak_bytes_per_step", peaks},
          {"activation_peak_bytes_per_step", activation_peaks},
          {"step_ms_per_step", ms},
          {"activation_peak_bytes_counting_gradient_temporaries",
           where.peak_counting_gradient_temporaries},
          {"activation_peak_phase", memory::phase_name(where.phase)},
          {"activation_bytes_at_end_of_forward", where.end_of_forward},
          {"live_bytes_by_tag_at_activation_peak", bytes_by_tag(where.live_at_peak)},
          {"live_bytes_by_tag_at_step_start", bytes_by_tag(last.start_live_by_tag)},
          {"activation_peak_ratio_vs_profiler", nullptr},
          {"activation_peak_ratio_vs_profiler_counting_gradient_temporaries", nullptr},
          {"activation_peak_ratio_vs_profiler_grads_kept", nullptr}};
}

/// Runs the ResNet peer on the same network and batch; returns its JSON.
json run_resnet_peer(const MemoryBenchOptions& o, long batch, const json& config) {
  const ScratchDir dir("memory");
  std::string widths;
  for (const auto& w : config.at("widths")) {
    widths += (widths.empty() ? "" : ",") + std::to_string(w.get<long>());
  }
  return peer_json(
      run_peer({o.python, peer_script("resnet_memory_peer.py"), "--batch", std::to_string(batch),
                "--image-size", std::to_string(o.image_size), "--widths", widths,
                "--blocks-per-stage", std::to_string(config.at("blocks_per_stage").get<long>()),
                "--num-classes", std::to_string(config.at("num_classes").get<long>()), "--seed",
                std::to_string(o.seed), "--threads", std::to_string(o.threads)},
               dir));
}

/// One line about the workload, for the table's title.
std::string describe(const json& config) {
  std::string s = config.at("model").get<std::string>() + ", batch " + config.at("batch").dump();
  if (config.contains("image_size")) {
    const std::string size = config.at("image_size").dump();
    s += ", " + size + "x" + size + " images, widths";
    std::string sep = " ";
    for (const auto& w : config.at("widths")) {
      s += sep + w.dump();
      sep = "/";
    }
  } else {
    s += " traces (" + config.at("rows").dump() + " steps), hidden " + config.at("hidden").dump();
  }
  return s + ", " + config.at("parameters").dump() + " parameters";
}

std::string mib(const json& bytes) {
  return bytes.is_null() ? "-" : fixed(bytes.get<double>() / kMiB, 2);
}

}  // namespace

const std::vector<std::string>& memory_workloads() {
  static const std::vector<std::string> names{"npi", "resnet"};
  return names;
}

const std::vector<std::string>& memory_techniques() {
  static const std::vector<std::string> names{"none"};
  return names;
}

void run_memory_bench(const MemoryBenchOptions& options, std::ostream& out) {
  const auto& workloads = memory_workloads();
  if (std::find(workloads.begin(), workloads.end(), options.workload) == workloads.end()) {
    throw UsageError("unknown workload '" + options.workload + "' (valid: " + joined(workloads) +
                     ")");
  }
  if (options.techniques.empty()) throw UsageError("--techniques: at least one technique");
  for (const auto& t : options.techniques) {
    const auto& valid = memory_techniques();
    if (std::find(valid.begin(), valid.end(), t) == valid.end()) {
      throw UsageError("unknown technique '" + t + "' (valid: " + joined(valid) + ")");
    }
  }
  if (options.json_path.empty()) throw UsageError("--json is required");
  if (options.steps < 1) throw UsageError("--steps must be at least 1");
  if (options.batch < 0) throw UsageError("--batch must be positive");
  if (options.threads < 1) throw UsageError("--threads must be at least 1");
  if (options.image_size < 1) throw UsageError("--image-size must be positive");
  if (options.width < 1) throw UsageError("--width must be positive");
  if (options.hidden < 1) throw UsageError("--hidden must be at least 1");
  if (options.layers != "engram" && options.layers != "torch") {
    throw UsageError("unknown layers '" + options.layers + "' (valid: engram, torch)");
  }
  if (options.layers != "engram" && options.workload != "npi") {
    throw UsageError("--layers torch: only the npi workload has a plain-torch implementation");
  }
  const bool resnet = options.workload == "resnet";
  const long batch =
      options.batch > 0 ? options.batch : (resnet ? kDefaultResNetBatch : kDefaultNpiBatch);

  // Before any model exists, so that every parameter is counted.
  MemoryTracker& tracker = MemoryTracker::install();
  const bool blas_threads_set = trainer::set_compute_threads(options.threads);

  json report{{"benchmark", "memory"},
              {"workload", options.workload},
              {"machine", machine_json()},
              {"versions", versions_json()},
              {"seed", options.seed},
              {"threads", options.threads},
              {"openblas_threads_set", blas_threads_set},
              {"steps", options.steps},
              {"warmup_steps", kWarmupSteps},
              {"learning_rate", kLearningRate},
              {"optimizer", "adam"},
              {"config", nullptr},
              {"peer", nullptr},
              {"results", json::array()}};

  report["versions"]["python_torch"] = nullptr;  // filled in by the peer
  report["versions"]["python"] = nullptr;

  MemoryWindow last;
  for (const auto& technique : options.techniques) {
    json config;
    report["results"].push_back(measure(options, batch, technique, tracker, last, config));
    report["config"] = config;
  }

  if (resnet && !options.skip_peer) {
    const auto wall_start = Clock::now();
    json peer = run_resnet_peer(options, batch, report["config"]);
    peer["source"] = "torch.profiler";
    peer["wall_seconds"] = std::chrono::duration<double>(Clock::now() - wall_start).count();
    report["versions"]["python_torch"] = peer.at("torch_version");
    report["versions"]["python"] = peer.at("python_version");
    if (peer.at("parameters").get<std::int64_t>() !=
        report["config"]["parameters"].get<std::int64_t>()) {
      throw std::runtime_error("the Python peer built a different network (" +
                               std::to_string(peer.at("parameters").get<std::int64_t>()) +
                               " parameters, " + report["config"]["parameters"].dump() +
                               " in C++)");
    }
    const double reference = peer.at("activation_peak_bytes").get<double>();
    const double grads_kept = peer.at("activation_peak_bytes_grads_kept").get<double>();
    for (auto& row : report["results"]) {
      const double ours = row["activation_peak_bytes"].get<double>();
      row["activation_peak_ratio_vs_profiler"] = ours / reference;
      row["activation_peak_ratio_vs_profiler_counting_gradient_temporaries"] =
          row["activation_peak_bytes_counting_gradient_temporaries"].get<double>() / reference;
      row["activation_peak_ratio_vs_profiler_grads_kept"] = ours / grads_kept;
    }
    report["peer"] = std::move(peer);
  }

  if (!options.trace_path.empty()) {
    memory::write_chrome_trace(options.trace_path, last, "engram bench memory " + options.workload);
  }
  write_file_atomically(options.json_path, report.dump(2) + "\n");

  out << "Training-step memory: " << describe(report["config"]) << ", " << options.threads
      << " thread(s), " << options.steps << " measured step(s) after " << kWarmupSteps
      << " warm-up, " << report["machine"]["cpu"].get<std::string>() << "\n";
  out << "technique      peak MiB  activation peak MiB  (phase)    step ms"
         "  profiler activation MiB   ratio\n";
  const json& peer = report["peer"];
  for (const auto& r : report["results"]) {
    const json& ratio = r["activation_peak_ratio_vs_profiler"];
    out << std::left << std::setw(12) << r["technique"].get<std::string>() << std::right
        << std::setw(11) << mib(r["peak_bytes"]) << std::setw(21) << mib(r["activation_peak_bytes"])
        << "  " << std::left << std::setw(10) << r["activation_peak_phase"].get<std::string>()
        << std::right << std::setw(8) << fixed(r["step_ms"].get<double>(), 1) << std::setw(25)
        << (peer.is_null() ? "-" : mib(peer["activation_peak_bytes"])) << std::setw(8)
        << (ratio.is_null() ? "-" : fixed(ratio.get<double>(), 3)) << "\n";
  }
  if (!options.trace_path.empty()) out << "wrote " << options.trace_path << "\n";
  out << "wrote " << options.json_path << "\n";
}

}  // namespace engram::bench
