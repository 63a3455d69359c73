#include "bench/NpiBench.h"

#include "bench/BenchSupport.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "datasets/TraceFile.h"
#include "nn/Width.h"
#include "npi/Npi.h"
#include "npi/NpiData.h"
#include "npi/NpiModel.h"
#include "npi/NpiWorkload.h"
#include "trainer/BatchSampler.h"
#include "trainer/Device.h"
#include "trainer/Stepper.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <random>
#include <sstream>

namespace engram::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kWarmupSteps = 3;
/// Relative difference allowed between the first-step losses of the two implementations, which
/// start from the same weights on the same batch.
constexpr double kLossTolerance = 1e-4;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// CPU time of the whole process: unlike wall time, barely moved by other jobs on the machine.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Initial weights for the peer: `manifest` lists name and shape of every parameter, `blob`
/// holds their float32 values back to back in that order.
void write_parameters(npi::NpiModel& model, const std::string& manifest_path,
                      const std::string& blob_path) {
  json manifest = json::array();
  std::ofstream blob(blob_path, std::ios::binary | std::ios::trunc);
  for (const auto& item : model->named_parameters()) {
    const auto values = item.value().detach().to(torch::kFloat).contiguous();
    manifest.push_back({{"name", item.key()}, {"shape", values.sizes().vec()}});
    blob.write(reinterpret_cast<const char*>(values.data_ptr<float>()),
               static_cast<std::streamsize>(values.numel() * sizeof(float)));
  }
  blob.close();
  if (!blob) throw std::runtime_error("cannot write '" + blob_path + "'");
  write_file_atomically(manifest_path, manifest.dump());
}

/// Mean seconds per timed step of each phase of a training step.
struct Phases {
  double batch = 0, forward = 0, backward = 0, clip = 0, optimizer = 0;
  json to_json_ms(long steps) const {
    const double k = 1e3 / static_cast<double>(steps);
    return {{"batch", batch * k},
            {"forward", forward * k},
            {"backward", backward * k},
            {"clip", clip * k},
            {"optimizer", optimizer * k}};
  }
};

/// GFLOP/s of torch::mm on one of the step's largest products ([rows, hidden] x [hidden, 4 *
/// hidden]) on this machine, now: the rate the step's products could reach at best.
double measured_matmul_gflops(long rows, int hidden) {
  const auto a = torch::randn({std::max(rows, 1L), hidden});
  const auto b = torch::randn({hidden, 4L * hidden});
  for (int i = 0; i < 10; ++i) (void)torch::mm(a, b);
  const int reps = 100;
  const auto start = Clock::now();
  for (int i = 0; i < reps; ++i) (void)torch::mm(a, b);
  const double seconds = seconds_since(start) / reps;
  return 2.0 * static_cast<double>(a.size(0)) * hidden * 4.0 * hidden / seconds / 1e9;
}

struct Measurement {
  double seconds = 0;      ///< timed steps, wall clock
  double cpu_seconds = 0;  ///< timed steps, process CPU time
  double mean_rows = 0;
  double mean_sequences = 0;  ///< invocations per step
  double first_loss = 0;      ///< loss of the first warm-up step
  double last_loss = 0;
  Phases phases;
};

/// Wall time of each phase of the session's steps, from the Stepper's hooks.
class PhaseTimer final : public trainer::StepHooks {
 public:
  void before(trainer::StepPhase) override { start_ = Clock::now(); }
  void after(trainer::StepPhase phase) override {
    if (on) seconds[static_cast<std::size_t>(phase)] += seconds_since(start_);
  }
  bool on = false;  ///< off during warm-up
  std::array<double, trainer::kNumStepPhases> seconds{};

 private:
  Clock::time_point start_;
};

