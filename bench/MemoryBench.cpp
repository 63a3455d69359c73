#include "bench/MemoryBench.h"

#include "bench/DeviceMemoryBench.h"
#include "bench/MemoryBenchParts.h"

#include "bench/BenchSupport.h"
#include "bench/KernelThroughput.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "common/FileChecks.h"
#include "datasets/TraceFile.h"
#include "memory/CompressingStore.h"
#include "memory/MemoryTracker.h"
#include "memory/ReluCompression.h"
#include "nn/Width.h"
#include "npi/NpiData.h"
#include "npi/NpiModel.h"
#include "npi/NpiWorkload.h"
#include "resnet/ResNetWorkload.h"
#include "trainer/MemoryCap.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/Stepper.h"
#include "trainer/Threads.h"
#include "trainer/Device.h"
#include "trainer/Trainer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iomanip>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <unordered_set>

namespace engram::bench {
namespace detail {

int warmup_steps(const std::vector<std::string>& rows) {
  for (const auto& row : rows)
    if (trainer::chosen_techniques(row_techniques(row)).reuse()) return kReuseWarmupSteps;
  return 1;
}

void ReuseNotes::note(const memory::ReuseStep* step, bool is_measured) {
  if (step == nullptr) return;
  plan_seconds = std::max(plan_seconds, step->plan_seconds);
  replans += step->replanned ? 1 : 0;
  if (is_measured) measured.push_back(*step);
}

nlohmann::json ReuseNotes::to_json() const {
  using nlohmann::json;
  long hits = 0, allocations = 0, misses = 0, conflicts = 0;
  json per_hits = json::array(), per_allocations = json::array(), per_missed = json::array();
  for (const auto& s : measured) {
    hits += s.hits;
    allocations += s.allocations;
    misses += s.missed ? 1 : 0;
    conflicts += s.conflicts;
    per_hits.push_back(s.hits);
    per_allocations.push_back(s.allocations);
    per_missed.push_back(s.missed);
  }
  const memory::ReuseStep& last = measured.back();
  return {{"hits_per_step", per_hits},
          {"allocations_per_step", per_allocations},
          {"missed_per_step", per_missed},
          {"hit_rate", allocations > 0 ? static_cast<double>(hits) / allocations : 0.0},
          {"misses", misses},
          {"conflicts", conflicts},
          {"replans", replans},
          {"arena_bytes", last.arena_bytes},
          {"lower_bound_bytes", last.lower_bound},
          {"arena_to_lower_bound",
           last.lower_bound > 0 ? static_cast<double>(last.arena_bytes) / last.lower_bound : 0.0},
          {"strategy", last.strategy},
          {"plan_seconds", plan_seconds},
          {"foreign_allocations_per_step", last.foreign}};
}
using memory::Tag;
using nlohmann::json;
}  // namespace detail
namespace {

using memory::MemoryTracker;
using memory::MemoryWindow;
using memory::Phase;
using memory::Tag;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

}  // namespace

namespace detail {

std::vector<std::string> row_techniques(const std::string& row) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t plus = row.find('+', start);
    parts.push_back(
        row.substr(start, plus == std::string::npos ? std::string::npos : plus - start));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return parts;
}

trainer::TrainingOptions row_training_options(const MemoryBenchOptions& o,
                                              const std::string& technique, long batch) {
  trainer::TrainingOptions to;
  to.learning_rate = kRowLearningRate;
  to.grad_clip = 0;
  to.batch = static_cast<int>(batch);
  to.threads = o.threads;
  to.seed = o.seed;
  if (technique != "none") to.memory.techniques = row_techniques(technique);
  return to;
}

}  // namespace detail

namespace {

using detail::row_techniques;

constexpr double kLearningRate = detail::kRowLearningRate;
constexpr long kDefaultNpiBatch = 8;
constexpr long kDefaultResNetBatch = 32;
constexpr double kMiB = 1024.0 * 1024.0;
/// The CPU kernels' throughput: a tensor of the size of the ResNet's largest ReLU output (batch
/// 32, 64 channels, 32x32), at these fractions of zeros, each timing the median of kKernelRepeats.
constexpr std::int64_t kKernelElements = std::int64_t{1} << 21;
constexpr int kKernelRepeats = 7;

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

namespace detail {

bool is_resnet(const std::string& workload) {
  return workload == "resnet" || workload == "resnet50";
}

int image_size_of(const MemoryBenchOptions& o) {
  if (o.image_size > 0) return o.image_size;
  return o.workload == "resnet50" ? 224 : 32;
}

PreparedWorkload make_resnet(const MemoryBenchOptions& o, long batch) {
  const bool resnet50 = o.workload == "resnet50";
  const std::vector<int64_t> widths{o.width, 2 * int64_t{o.width}, 4 * int64_t{o.width},
                                    8 * int64_t{o.width}};
  const resnet::ResNetOptions model_options =
      resnet50 ? resnet::resnet50_options().widths(widths) : resnet::ResNetOptions().widths(widths);
  resnet::SyntheticImages images;
  images.num_examples = static_cast<std::size_t>(batch);
  images.image_size = image_size_of(o);
  images.num_classes = model_options.num_classes();
  images.seed = o.seed;
  PreparedWorkload w;
  torch::manual_seed(o.seed);
  {
    memory::TagGuard tag(Tag::parameter);
    w.workload = std::make_unique<resnet::ResNetWorkload>(resnet::ResNet(model_options), images);
  }
  w.batch.resize(static_cast<std::size_t>(batch));
  std::iota(w.batch.begin(), w.batch.end(), 0);
  w.config = {{"model", resnet50 ? "resnet50-imagenet" : "resnet18-cifar"},
              {"batch", batch},
              {"image_size", images.image_size},
              {"channels", images.channels},
              {"num_classes", images.num_classes},
              {"widths", model_options.widths()},
              {"blocks_per_stage", model_options.blocks_per_stage()},
              {"impl", "engram"}};
  if (resnet50) {
    w.config["blocks"] = model_options.blocks();
    w.config["bottleneck"] = true;
    w.config["imagenet_stem"] = true;
  }
  return w;
}

}  // namespace detail

namespace {

using detail::is_resnet;
using detail::make_resnet;
using detail::PreparedWorkload;


/// The addition NPI on `batch` traces drawn from the task's default training data (as
/// `engram data gen` makes it); the model built under the parameter tag.
PreparedWorkload make_npi(const MemoryBenchOptions& o, long batch) {
  const auto& task = datasets::task_by_name("addition");
  datasets::GenerateOptions gen = datasets::default_generate_options(task);
  gen.seed = o.seed;
  auto traces = datasets::generate_traces(task, gen).traces;
  if (static_cast<std::size_t>(batch) > traces.size()) {
    throw InvalidOption(
        "batch", "must be at most " + std::to_string(traces.size()) + " for npi (its traces)");
  }
  std::mt19937_64 rng(o.seed);
  std::shuffle(traces.begin(), traces.end(), rng);
  traces.resize(static_cast<std::size_t>(batch));

  npi::NpiConfig config = npi::NpiConfig::for_task(task);
  config.hidden = o.hidden;
  config.layers_impl = o.impl;
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
              {"impl", o.impl},
              {"min_len", gen.min_length},
              {"max_len", gen.max_length}};
  return w;
}

/// Retags the gradients that autograd allocated (the torch-layer path) once backward is done;
/// nn/ layers tag theirs as they store them.
class GradientRetag final : public trainer::StepHooks {
 public:
  GradientRetag(std::vector<at::Tensor> params, MemoryTracker& tracker)
      : params_(std::move(params)), tracker_(tracker) {}
  void after(trainer::StepPhase phase) override {
    if (phase != trainer::StepPhase::backward) return;
    for (const auto& p : params_) tracker_.retag(p.grad(), Tag::gradient);
  }

