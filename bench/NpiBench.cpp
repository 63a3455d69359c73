#include "bench/NpiBench.h"

#include "bench/BenchSupport.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "datasets/TraceFile.h"
#include "npi/Npi.h"
#include "npi/NpiData.h"
#include "npi/NpiModel.h"
#include "npi/NpiWorkload.h"
#include "trainer/BatchSampler.h"
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

void run_npi_bench(const NpiBenchOptions& options, std::ostream& out) {
  if (options.json_path.empty()) throw InvalidOption("json_path", "is required");
  if (options.steps < 1) throw InvalidOption("steps", "must be at least 1");
  if (options.threads < 1) throw InvalidOption("threads", "must be at least 1");
  if (options.hidden < 1 || options.hidden > 8192)
    throw InvalidOption("hidden", "must be between 1 and 8192");
  if (options.batch_sizes.empty() ||
      std::any_of(options.batch_sizes.begin(), options.batch_sizes.end(),
                  [](int b) { return b < 1; }))
    throw InvalidOption("batch_sizes", "must be at least 1");
  check_writable(options.json_path);  // fail before the work, not after it
  const auto& task = datasets::task_by_name(options.task);
  const std::string peer_path = options.skip_peer ? "" : peer_script("npi_peer.py");
  trainer::set_compute_threads(options.threads);
  // The session `engram train npi` runs, at this bench's threads and seed.
  trainer::TrainingOptions training = npi::TrainOptions::default_training();
  training.threads = options.threads;
  training.seed = options.seed;

  // The task's default training data (as `engram data gen` makes it).
  datasets::GenerateOptions gen = datasets::default_generate_options(task);
  gen.seed = options.seed;
  const auto traces = datasets::generate_traces(task, gen);
  const ScratchDir dir("bench-npi");
  const std::string data_path = dir.file("traces.jsonl");
  datasets::write_trace_file(data_path, traces);

  npi::NpiConfig config = npi::NpiConfig::for_task(task);
  config.hidden = options.hidden;
  const npi::NpiDataset data(task, traces.traces);
  const std::string config_path = dir.file("config.json");
  const std::string manifest_path = dir.file("init.json"), blob_path = dir.file("init.bin");
  write_file_atomically(config_path, config.to_json());
  {
    torch::manual_seed(options.seed);
    npi::NpiModel initial(config);
    write_parameters(initial, manifest_path, blob_path);
  }

  json report{{"benchmark", "npi"},
              {"machine", machine_json()},
              {"versions", versions_json()},
              {"task", task.name()},
              {"hidden", options.hidden},
              {"threads", options.threads},
              {"seed", options.seed},
              {"steps", options.steps},
              {"warmup_steps", kWarmupSteps},
              {"learning_rate", training.learning_rate},
              {"grad_clip", training.grad_clip},
              {"data",
               {{"traces", data.num_traces()},
                {"rows", data.num_steps()},
                {"min_len", gen.min_length},
                {"max_len", gen.max_length},
                {"per_length", gen.per_length}}},
              {"results", json::array()}};

  report["versions"]["python_torch"] = nullptr;  // filled in by the peer
  report["versions"]["python"] = nullptr;

  if (!options.skip_peer) {
    // Fails fast (before minutes of measuring) when the interpreter or its torch is unusable.
    const json versions = peer_json(run_peer({options.python, peer_path, "--probe"}, dir));
    report["versions"]["python_torch"] = versions.at("torch_version");
    report["versions"]["python"] = versions.at("python_version");
  }
  for (const int batch_size : options.batch_sizes) {
    const std::size_t batch =
        std::min<std::size_t>(static_cast<std::size_t>(batch_size), data.num_traces());
    // The batches a session on this seed draws, given to both implementations and the peer.
    training.batch = static_cast<int>(batch);
    trainer::BatchSampler sampler(data.num_traces(), batch, training.seed);
    std::vector<std::vector<std::size_t>> batches(kWarmupSteps + options.steps);
    for (auto& b : batches) b = sampler.next();
    const Measurement cpp = measure_cpp(config, data, training, batches);
    // The same model on plain torch modules (--impl torch), measured right after.
    npi::NpiConfig torch_config = config;
    torch_config.layers_impl = "torch";
    const Measurement torch_layers = measure_cpp(torch_config, data, training, batches);
    const double traces_per_step = static_cast<double>(batch);
    json r{
        {"batch", batch},
        {"mean_rows", cpp.mean_rows},
        {"cpp_traces_per_s", options.steps * traces_per_step / cpp.seconds},
        {"cpp_steps_per_s", options.steps / cpp.seconds},
        {"python_traces_per_s", nullptr},
        {"python_steps_per_s", nullptr},
        {"ratio", nullptr},
        {"cpp_cpu_ms_per_step", 1e3 * cpp.cpu_seconds / options.steps},
        {"python_cpu_ms_per_step", nullptr},
        {"cpu_ratio", nullptr},
        {"python_cpu_ms_over_floor", nullptr},
        {"cpp_phases_ms", cpp.phases.to_json_ms(options.steps)},
        {"python_phases_ms", nullptr},
        {"cpp_first_loss", cpp.first_loss},
        {"python_first_loss", nullptr},
        {"first_loss_match", nullptr},
        {"cpp_last_loss", cpp.last_loss},
        {"python_last_loss", nullptr},
        {"cpp_torch_layers_traces_per_s", options.steps * traces_per_step / torch_layers.seconds},
        {"cpp_torch_layers_cpu_ms_per_step", 1e3 * torch_layers.cpu_seconds / options.steps},
        {"cpp_torch_layers_first_loss", torch_layers.first_loss},
        {"cpp_torch_layers_last_loss", torch_layers.last_loss},
        // > 1: the nn/ layers train faster than plain torch modules.
        {"layers_speedup_vs_torch", torch_layers.seconds / cpp.seconds}};
    // The matrix-product floor: the step's products at the best rate torch::mm reaches here.
    const double gflop = npi_step_matmul_flops(config, cpp.mean_rows, cpp.mean_sequences) / 1e9;
    const double gflops = measured_matmul_gflops(std::lround(cpp.mean_rows), config.hidden);
    const double floor_ms = 1e3 * gflop / gflops;
    r["mean_sequences"] = cpp.mean_sequences;
    r["matmul_gflop_per_step"] = gflop;
    r["matmul_peak_gflops"] = gflops;
    r["matmul_floor_ms_per_step"] = floor_ms;
    r["cpp_cpu_ms_over_floor"] = r["cpp_cpu_ms_per_step"].get<double>() / floor_ms;

    if (!options.skip_peer) {
      const std::string indices_path = dir.file("indices.json");
      write_file_atomically(indices_path, json(batches).dump());
      const std::string text = run_peer({options.python, peer_path,
                                         "--data",       data_path,
                                         "--config",     config_path,
                                         "--batch",      std::to_string(batch),
                                         "--steps",      std::to_string(options.steps),
                                         "--warmup",     std::to_string(kWarmupSteps),
                                         "--threads",    std::to_string(options.threads),
                                         "--seed",       std::to_string(options.seed),
                                         "--lr",         std::to_string(training.learning_rate),
                                         "--clip",       std::to_string(training.grad_clip),
                                         "--indices",    indices_path,
                                         "--init",       manifest_path},
                                        dir);
      const json peer = peer_json(text);
      const double python_seconds = peer.at("seconds").get<double>();
      const double python_first = peer.at("first_loss").get<double>();
      r["python_traces_per_s"] = options.steps * traces_per_step / python_seconds;
      r["python_steps_per_s"] = options.steps / python_seconds;
      r["ratio"] = python_seconds / cpp.seconds;
      const double python_cpu = peer.at("cpu_seconds").get<double>();
      r["python_cpu_ms_per_step"] = 1e3 * python_cpu / options.steps;
      r["cpu_ratio"] = python_cpu / cpp.cpu_seconds;
      // No implementation that computes these products can beat Python by more than this.
      r["python_cpu_ms_over_floor"] = r["python_cpu_ms_per_step"].get<double>() / floor_ms;
      r["python_phases_ms"] = peer.at("phases_ms");
      r["python_first_loss"] = python_first;
      r["first_loss_match"] = std::abs(python_first - cpp.first_loss) <=
                              kLossTolerance * std::max(1.0, std::abs(cpp.first_loss));
      r["python_last_loss"] = peer.at("last_loss");
      if (peer.at("mean_rows").get<double>() != cpp.mean_rows) {
        throw std::runtime_error("the Python peer assembled different batches (" +
                                 fixed(peer.at("mean_rows").get<double>(), 1) + " rows per step, " +
                                 fixed(cpp.mean_rows, 1) + " in C++)");
      }
    }
    report["results"].push_back(std::move(r));
  }
  write_file_atomically(options.json_path, report.dump(2) + "\n");

  out << "NPI training throughput: task " << task.name() << ", hidden " << options.hidden << ", "
      << options.threads << " thread(s), " << options.steps << " timed steps after " << kWarmupSteps
      << " warm-up, " << report["machine"]["cpu"].get<std::string>() << "\n";
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

}  // namespace engram::bench