/// The training step of `engram train npi` (trainer::TrainingSession, its options as
/// npi::TrainOptions has them but for the batch), timed over the batches after the warm-up ones.
/// The model starts from the weights `torch::manual_seed(seed)` gives.
Measurement measure_cpp(const npi::NpiConfig& config, const npi::NpiDataset& data,
                        const trainer::TrainingOptions& training,
                        const std::vector<std::vector<std::size_t>>& batches) {
  torch::manual_seed(training.seed);
  npi::NpiModel model(config);
  npi::NpiWorkload workload(model, data);
  trainer::TrainingSession session(workload, training);
  PhaseTimer timer;
  session.stepper().add_hooks(&timer);

  Measurement m;
  double rows = 0, sequences = 0;
  for (std::size_t i = kWarmupSteps; i < batches.size(); ++i) {
    // The batches' shapes, as the Stepper will pack them (packing is deterministic), counted
    // before the clock starts.
    const npi::NpiBatch batch = data.batch(batches[i]);
    rows += static_cast<double>(batch.programs.size(0));
    sequences += static_cast<double>(batch.batch_sizes[0].item<int64_t>());
  }
  Clock::time_point timed_start;
  double cpu_start = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (i == kWarmupSteps) {
      timed_start = Clock::now();
      cpu_start = process_cpu_seconds();
      timer.on = true;
    }
    const double loss = session.step(batches[i]).loss.item<double>();
    if (i == 0) m.first_loss = loss;
    m.last_loss = loss;
  }
  m.seconds = seconds_since(timed_start);
  m.cpu_seconds = process_cpu_seconds() - cpu_start;
  const auto at = [&](trainer::StepPhase p) { return timer.seconds[static_cast<std::size_t>(p)]; };
  m.phases = {at(trainer::StepPhase::batch), at(trainer::StepPhase::forward),
              at(trainer::StepPhase::backward), at(trainer::StepPhase::clip),
              at(trainer::StepPhase::optimizer)};
  m.mean_rows = rows / static_cast<double>(batches.size() - kWarmupSteps);
  m.mean_sequences = sequences / static_cast<double>(batches.size() - kWarmupSteps);
  return m;
}

std::string phases_text(const json& ms) {
  std::string s;
  for (const char* k : {"batch", "forward", "backward", "clip", "optimizer"}) {
    s += std::string(s.empty() ? "" : "  ") + k + " " + fixed(ms.at(k).get<double>(), 2);
  }
  return s;
}

}  // namespace

// See NpiBench.h.
double npi_step_matmul_flops(const npi::NpiConfig& c, double rows, double sequences) {
  const double gates = 4.0 * c.hidden;
  const double recurrent_rows = rows - sequences;
  double forward = 0, weight_grads = 0, input_grads = 0;  // multiply-adds
  auto linear = [&](double n, double in, double out, bool input_grad) {
    forward += n * in * out;
    weight_grads += n * in * out;
    if (input_grad) input_grads += n * in * out;
  };
  linear(rows, c.feature_dim(), c.state_dim, /*input_grad=*/false);  // encoder
  linear(rows, c.state_dim, c.state_dim, true);
  for (int l = 0; l < c.layers; ++l) {
    linear(rows, l == 0 ? c.state_dim + c.program_dim : c.hidden, gates, true);  // input
    linear(recurrent_rows, c.hidden, gates, true);                               // recurrent
  }
  linear(rows, c.hidden, 1 + c.key_dim + 3.0 * c.arg_size, true);  // heads
  linear(rows, c.key_dim, c.num_programs, true);                   // key lookup
  return 2.0 * (forward + weight_grads + input_grads);
}

namespace {

void validate(const NpiBenchOptions& options) {
  if (options.json_path.empty()) throw InvalidOption("json_path", "is required");
  if (options.steps < 1) throw InvalidOption("steps", "must be at least 1");
  if (options.threads < 1) throw InvalidOption("threads", "must be at least 1");
  nn::check_width(options.hidden, "hidden");
  trainer::resolve_device(options.device);  // a GPU this process does not see: before any work
  if (options.batch_sizes.empty() ||
      std::any_of(options.batch_sizes.begin(), options.batch_sizes.end(),
                  [](int b) { return b < 1; }))
    throw InvalidOption("batch_sizes", "must be at least 1");
  check_writable(options.json_path);  // fail before the work, not after it
}

/// What every measurement shares: the task's default training data (as `engram data gen` makes
/// it) in a scratch folder, the model's configuration and initial parameters as files (for the
/// peer), and the session options `engram train npi` runs at this bench's threads and seed.
struct Inputs {
  explicit Inputs(const NpiBenchOptions& o)
      : options(o),
        task(datasets::task_by_name(o.task)),
        gen(generate_options(task, o.seed)),
        traces(datasets::generate_traces(task, gen)),
        dir("bench-npi"),
        config(config_for(task, o.hidden)),
        data(task, traces.traces),
        training(training_for(o)) {
    datasets::write_trace_file(data_path(), traces);
    write_file_atomically(config_path(), config.to_json());
    torch::manual_seed(o.seed);
    npi::NpiModel initial(config);
    write_parameters(initial, manifest_path(), dir.file("init.bin"));
  }
  std::string data_path() const { return dir.file("traces.jsonl"); }
  std::string config_path() const { return dir.file("config.json"); }
  std::string manifest_path() const { return dir.file("init.json"); }