 private:
  std::vector<at::Tensor> params_;
  MemoryTracker& tracker_;
};

/// One training step (see the header) of the session on the bench's fixed batch; its loss.
double train_step(trainer::TrainingSession& session, const std::vector<std::size_t>& batch) {
  return session.step(batch).loss.item<double>();
}

/// Every parameter's gradient, flattened into one host vector that the tracker does not count
/// (so keeping it does not change the next technique's figures); undefined gradients as zeros.
std::vector<float> gradients_of(const std::vector<at::Tensor>& params) {
  std::vector<float> all;
  for (const auto& p : params) {
    const std::size_t at = all.size();
    all.resize(at + static_cast<std::size_t>(p.numel()), 0.0f);
    if (!p.grad().defined()) continue;
    const at::Tensor g = p.grad().to(at::kFloat).contiguous();
    std::memcpy(all.data() + at, g.data_ptr<float>(), static_cast<std::size_t>(g.numel()) * 4);
  }
  return all;
}

/// What a row keeps beside its JSON to be compared with the `none` row.
struct StepResults {
  std::vector<double> losses;             ///< per measured step
  std::vector<std::vector<float>> grads;  ///< per measured step, see gradients_of()
  /// The first warm-up step's, taken from the initial weights every row shares.
  std::vector<float> first_grads;
};

}  // namespace

namespace detail {

json bytes_by_tag(const std::array<std::int64_t, memory::kNumTags>& bytes) {
  json j = json::object();
  for (std::size_t t = 0; t < memory::kNumTags; ++t) {
    j[memory::tag_name(static_cast<Tag>(t))] = bytes[t];
  }
  return j;
}

}  // namespace detail

namespace {

using detail::bytes_by_tag;


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

}  // namespace