  const NpiBenchOptions& options;
  const datasets::Task& task;
  datasets::GenerateOptions gen;
  datasets::TraceSet traces;
  ScratchDir dir;
  npi::NpiConfig config;
  npi::NpiDataset data;
  trainer::TrainingOptions training;

 private:
  static datasets::GenerateOptions generate_options(const datasets::Task& task,
                                                    std::uint64_t seed) {
    datasets::GenerateOptions g = datasets::default_generate_options(task);
    g.seed = seed;
    return g;
  }
  static npi::NpiConfig config_for(const datasets::Task& task, int hidden) {
    npi::NpiConfig c = npi::NpiConfig::for_task(task);
    c.hidden = hidden;
    return c;
  }
  static trainer::TrainingOptions training_for(const NpiBenchOptions& o) {
    trainer::TrainingOptions t = npi::TrainOptions::default_training();
    t.threads = o.threads;
    t.seed = o.seed;
    t.device = o.device;
    return t;
  }
};

json report_header(const Inputs& in) {
  const NpiBenchOptions& o = in.options;
  json report{{"benchmark", "npi"},
              {"machine", machine_json()},
              {"versions", versions_json()},
              {"task", in.task.name()},
              {"hidden", o.hidden},
              {"threads", o.threads},
              {"device", o.device},
              {"seed", o.seed},
              {"steps", o.steps},
              {"warmup_steps", kWarmupSteps},
              {"learning_rate", in.training.learning_rate},
              {"grad_clip", in.training.grad_clip},
              {"data",
               {{"traces", in.data.num_traces()},
                {"rows", in.data.num_steps()},
                {"min_len", in.gen.min_length},
                {"max_len", in.gen.max_length},
                {"per_length", in.gen.per_length}}},
              {"results", json::array()}};
  report["versions"]["python_torch"] = nullptr;  // filled in by the peer
  report["versions"]["python"] = nullptr;
  return report;
}

/// One batch size's row: the C++ step on nn/ layers and on plain torch modules, on the batches
/// `batches` (warm-up first), and the matrix-product floor of the step.
json measure_row(Inputs& in, trainer::TrainingOptions& training, std::size_t batch,
                 const std::vector<std::vector<std::size_t>>& batches, double& cpp_seconds,
                 double& cpp_cpu_seconds) {
  const long steps = in.options.steps;
  const Measurement cpp = measure_cpp(in.config, in.data, training, batches);
  // The same model on plain torch modules (--impl torch), measured right after.
  npi::NpiConfig torch_config = in.config;
  torch_config.layers_impl = "torch";
  const Measurement torch_layers = measure_cpp(torch_config, in.data, training, batches);
  const double traces_per_step = static_cast<double>(batch);
  json r{{"batch", batch},
         {"mean_rows", cpp.mean_rows},
         {"cpp_traces_per_s", steps * traces_per_step / cpp.seconds},
         {"cpp_steps_per_s", steps / cpp.seconds},
         {"python_traces_per_s", nullptr},
         {"python_steps_per_s", nullptr},
         {"ratio", nullptr},
         {"cpp_cpu_ms_per_step", 1e3 * cpp.cpu_seconds / steps},
         {"python_cpu_ms_per_step", nullptr},
         {"cpu_ratio", nullptr},
         {"python_cpu_ms_over_floor", nullptr},
         {"cpp_phases_ms", cpp.phases.to_json_ms(steps)},
         {"python_phases_ms", nullptr},
         {"cpp_first_loss", cpp.first_loss},
         {"python_first_loss", nullptr},
         {"first_loss_match", nullptr},
         {"cpp_last_loss", cpp.last_loss},
         {"python_last_loss", nullptr},
         {"cpp_torch_layers_traces_per_s", steps * traces_per_step / torch_layers.seconds},
         {"cpp_torch_layers_cpu_ms_per_step", 1e3 * torch_layers.cpu_seconds / steps},
         {"cpp_torch_layers_first_loss", torch_layers.first_loss},
         {"cpp_torch_layers_last_loss", torch_layers.last_loss},
         // > 1: the nn/ layers train faster than plain torch modules.
         {"layers_speedup_vs_torch", torch_layers.seconds / cpp.seconds}};
  // The matrix-product floor: the step's products at the best rate torch::mm reaches here (on
  // the CPU; a GPU's step is not bound by it, and its CPU time is the host's share only).
  const double gflop = npi_step_matmul_flops(in.config, cpp.mean_rows, cpp.mean_sequences) / 1e9;
  r["mean_sequences"] = cpp.mean_sequences;
  r["matmul_gflop_per_step"] = gflop;
  r["matmul_peak_gflops"] = nullptr;
  r["matmul_floor_ms_per_step"] = nullptr;
  r["cpp_cpu_ms_over_floor"] = nullptr;
  if (in.options.device == "cpu") {
    const double gflops = measured_matmul_gflops(std::lround(cpp.mean_rows), in.config.hidden);
    const double floor_ms = 1e3 * gflop / gflops;
    r["matmul_peak_gflops"] = gflops;
    r["matmul_floor_ms_per_step"] = floor_ms;
    r["cpp_cpu_ms_over_floor"] = r["cpp_cpu_ms_per_step"].get<double>() / floor_ms;
  }
  cpp_seconds = cpp.seconds;
  cpp_cpu_seconds = cpp.cpu_seconds;
  return r;
}

/// The Python peer (bench/peers/npi_peer.py) on the same batches from the same initial
/// parameters, its figures added to row `r` beside the C++ ones.
void add_peer(Inputs& in, const std::string& peer_path, std::size_t batch,
              const std::vector<std::vector<std::size_t>>& batches, double cpp_seconds,
              double cpp_cpu_seconds, json& r) {
  const NpiBenchOptions& o = in.options;
  const std::string indices_path = in.dir.file("indices.json");
  write_file_atomically(indices_path, json(batches).dump());
  const std::string text = run_peer({o.python,    peer_path,
                                     "--data",    in.data_path(),
                                     "--config",  in.config_path(),
                                     "--batch",   std::to_string(batch),
                                     "--steps",   std::to_string(o.steps),
                                     "--warmup",  std::to_string(kWarmupSteps),
                                     "--threads", std::to_string(o.threads),
                                     "--seed",    std::to_string(o.seed),
                                     "--lr",      exact(in.training.learning_rate),
                                     "--clip",    exact(in.training.grad_clip),
                                     "--indices", indices_path,
                                     "--init",    in.manifest_path(),
                                     "--device",  o.device},
                                    in.dir);
  const json peer = peer_json(text);
  for (const auto& [key, ours] : {std::pair<const char*, double>{"lr", in.training.learning_rate},
                                  {"clip", in.training.grad_clip}}) {
    if (peer.at(key).get<double>() != ours)
      throw std::runtime_error(std::string("the Python peer trained with ") + key + " " +
                               exact(peer.at(key).get<double>()) + ", not " + exact(ours));
  }
  const double traces_per_step = static_cast<double>(batch);
  const double python_seconds = peer.at("seconds").get<double>();
  const double python_first = peer.at("first_loss").get<double>();
  r["python_traces_per_s"] = o.steps * traces_per_step / python_seconds;
  r["python_steps_per_s"] = o.steps / python_seconds;
  r["ratio"] = python_seconds / cpp_seconds;
  const double python_cpu = peer.at("cpu_seconds").get<double>();
  r["python_cpu_ms_per_step"] = 1e3 * python_cpu / o.steps;
  r["cpu_ratio"] = python_cpu / cpp_cpu_seconds;
  // No implementation that computes these products can beat Python by more than this.
  if (!r["matmul_floor_ms_per_step"].is_null())
    r["python_cpu_ms_over_floor"] =
        r["python_cpu_ms_per_step"].get<double>() / r["matmul_floor_ms_per_step"].get<double>();
  r["python_phases_ms"] = peer.at("phases_ms");
  r["python_first_loss"] = python_first;
  const double cpp_first = r["cpp_first_loss"].get<double>();
  r["first_loss_match"] =
      std::abs(python_first - cpp_first) <= kLossTolerance * std::max(1.0, std::abs(cpp_first));
  r["python_last_loss"] = peer.at("last_loss");
  const double cpp_rows = r["mean_rows"].get<double>();
  if (peer.at("mean_rows").get<double>() != cpp_rows) {
    throw std::runtime_error("the Python peer assembled different batches (" +
                             fixed(peer.at("mean_rows").get<double>(), 1) + " rows per step, " +
                             fixed(cpp_rows, 1) + " in C++)");
  }
}

void print_report(const NpiBenchOptions& options, const json& report, std::ostream& out) {
  out << "NPI training throughput: task " << report["task"].get<std::string>() << ", hidden "
      << options.hidden << ", " << options.threads << " thread(s), " << options.steps
      << " timed steps after " << kWarmupSteps << " warm-up, "
      << report["machine"]["cpu"].get<std::string>() << "\n";
  out << "batch  rows/step  C++ traces/s  Python traces/s   ratio  C++ steps/s  Python steps/s"
         "  CPU-time ratio\n";
  auto cell = [](const json& v, int width, int precision) {
    std::ostringstream s;
    s << std::setw(width) << (v.is_null() ? std::string("-") : fixed(v.get<double>(), precision));
    return s.str();
  };
  for (const auto& r : report["results"]) {
    out << std::setw(5) << r["batch"].get<long>() << cell(r["mean_rows"], 11, 1)
        << cell(r["cpp_traces_per_s"], 14, 2) << cell(r["python_traces_per_s"], 17, 2)
        << cell(r["ratio"], 8, 2) << cell(r["cpp_steps_per_s"], 13, 2)
        << cell(r["python_steps_per_s"], 16, 2) << cell(r["cpu_ratio"], 16, 2) << "\n";
  }
  for (const auto& r : report["results"]) {
    out << "batch " << r["batch"].get<long>() << ": C++ on nn/ layers "
        << fixed(r["cpp_traces_per_s"].get<double>(), 2) << " traces/s, on torch modules "
        << fixed(r["cpp_torch_layers_traces_per_s"].get<double>(), 2) << " traces/s (speedup "
        << fixed(r["layers_speedup_vs_torch"].get<double>(), 2) << ")\n";
  }
  for (const auto& r : report["results"]) {
    out << "batch " << r["batch"].get<long>()
        << " C++ ms/step:    " << phases_text(r["cpp_phases_ms"]) << "\n";
    if (!r["python_phases_ms"].is_null()) {
      out << "batch " << r["batch"].get<long>()
          << " Python ms/step: " << phases_text(r["python_phases_ms"]) << "\n";
    }
    if (r["matmul_floor_ms_per_step"].is_null()) continue;  // a GPU's run: no CPU floor
    out << "batch " << r["batch"].get<long>()
        << " matrix products: " << fixed(r["matmul_gflop_per_step"].get<double>(), 3)
        << " GFLOP/step, at " << fixed(r["matmul_peak_gflops"].get<double>(), 1)
        << " GFLOP/s (torch::mm here) " << fixed(r["matmul_floor_ms_per_step"].get<double>(), 2)
        << " ms; CPU time per step " << fixed(r["cpp_cpu_ms_over_floor"].get<double>(), 2)
        << "x that in C++"
        << (r["python_cpu_ms_over_floor"].is_null()
                ? std::string()
                : ", " + fixed(r["python_cpu_ms_over_floor"].get<double>(), 2) + "x in Python")
        << "\n";
    if (r["first_loss_match"].is_boolean() && !r["first_loss_match"].get<bool>()) {
      out << "warning: batch " << r["batch"].get<long>() << ": first-step losses differ (C++ "
          << r["cpp_first_loss"].get<double>() << ", Python "
          << r["python_first_loss"].get<double>() << "): the peer is not the same model\n";
    }
  }
  out << "wrote " << options.json_path << "\n";
}

}  // namespace