namespace {


/// The relu row's compression figures, from the store's statistics of each measured step.
json relu_json(const std::vector<memory::CompressionStats>& steps, bool cache_decompressed) {
  std::int64_t elements = 0, zeros = 0, dense = 0, compressed = 0;
  std::vector<double> sparsity, compress_ms, decompress_ms;
  std::vector<std::int64_t> predicted;
  for (const auto& s : steps) {
    elements += s.elements;
    zeros += s.zeros;
    dense += s.dense_bytes;
    compressed += s.compressed_bytes;
    sparsity.push_back(s.sparsity());
    predicted.push_back(s.dense_bytes - s.bitmap_plus_values_bytes);
    compress_ms.push_back(static_cast<double>(s.compress_ns) / 1e6);
    decompress_ms.push_back(static_cast<double>(s.decompress_ns) / 1e6);
  }
  const memory::CompressionStats& last = steps.back();
  return {
      {"cache_decompressed", cache_decompressed},
      {"compressed_tensors_per_step", last.compressed_tensors},
      {"shared_saves_per_step", last.shared_saves},
      {"plain_relu_outputs_per_step", last.plain_relu_outputs},
      {"decompressions_per_step", last.decompressions},
      {"sparsity", elements > 0 ? static_cast<double>(zeros) / static_cast<double>(elements) : 0.0},
      {"sparsity_per_step", sparsity},
      {"compression_ratio",
       compressed > 0 ? static_cast<double>(dense) / static_cast<double>(compressed) : 0.0},
      {"dense_bytes", last.dense_bytes},
      {"compressed_bytes", last.compressed_bytes},
      {"bitmap_plus_values_bytes", last.bitmap_plus_values_bytes},
      {"format_overhead", last.bitmap_plus_values_bytes > 0
                              ? static_cast<double>(last.compressed_bytes) /
                                        static_cast<double>(last.bitmap_plus_values_bytes) -
                                    1.0
                              : 0.0},
      {"predicted_saving_bytes_per_step", predicted},
      {"measured_saving_bytes_per_step", nullptr},
      {"saving_vs_prediction_per_step", nullptr},
      {"saving_vs_prediction", nullptr},
      {"compress_ms", median(compress_ms)},
      {"decompress_ms", median(decompress_ms)}};
}

/// Median milliseconds of `run` over kKernelRepeats runs (after one untimed).
double median_ms(const std::function<void()>& run) {
  run();
  std::vector<double> ms;
  for (int i = 0; i < kKernelRepeats; ++i) {
    const auto start = Clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return median(ms);
}

/// Throughput of the CPU compression kernels against a memcpy of the same dense bytes split over
/// the same intra-op threads, at three fractions of zeros; GB/s are dense bytes per second.
json relu_kernel_throughput() {
  json rows = json::array();
  for (const double fraction : {0.0, 0.5, 0.9}) {
    at::Generator gen = at::detail::createCPUGenerator(1);
    at::Tensor x = at::rand({kKernelElements}, gen) + 1e-3;
    x.masked_fill_(at::rand({kKernelElements}, gen) < fraction, 0.0f);
    memory::CompressedRelu c;
    at::Tensor back;
    const double compress_ms = median_ms([&] { c = memory::compress_relu(x); });
    const double decompress_ms = median_ms([&] { back = memory::decompress_relu(c); });
    if (!at::equal(back.view(at::kInt), x.view(at::kInt))) {
      throw std::runtime_error("ReLU compression kernels: the round trip is not bit-exact");
    }
    at::Tensor copy = at::empty_like(x);
    const auto* from = x.data_ptr<float>();
    auto* to = copy.data_ptr<float>();
    const double memcpy_ms = median_ms([&] {
      at::parallel_for(0, kKernelElements, 1 << 16, [&](std::int64_t b, std::int64_t e) {
        std::memcpy(to + b, from + b, static_cast<std::size_t>(e - b) * sizeof(float));
      });
    });
    json row = kernel_throughput_json(static_cast<double>(x.nbytes()), compress_ms, decompress_ms,
                                      memcpy_ms);
    row.update({{"sparsity", c.sparsity()},
                {"elements", kKernelElements},
                {"dense_bytes", x.nbytes()},
                {"compressed_bytes", c.nbytes()},
                {"bitmap_plus_values_bytes", c.bitmap_plus_values_bytes()},
                {"format_overhead", static_cast<double>(c.nbytes()) /
                                            static_cast<double>(c.bitmap_plus_values_bytes()) -
                                        1.0}});
    rows.push_back(std::move(row));
  }
  return {{"device", "cpu"}, {"threads", at::get_num_threads()}, {"results", rows}};
}

/// The plan of a technique that uses units: per unit its measured costs, choice and swap-in
/// start, and the planner's figures and log.
json algorithms_to_json(const trainer::MemoryTechniques& t) {
  const auto& a = t.algorithm_plan();
  json layers = json::array();
  for (const auto& l : a.layers) {
    json algorithms = json::array();
    for (const auto& c : l.costs) {
      algorithms.push_back({{"algorithm", c.algorithm},
                            {"workspace_bytes", c.workspace_bytes},
                            {"forward_ms", c.forward_ms},
                            {"backward_ms", c.backward_ms},
                            {"max_abs_diff", c.max_abs_diff},
                            {"max_rel_diff", c.max_rel_diff}});
    }
    layers.push_back({{"name", l.name},
                      {"chosen", l.costs[l.chosen].algorithm},
                      {"least_workspace", l.costs[l.least].algorithm},
                      {"algorithms", algorithms}});
  }
  const auto measured = [&](std::int64_t bytes) { return bytes > 0 ? json(bytes) : json(nullptr); };
  return {{"layers", layers},
          {"replaced_layers", t.replaced_layers()},
          {"measured_plans", a.measurements},
          {"default_algorithms_activation_peak_bytes", measured(a.default_peak_bytes)},
          {"planned_activation_peak_bytes", measured(a.peak_bytes)},
          {"log", a.log}};
}

json plan_to_json(const trainer::MemoryTechniques& t) {
  if (!t.uses_units()) return {{"algorithms", algorithms_to_json(t)}};
  const memory::MemoryPlan& p = t.memory_plan();
  const auto& costs = t.unit_costs();
  json units = json::array();
  for (std::size_t i = 0; i < costs.size(); ++i) {
    const bool swapped = p.choices[i].swap;
    units.push_back(
        {{"name", costs[i].name},
         {"forward_ms", costs[i].forward_ms},
         {"backward_ms", costs[i].backward_ms},
         {"saved_bytes", costs[i].saved_bytes},
         {"input_bytes", costs[i].input_bytes},
         {"choice", memory::choice_name(p.choices[i])},
         {"swap_in_trigger", swapped ? json(p.schedule.trigger[i]) : json(nullptr)},
         {"swap_in_slack_ms", swapped ? json(p.schedule.slack_ms[i]) : json(nullptr)},
         {"predicted_stall_ms", swapped ? json(p.schedule.predicted_stall_ms[i]) : json(nullptr)},
         {"forward_wait_ms", swapped ? json(p.schedule.forward_wait_ms[i]) : json(nullptr)}});
  }
  return {{"units", units},
          {"budget_bytes", p.budget_bytes > 0 ? json(p.budget_bytes) : json(nullptr)},
          {"planned_activation_peak_bytes",
           p.measurements > 0 ? json(p.activation_peak_bytes) : json(nullptr)},
          {"measured_plans", p.measurements},
          {"estimated_overhead_ms", p.estimated_overhead_ms},
          {"swap_out_bytes_per_ms", t.swap_rates().out_bytes_per_ms},
          {"swap_in_bytes_per_ms", t.swap_rates().in_bytes_per_ms},
          {"triggers", "n = number of units: end of forward; k: unit k's backward begins"},
          {"timing", memory::timing_name(p.timing)},
          {"log", p.log},
          {"algorithms", t.algo() ? algorithms_to_json(t) : json(nullptr)}};
}

/// The swap row's figures: per measured step with the slack schedule, and the same steps with
/// on-demand swap-in.
json swap_to_json(const std::vector<memory::SwapStats>& scheduled,
                  const std::vector<memory::SwapStats>& on_demand,
                  const std::vector<double>& on_demand_ms, const trainer::MemoryTechniques& t) {
  const auto stall_ms = [](const std::vector<memory::SwapStats>& steps) {
    std::vector<double> v;
    for (const auto& s : steps) v.push_back(static_cast<double>(s.stall_ns) / 1e6);
    return v;
  };
  const memory::SwapStats& last = scheduled.back();
  const std::vector<double> slack_stalls = stall_ms(scheduled), demand_stalls = stall_ms(on_demand);
  return {{"swapped_out_tensors_per_step", last.swapped_out_tensors},
          {"swapped_out_bytes_per_step", last.swapped_out_bytes},
          {"swapped_in_bytes_per_step", last.swapped_in_bytes},
          {"prefetched_per_step", last.prefetched},
          {"on_demand_per_step", last.on_demand},
          {"swap_out_ms", static_cast<double>(last.swap_out_ns) / 1e6},
          {"swap_in_ms", static_cast<double>(last.swap_in_ns) / 1e6},
          {"stall_ms", median(slack_stalls)},
          {"stall_ms_per_step", slack_stalls},
          {"on_demand_stall_ms", median(demand_stalls)},
          {"on_demand_stall_ms_per_step", demand_stalls},
          {"on_demand_step_ms", median(on_demand_ms)},
          {"on_demand_swap_ins_per_step", on_demand.back().on_demand},
          {"resident_after_write_bytes",
           std::max_element(scheduled.begin(), scheduled.end(),
                            [](const memory::SwapStats& a, const memory::SwapStats& b) {
                              return a.resident_after_write_bytes < b.resident_after_write_bytes;
                            })
               ->resident_after_write_bytes},
          {"eviction",
           "each write flushed (sync_file_range) and dropped from the page cache "
           "(posix_fadvise DONTNEED), each read dropped again"},
          {"planned_out_bytes_per_second", t.swap_rates().out_bytes_per_ms * 1000.0},
          {"planned_in_bytes_per_second", t.swap_rates().in_bytes_per_ms * 1000.0}};
}

/// Trains a fresh workload with `technique` and measures its steps; `last` receives the last
/// measured step's window, `results` the losses and gradients of the measured steps.
json measure(const MemoryBenchOptions& o, long batch, const std::string& technique,
             std::int64_t budget_bytes, MemoryTracker& tracker, MemoryWindow& last, json& config,
             StepResults& results, std::ostream& explain_out, int warmup_steps) {
  PreparedWorkload w = is_resnet(o.workload) ? make_resnet(o, batch) : make_npi(o, batch);
  config = w.config;
  auto params = w.workload->parameters();
  std::int64_t param_count = 0;
  for (const auto& p : params) param_count += p.numel();
  config["parameters"] = param_count;
  // The session of `engram train` with this technique (its plan made on a scratch copy of the
  // model, so this row's model starts as every other's) and its stores for every step, warm-up
  // included. No clipping: the step of the peer and of the header.
  trainer::TrainingOptions to = detail::row_training_options(o, technique, batch);
  to.memory.techniques = row_techniques(technique);
  to.memory.budget_bytes = budget_bytes;
  to.memory.swap_bandwidth = o.swap_bandwidth;
  std::optional<PreparedWorkload> scratch;
  if (trainer::chosen_techniques(to.memory.techniques).plans())
    scratch.emplace(is_resnet(o.workload) ? make_resnet(o, batch) : make_npi(o, batch));
  trainer::TrainingSession session(*w.workload, to, scratch ? scratch->workload.get() : nullptr);
  scratch.reset();
  GradientRetag retag(params, tracker);
  session.stepper().add_hooks(&retag);
  trainer::MemoryTechniques& techniques = session.memory();
  json plan_json = nullptr;
  if (techniques.plans()) {
    plan_json = plan_to_json(techniques);
    if (o.explain) explain_out << "[" << technique << "] " << techniques.explain();
  }
  memory::CompressingStore* compressing = techniques.compressing();
  memory::SwapStore* swap = techniques.swap_store();
  const trainer::Stepper& stepper = session.stepper();
  detail::ReuseNotes reuse;

  for (int i = 0; i < warmup_steps; ++i) {
    train_step(session, w.batch);
    if (i == 0) results.first_grads = gradients_of(params);
    reuse.note(stepper.last_reuse(), /*is_measured=*/false);
  }
  // The process's peak resident set over this row's measured steps (where the kernel lets it be
  // reset; else since the process began).
  const bool rss_reset = reset_peak_rss();
  const std::int64_t rss_at_start = rss_bytes();
  std::vector<std::int64_t> peaks, activation_peaks;
  std::vector<double> ms;
  std::vector<memory::CompressionStats> compression;
  std::vector<memory::SwapStats> swapping;
  for (long i = 0; i < o.steps; ++i) {
    if (compressing) compressing->reset_stats();
    if (swap) swap->reset_stats();
    tracker.begin_window();
    const auto start = Clock::now();
    const double loss = train_step(session, w.batch);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (swap) swap->wait_for_transfers();  // nothing of this step is left in flight
    last = tracker.end_window();
    peaks.push_back(last.peak_bytes);
    activation_peaks.push_back(last.activation_peak_bytes);
    // The gradients the optimizer used in this step (it does not touch them).
    results.losses.push_back(loss);
    results.grads.push_back(gradients_of(params));
    reuse.note(stepper.last_reuse(), /*is_measured=*/true);
    if (compressing) compression.push_back(compressing->stats());
    if (swap) swapping.push_back(swap->stats());
  }
  const std::int64_t peak_rss = peak_rss_bytes();
  const std::int64_t spill_resident = swap ? swap->spill_resident_bytes() : 0;
  json swap_json = nullptr;
  if (swap) {
    // The same steps again with every swapped tensor read back on demand, for the stall time
    // the slack schedule saves (these steps train on; their figures are reported apart).
    techniques.set_slack_schedule(false);
    std::vector<memory::SwapStats> on_demand;
    std::vector<double> on_demand_ms;
    for (long i = 0; i < o.steps; ++i) {
      swap->reset_stats();
      const auto start = Clock::now();
      train_step(session, w.batch);
      on_demand_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      swap->wait_for_transfers();
      on_demand.push_back(swap->stats());
    }
    techniques.set_slack_schedule(true);
    swap_json = swap_to_json(swapping, on_demand, on_demand_ms, techniques);
    swap_json["spill_resident_bytes_after_measured_steps"] = spill_resident;
  }
  const PeakAttribution where = attribute_peak(last);
  return {{"technique", technique},
          {"lossless", trainer::chosen_techniques(to.memory.techniques).lossless()},
          {"store", techniques.store() != nullptr ? techniques.store()->name() : "plain"},
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
          {"activation_peak_ratio_vs_profiler_grads_kept", nullptr},
          {"loss_per_step", results.losses},
          {"peak_ratio", nullptr},
          {"activation_peak_ratio", nullptr},
          {"time_ratio", nullptr},
          {"max_abs_grad_diff", nullptr},
          {"first_step_grad_rel_l2_diff", nullptr},
          {"max_abs_loss_diff", nullptr},
          {"relu", compressing ? relu_json(compression, compressing->options().cache_decompressed)
                               : json(nullptr)},
          {"swap", swap_json},
          {"peak_rss_bytes", peak_rss},
          // Rows run one after another in this process: what earlier rows left resident (the
          // allocator's cache, a reuse arena) is in the peak; above the start is this row's.
          {"rss_at_start_bytes", rss_at_start},
          {"peak_rss_above_start_bytes",
           peak_rss >= 0 && rss_at_start >= 0 ? json(peak_rss - rss_at_start) : json(nullptr)},
          {"peak_rss_since", rss_reset ? "the row's measured steps" : "the process's start"},
          {"threads", {{"compute", o.threads}, {"swap_io", swap ? 1 : 0}}},
          {"reuse",
           reuse.measured.empty() ? json(nullptr) : reuse.to_json()},
          {"plan", plan_json},
          {"budget_bytes", budget_bytes > 0 ? json(budget_bytes) : json(nullptr)}};
}

/// Fills each row's ratios and differences against the `none` row (if there is one): memory and
/// time ratios, the largest absolute difference of any gradient or loss over the measured steps,
/// and for relu the measured saving against bitmap-plus-values' prediction.
void compare_with_none(const std::vector<std::string>& techniques,
                       const std::vector<StepResults>& results, json& rows) {
  const auto found = std::find(techniques.begin(), techniques.end(), "none");
  if (found == techniques.end()) return;
  const auto base_index = static_cast<std::size_t>(found - techniques.begin());
  const json base = rows[base_index];
  const StepResults& reference = results[base_index];
  const auto ratio = [](const json& a, const json& b) { return a.get<double>() / b.get<double>(); };
  for (std::size_t t = 0; t < rows.size(); ++t) {
    json& row = rows[t];
    row["peak_ratio"] = ratio(row["peak_bytes"], base["peak_bytes"]);
    row["activation_peak_ratio"] =
        ratio(row["activation_peak_bytes"], base["activation_peak_bytes"]);
    row["time_ratio"] = ratio(row["step_ms"], base["step_ms"]);
    double grad_diff = 0, loss_diff = 0;
    for (std::size_t step = 0; step < reference.grads.size(); ++step) {
      const auto& a = results[t].grads[step];
      const auto& b = reference.grads[step];
      if (a.size() != b.size()) throw std::logic_error("rows with different parameters");
      for (std::size_t i = 0; i < a.size(); ++i) {
        // NaN-aware: a NaN on either side is a difference.
        const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
        if (!(d <= grad_diff)) grad_diff = std::isnan(d) ? d : std::max(grad_diff, d);
      }
      loss_diff = std::max(loss_diff, std::fabs(results[t].losses[step] - reference.losses[step]));
    }
    // For techniques that are not bit-exact (algo): the first step's gradients, from the same
    // weights in every row, as the relative L2 norm of their difference. (Later steps' weights
    // differ, and so do their gradients; and a rounding difference that moves one ReLU input
    // across zero changes single gradient entries by a visible share, not the norm.)
    double diff_squares = 0, reference_squares = 0;
    const auto& first = results[t].first_grads;
    const auto& first_reference = reference.first_grads;
    if (first.size() != first_reference.size())
      throw std::logic_error("rows with different parameters");
    for (std::size_t i = 0; i < first.size(); ++i) {
      const double r = first_reference[i], d = static_cast<double>(first[i]) - r;
      diff_squares += d * d;
      reference_squares += r * r;
    }
    row["first_step_grad_rel_l2_diff"] = reference_squares > 0
                                             ? std::sqrt(diff_squares / reference_squares)
                                             : std::sqrt(diff_squares);
    row["max_abs_grad_diff"] = grad_diff;
    row["max_abs_loss_diff"] = loss_diff;
    // The saving against bitmap plus values' prediction means something for relu alone: "all"
    // saves by recompute and swap as well.
    if (row["relu"].is_null() || row["technique"] != "relu") continue;
    json& relu = row["relu"];
    std::vector<std::int64_t> measured;
    json versus = json::array(), worst = nullptr;  // null where nothing was predicted
    const auto predicted = relu["predicted_saving_bytes_per_step"].get<std::vector<std::int64_t>>();
    for (std::size_t step = 0; step < predicted.size(); ++step) {
      measured.push_back(base["activation_peak_bytes_per_step"][step].get<std::int64_t>() -
                         row["activation_peak_bytes_per_step"][step].get<std::int64_t>());
      if (predicted[step] <= 0) {
        versus.push_back(nullptr);
        continue;
      }
      const double v = static_cast<double>(measured.back()) / static_cast<double>(predicted[step]);
      versus.push_back(v);
      if (worst.is_null() || std::fabs(v - 1.0) > std::fabs(worst.get<double>() - 1.0)) worst = v;
    }
    relu["measured_saving_bytes_per_step"] = measured;
    relu["saving_vs_prediction_per_step"] = versus;
    relu["saving_vs_prediction"] = worst;
  }
}

}  // namespace

namespace detail {

json run_resnet_peer(const MemoryBenchOptions& o, long batch, const json& config,
                     const std::string& script, const std::string& source,
                     const std::vector<std::string>& extra) {
  const ScratchDir dir("bench-" + source);
  std::string widths;
  for (const auto& w : config.at("widths")) {
    widths += (widths.empty() ? "" : ",") + std::to_string(w.get<long>());
  }
  std::vector<std::string> args{o.python,
                                peer_script(script),
                                "--batch",
                                std::to_string(batch),
                                "--image-size",
                                std::to_string(config.at("image_size").get<long>()),
                                "--widths",
                                widths,
                                "--blocks-per-stage",
                                std::to_string(config.at("blocks_per_stage").get<long>()),
                                "--num-classes",
                                std::to_string(config.at("num_classes").get<long>()),
                                "--seed",
                                std::to_string(o.seed),
                                "--threads",
                                std::to_string(o.threads)};
  if (config.contains("blocks")) {
    std::string blocks;
    for (const auto& b : config.at("blocks"))
      blocks += (blocks.empty() ? "" : ",") + std::to_string(b.get<long>());
    args.insert(args.end(), {"--blocks", blocks});
  }
  if (config.value("bottleneck", false)) args.push_back("--bottleneck");
  if (config.value("imagenet_stem", false)) args.push_back("--imagenet-stem");
  args.insert(args.end(), extra.begin(), extra.end());
  const auto wall_start = Clock::now();
  json peer = peer_json(run_peer(args, dir));
  peer["source"] = source;
  peer["wall_seconds"] = std::chrono::duration<double>(Clock::now() - wall_start).count();
  if (peer.at("parameters").get<std::int64_t>() != config.at("parameters").get<std::int64_t>()) {
    throw std::runtime_error("the Python peer " + script + " built a different network (" +
                             std::to_string(peer.at("parameters").get<std::int64_t>()) +
                             " parameters, " + config.at("parameters").dump() + " in C++)");
  }
  return peer;
}

}  // namespace detail

namespace {

using detail::run_resnet_peer;


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

/// A difference for a table column: "0", or three significant digits ("3.17e-03").
std::string difference(const json& value) {
  if (value.is_null()) return "-";
  const double v = value.get<double>();
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

}  // namespace

const std::vector<std::string>& memory_workloads() {
  static const std::vector<std::string> names{"npi", "resnet", "resnet50"};
  return names;
}

std::int64_t resolve_budget(const std::string& budget, std::int64_t none_activation_peak) {
  if (budget.empty()) return 0;
  const bool fraction = budget.back() == 'x';
  const std::string number = fraction ? budget.substr(0, budget.size() - 1) : budget;
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != number.size() || number.empty() || !(value > 0) || !std::isfinite(value)) {
    throw InvalidOption("budget",
                        "must be a positive number of bytes or a fraction of none's "
                        "activation peak such as 0.5x, not '" +
                            budget + "'");
  }
  // A byte count is whole, at least one byte (below one it truncated to 0: no budget) and fits
  // the counters (past 2^63 it wrapped to a negative bound).
  if (!fraction && (value < 1 || value > 9e18 || value != std::floor(value))) {
    throw InvalidOption("budget",
                        "must be a whole number of bytes from 1, or a fraction of none's "
                        "activation peak such as 0.5x, not '" +
                            budget + "'");
  }
  if (!fraction) return static_cast<std::int64_t>(value);
  if (none_activation_peak < 0) {
    throw InvalidOption("budget", budget +
                                      " is a fraction of the none row's activation peak: "
                                      "put none first among the techniques");
  }
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(value * static_cast<double>(none_activation_peak)));
}

namespace {

/// Throws InvalidOption for options that cannot run, and a runtime error for a report that cannot
/// be written: before minutes of measuring, not after.
void validate_options(const MemoryBenchOptions& options) {
  const auto& workloads = memory_workloads();
  if (std::find(workloads.begin(), workloads.end(), options.workload) == workloads.end()) {
    throw InvalidOption("workload",
                        "must be one of " + joined(workloads) + ", not '" + options.workload + "'");
  }
  if (options.techniques.empty())
    throw InvalidOption("techniques", "must name at least one technique");
  for (const auto& row : options.techniques) {
    for (const auto& t : row_techniques(row)) {
      const std::vector<std::string> valid = trainer::memory_technique_names();
      if (std::find(valid.begin(), valid.end(), t) == valid.end()) {
        throw InvalidOption("techniques", "has an unknown technique '" + t + "' (valid: " +
                                              joined(valid) + ", or several joined by +)");
      }
    }
  }
  if (options.json_path.empty()) throw InvalidOption("json_path", "is required");
  if (options.max_batch < 1) throw InvalidOption("max_batch", "must be at least 1");
  if (!(options.time_limit >= 0) || !std::isfinite(options.time_limit))
    throw InvalidOption("time_limit", "must be seconds, 0 for none");
  if (options.time_limit > 0 && !options.find_max_batch)
    throw InvalidOption("time_limit", "bounds --find-max-batch's search, which is not asked for");
  if (options.find_max_batch) {
    for (const auto& row : options.techniques) {
      if (trainer::chosen_techniques(row_techniques(row)).reuse())
        throw InvalidOption("techniques",
                            "cannot hold reuse with --find-max-batch: reuse's first step is "
                            "recorded on the caching allocator, as none's, so its largest batch "
                            "is none's");
    }
  }
  // The device before anything else that takes time: a GPU this process does not see is a usage
  // error naming what is missing.
  const c10::Device device = trainer::resolve_device(options.device);
  if (!device.is_cpu()) {
    if (!is_resnet(options.workload))
      throw InvalidOption("workload", "must be resnet or resnet50 on " + options.device);
    if (options.techniques.empty() || options.techniques.front() != "none")
      throw InvalidOption("techniques", "must begin with none on " + options.device +
                                            ": every other row is compared with it");
    for (const auto& row : options.techniques) {
      for (const auto& t : row_techniques(row)) {
        if (t != "none" && t != "relu" && t != "recompute" && t != "swap" && t != "reuse" &&
            t != "algo" && t != "all")
          throw InvalidOption("techniques",
                              "can be none, relu, recompute, swap, reuse, algo and all on " +
                                  options.device + ", not " + t + " (host memory only so far)");
      }
    }
    if (!options.budget.empty())
      throw InvalidOption("budget", "is for the CPU: on " + options.device +
                                        " bound the device's memory with --memory-cap");
  }
  if (!options.memory_cap.empty()) {
    // The form first, wherever the bench runs (as train npi's --memory-cap): a malformed cap is
    // named as one, not only as misplaced.
    trainer::check_memory_cap(options.memory_cap, "memory_cap");
    if (device.is_cpu())
      throw InvalidOption("memory_cap", "limits a device's memory, and the bench runs on the CPU "
                                        "(--device cuda; on the CPU, --budget)");
  }
  if (options.find_max_batch && options.memory_cap.empty())
    throw InvalidOption("find_max_batch", "searches under a device-memory cap: give --memory-cap "
                                          "(and --device cuda)");
  trainer::check_swap_bandwidth(options.swap_bandwidth, "swap_bandwidth");
  resolve_budget(options.budget, 1);  // the form, before anything runs
  bool plans = false;
  for (const auto& row : options.techniques)
    plans = plans || trainer::chosen_techniques(row_techniques(row)).plans();
  if (!options.budget.empty() && !plans) {
    throw InvalidOption("budget",
                        "applies to recompute, swap, all and algo, none of which is among the "
                        "techniques");
  }
  if (!options.budget.empty() && options.budget.back() == 'x' &&
      (options.techniques.empty() || options.techniques.front() != "none")) {
    throw InvalidOption("budget", options.budget +
                                      " is a fraction of the none row's activation "
                                      "peak: put none first among the techniques");
  }
  if (options.steps < 1) throw InvalidOption("steps", "must be at least 1");
  // Upper bounds far above a benchmark's sizes (--hidden: nn::kMaxWidth, as for train), where a
  // mistyped one was a torch allocation error with its stack trace.
  if (options.batch < 0 || options.batch > 65536)
    throw InvalidOption("batch", "must be between 1 and 65536 (0: the workload's default)");
  if (options.threads < 1) throw InvalidOption("threads", "must be at least 1");
  if (options.image_size < 0 || options.image_size > 1024)
    throw InvalidOption("image_size", "must be between 1 and 1024 (0: the workload's default)");
  if (options.width < 1 || options.width > 1024)
    throw InvalidOption("width", "must be between 1 and 1024");
  nn::check_width(options.hidden, "hidden");
  if (options.impl != "engram" && options.impl != "torch") {
    throw InvalidOption("impl", "must be engram or torch, not '" + options.impl + "'");
  }
  if (options.impl != "engram" && options.workload != "npi") {
    throw InvalidOption("impl", "torch: only the npi workload has a plain-torch implementation");
  }
  {
    // Fail before minutes of measuring, not after, when the report cannot be written.
    if (same_file(options.json_path, options.trace_path))
      throw InvalidOption("trace_path", "is the file the JSON goes to");
    check_writable(options.json_path);
    if (!options.trace_path.empty()) check_writable(options.trace_path);
  }
  // The PyTorch peers run after the rows: the ResNet's on the CPU, every workload's on a GPU.
  if (!options.skip_peer && (is_resnet(options.workload) || !device.is_cpu()))
    check_peer_launcher(options.python, "python");
}

/// The report's header and one row per technique (after a discarded warm-up row), compared with
/// the none row; `last` is the last measured step's window (for the trace).
json measure_rows(const MemoryBenchOptions& options, long batch, MemoryTracker& tracker,
                  MemoryWindow& last, std::ostream& out) {
  const int warmup_steps = detail::warmup_steps(options.techniques);
  json report{{"benchmark", "memory"},
              {"workload", options.workload},
              {"machine", machine_json()},
              {"versions", versions_json()},
              {"seed", options.seed},
              {"threads", options.threads},
              {"steps", options.steps},
              {"warmup_steps", warmup_steps},
              {"learning_rate", kLearningRate},
              {"optimizer", "adam"},
              {"config", nullptr},
              {"peer", nullptr},
              {"results", json::array()}};

  report["versions"]["python_torch"] = nullptr;  // filled in by the peer
  report["versions"]["python"] = nullptr;

  {
    // A row of `none`, measured and thrown away: otherwise the first row alone pays the
    // process's first touches of its memory (page faults, the heap's growth), which skews every
    // time ratio against it (a first none row's median step measured 18% above its own last steps).
    MemoryWindow discarded_window;
    json discarded_config;
    StepResults discarded;
    std::ostringstream quiet;
    measure(options, batch, "none", 0, tracker, discarded_window, discarded_config, discarded,
            quiet, warmup_steps);
  }
  report["warmup_row"] = "none";

  std::vector<StepResults> step_results(options.techniques.size());
  for (std::size_t t = 0; t < options.techniques.size(); ++t) {
    json config;
    const std::string& technique = options.techniques[t];
    const bool plans = trainer::chosen_techniques(row_techniques(technique)).plans();
    std::int64_t none_peak = -1;
    for (const auto& row : report["results"]) {
      if (row["technique"] == "none") none_peak = row["activation_peak_bytes"].get<std::int64_t>();
    }
    const std::int64_t budget = plans ? resolve_budget(options.budget, none_peak) : 0;
    report["results"].push_back(measure(options, batch, technique, budget, tracker, last, config,
                                        step_results[t], out, warmup_steps));
    report["config"] = config;
  }
  compare_with_none(options.techniques, step_results, report["results"]);
  const bool relu = std::find(options.techniques.begin(), options.techniques.end(), "relu") !=
                    options.techniques.end();
  report["relu_kernels"] = relu ? relu_kernel_throughput() : json(nullptr);
  return report;
}

/// PyTorch's figures for the same model and batch (resnet, unless skipped): torch.profiler's
/// activation peak, each row's ratio to it, and with recompute torch.utils.checkpoint's step.
void add_peers(const MemoryBenchOptions& options, long batch, json& report) {
  const bool resnet = is_resnet(options.workload);
  if (resnet && !options.skip_peer) {
    json peer = run_resnet_peer(options, batch, report["config"], "resnet_memory_peer.py",
                                "torch.profiler");
    report["versions"]["python_torch"] = peer.at("torch_version");
    report["versions"]["python"] = peer.at("python_version");
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
  report["checkpoint_peer"] = nullptr;
  const bool recompute = std::any_of(options.techniques.begin(), options.techniques.end(),
                                     [](const std::string& t) { return t == "recompute"; });
  if (resnet && !options.skip_peer && recompute) {
    json peer =
        run_resnet_peer(options, batch, report["config"], "resnet_checkpoint_peer.py",
                        "torch.utils.checkpoint", {"--steps", std::to_string(options.steps)});
    report["checkpoint_peer"] = std::move(peer);
  }
}

/// The rows as two tables: memory and time, then each against none.
void print_tables(const MemoryBenchOptions& options, const json& report, std::ostream& out) {
  out << "Training-step memory: " << describe(report["config"]) << ", " << options.threads
      << " thread(s), " << options.steps << " measured step(s) after "
      << report["warmup_steps"].get<int>()
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
  const bool compared = std::any_of(report["results"].begin(), report["results"].end(),
                                    [](const json& r) { return !r["time_ratio"].is_null(); });
  if (compared && report["results"].size() > 1) {
    out << "against none: technique  peak ratio  activation peak ratio  time ratio"
           "  max |grad diff|  max |loss diff|\n";
    for (const auto& r : report["results"]) {
      out << "              " << std::left << std::setw(11) << r["technique"].get<std::string>()
          << std::right << std::setw(10) << fixed(r["peak_ratio"].get<double>(), 3) << std::setw(23)
          << fixed(r["activation_peak_ratio"].get<double>(), 3) << std::setw(12)
          << fixed(r["time_ratio"].get<double>(), 3) << std::setw(17)
          << difference(r["max_abs_grad_diff"]) << std::setw(17)
          << difference(r["max_abs_loss_diff"]) << "\n";
    }
  }
}

/// What each technique did: the lossy rows' gradient error, ReLU compression's figures, swap's
/// traffic and stall, the algorithm plan, the ReLU kernels' throughput.
void print_details(const MemoryBenchOptions& options, const json& report, std::ostream& out) {
  for (const auto& r : report["results"]) {
    if (r["lossless"].get<bool>() || r["first_step_grad_rel_l2_diff"].is_null()) continue;
    out << r["technique"].get<std::string>() << ": lossy; the first step's gradients differ from "
        << "none's by " << r["first_step_grad_rel_l2_diff"].get<double>()
        << " (relative L2 norm), the largest gradient difference over the steps is "
        << difference(r["max_abs_grad_diff"]) << "\n";
  }
  for (const auto& r : report["results"]) {
    const json& relu = r["relu"];
    if (relu.is_null()) continue;
    out << r["technique"].get<std::string>() << ": " << relu["compressed_tensors_per_step"].dump()
        << " ReLU outputs compressed per step, sparsity "
        << fixed(relu["sparsity"].get<double>(), 3) << ", compression ratio "
        << fixed(relu["compression_ratio"].get<double>(), 3) << "; saving "
        << mib(relu["predicted_saving_bytes_per_step"].back())
        << " MiB predicted by bitmap plus values";
    if (!relu["saving_vs_prediction"].is_null()) {
      out << ", " << mib(relu["measured_saving_bytes_per_step"].back())
          << " MiB measured (measured / predicted, the step farthest from 1: "
          << fixed(relu["saving_vs_prediction"].get<double>(), 3) << ")";
    }
    out << "\n";
  }
  for (const auto& r : report["results"]) {
    const json& swap = r["swap"];
    if (swap.is_null()) continue;
    out << r["technique"].get<std::string>() << ": swap moved "
        << mib(swap["swapped_out_bytes_per_step"]) << " MiB out and back per step; stall "
        << fixed(swap["stall_ms"].get<double>(), 1) << " ms per step with the "
        << r["plan"]["timing"].get<std::string>() << " schedule, "
        << fixed(swap["on_demand_stall_ms"].get<double>(), 1) << " ms on demand\n";
  }
  for (const auto& r : report["results"]) {
    if (r["plan"].is_null() || r["plan"]["algorithms"].is_null()) continue;
    const json& a = r["plan"]["algorithms"];
    out << r["technique"].get<std::string>() << ": " << a["replaced_layers"].size() << " of "
        << a["layers"].size() << " layers on another algorithm";
    std::string sep = ": ";
    for (const auto& l : a["layers"]) {
      if (l["chosen"] == "default") continue;
      out << sep << l["name"].get<std::string>() << " (" << l["chosen"].get<std::string>() << ")";
      sep = ", ";
    }
    out << "\n";
  }
  if (!report["relu_kernels"].is_null()) {
    const json& k = report["relu_kernels"];
    out << "relu kernels (CPU, " << k["threads"].dump() << " thread(s), "
        << k["results"][0]["elements"].dump() << " elements), GB/s of dense bytes:\n";
    for (const auto& r : k["results"]) {
      out << "  sparsity " << fixed(r["sparsity"].get<double>(), 2) << ": compress "
          << fixed(r["compress_gbps"].get<double>(), 2) << ", decompress "
          << fixed(r["decompress_gbps"].get<double>(), 2) << ", memcpy "
          << fixed(r["memcpy_gbps"].get<double>(), 2) << "\n";
    }
  }
  if (!options.trace_path.empty()) out << "wrote " << options.trace_path << "\n";
  out << "wrote " << options.json_path << "\n";
}

}  // namespace

void run_memory_bench(const MemoryBenchOptions& options, std::ostream& out) {
  validate_options(options);
  if (options.device != "cpu") {
    if (options.find_max_batch) {
      run_max_batch_bench(options, out);
    } else {
      run_device_memory_bench(options, out);
    }
    return;
  }
  const bool resnet = is_resnet(options.workload);
  const long batch =
      options.batch > 0 ? options.batch : (resnet ? kDefaultResNetBatch : kDefaultNpiBatch);

  // Before any model exists, so that every parameter is counted.
  MemoryTracker& tracker = MemoryTracker::install();
  trainer::set_compute_threads(options.threads);
  MemoryWindow last;
  json report = measure_rows(options, batch, tracker, last, out);
  add_peers(options, batch, report);
  if (!options.trace_path.empty()) {
    memory::write_chrome_trace(options.trace_path, last, "engram bench memory " + options.workload);
  }
  write_file_atomically(options.json_path, report.dump(2) + "\n");
  print_tables(options, report, out);
  print_details(options, report, out);
}

}  // namespace engram::bench