void run_npi_bench(const NpiBenchOptions& options, std::ostream& out) {
  validate(options);
  const std::string peer_path = options.skip_peer ? "" : peer_script("npi_peer.py");
  trainer::set_compute_threads(options.threads);
  Inputs in(options);
  json report = report_header(in);
  if (!options.skip_peer) {
    // Fails fast (before minutes of measuring) when the interpreter or its torch is unusable.
    const json versions = peer_json(run_peer({options.python, peer_path, "--probe"}, in.dir));
    report["versions"]["python_torch"] = versions.at("torch_version");
    report["versions"]["python"] = versions.at("python_version");
  }
  for (const int batch_size : options.batch_sizes) {
    const std::size_t batch =
        std::min<std::size_t>(static_cast<std::size_t>(batch_size), in.data.num_traces());
    // The batches a session on this seed draws, given to both implementations and the peer.
    trainer::TrainingOptions training = in.training;
    training.batch = static_cast<int>(batch);
    trainer::BatchSampler sampler(in.data.num_traces(), batch, training.seed);
    std::vector<std::vector<std::size_t>> batches(kWarmupSteps + options.steps);
    for (auto& b : batches) b = sampler.next();
    double cpp_seconds = 0, cpp_cpu_seconds = 0;
    json r = measure_row(in, training, batch, batches, cpp_seconds, cpp_cpu_seconds);
    if (!options.skip_peer)
      add_peer(in, peer_path, batch, batches, cpp_seconds, cpp_cpu_seconds, r);
    report["results"].push_back(std::move(r));
  }
  write_file_atomically(options.json_path, report.dump(2) + "\n");
  print_report(options, report, out);
}

}  // namespace engram::bench
