#include "npi/Npi.h"

#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "datasets/ProgramExpression.h"
#include "datasets/TraceFile.h"
#include "nn/Width.h"
#include "npi/Interpreter.h"
#include "npi/NpiWorkload.h"
#include "trainer/Checkpoint.h"
#include "trainer/Device.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"
#include "trainer/TrainingState.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>

namespace engram::npi {
namespace {

using nlohmann::json;

/// The interpreter's limits: 0 takes the task's default for each length, a negative one is an
/// error (it was silently taken for the default).
void check_limits(long max_steps, int max_depth) {
  if (max_steps < 0)
    throw InvalidOption("max_steps",
                        "must be at least 1, or 0 for the default (scaled with length)");
  if (max_depth < 0)
    throw InvalidOption("max_depth",
                        "must be at least 1, or 0 for the default (scaled with length)");
}

/// The most input symbols one evaluation length may ask for (count x length): far above any use,
/// so that a mistyped count is refused rather than exhausting memory.
constexpr double kMaxEvalSymbols = 1e8;

void save_model(const std::string& path, NpiModel& model) {
  trainer::save_module(path, "npi", model->config().to_json(), *model);
}

NpiModel load_model(const std::string& path, const datasets::Task& task) {
  return trainer::load_module(path, "npi", [&](const std::string& config_json) {
    const NpiConfig config = NpiConfig::from_json(config_json);
    if (config.task != task.name()) {
      throw FormatError("'" + path + "' is a model of task '" + config.task + "', not '" +
                        task.name() + "'");
    }
    if (config.num_programs != static_cast<int>(task.programs().size()) ||
        config.observation_sizes != task.observation_sizes() ||
        config.arg_size != task.arg_size()) {
      throw FormatError("'" + path + "' does not match this version of task '" + task.name() +
                        "'");
    }
    return NpiModel(config);
  });
}

std::string format_call(const datasets::Task& task, const datasets::Call& call) {
  const std::string args = task.format_args(call.program, call.args);
  const std::string& name = task.programs().at(call.program).name;
  return args.empty() ? name : name + "(" + args + ")";
}

}  // namespace

std::vector<int> parse_lengths(const std::string& text) {
  std::vector<int> lengths;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 1) {
      throw InvalidOption("lengths", "expects positive integers separated by commas, got '" +
                                         text + "'");
    }
    lengths.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return lengths;
}

TrainOptions train_defaults(const std::string& task) {
  datasets::task_by_name(task);  // InputError for an unknown task
  TrainOptions options;
  options.task = task;
  if (task == "sort" || task == "sort-recursive") {
    options.hidden = 64;
    options.training.batch = 1;
  }
  return options;
}

TrainReport train_npi(const TrainOptions& options) {
  const auto& task = datasets::task_by_name(options.task);
  trainer::TrainingOptions t = options.training;
  // Where an interrupted run saves its state.
  if (t.checkpoint_path.empty())
    t.checkpoint_path = trainer::default_checkpoint_path(options.out_path);
  trainer::validate(t, /*min_steps=*/1);
  nn::check_width(options.hidden, "hidden");
  if (options.impl != "engram" && options.impl != "torch")
    throw InvalidOption("impl", "must be engram or torch, not '" + options.impl + "'");
  if (options.out_path.empty()) throw InvalidOption("out_path", "is required");
  if (options.impl != "engram" &&
      trainer::chosen_techniques(options.training.memory.techniques).uses_units())
    throw InvalidOption("memory.techniques",
                        "recompute and swap need impl engram: the torch layers are not cut into "
                        "units");
  trainer::check_device_support(t);
  if (options.training.writes_files()) {
    // Fail before training, not after it, when the model cannot be written.
    check_writable(options.out_path);
  }
  const auto data = datasets::read_trace_file(options.data_path);
  if (data.task != task.name()) {
    throw FormatError("'" + options.data_path + "' holds traces of task '" + data.task +
                      "', not '" + task.name() + "'");
  }
  torch::manual_seed(options.training.seed);
  NpiConfig config = NpiConfig::for_task(task);
  config.hidden = options.hidden;
  config.layers_impl = options.impl;
  NpiModel model(config);
  const NpiDataset dataset(task, data.traces);
  NpiWorkload workload(model, dataset);
  t.identity = config.to_json() + "\ndata " + trainer::file_identity(options.data_path);
  // The session plans recompute and swap on the first batch (forward and backward passes only:
  // the NPI has no state that they move) and runs every step under the plan.
  const trainer::TrainSummary summary = trainer::train(workload, t);
  if (options.training.writes_files()) save_model(options.out_path, model);
  return {summary.steps, summary.seconds, summary.final_loss, summary.examples_per_second,
          summary.memory_plan};
}

std::vector<LengthReport> evaluate_npi(const EvalOptions& options) {
  const auto bound = datasets::bind_task(options.task, options.binding);
  const auto& task = *bound;
  if (options.lengths.empty()) throw InvalidOption("lengths", "is required");
  if (options.count < 1) throw InvalidOption("count", "must be at least 1");
  check_limits(options.max_steps, options.max_depth);
  for (int length : options.lengths) {
    if (length < task.min_length()) {
      throw InvalidOption("lengths", "must be at least " + std::to_string(task.min_length()) +
                                         " for " + task.name());
    }
    task.check_length_option(length, "lengths");
    if (static_cast<double>(options.count) * length > kMaxEvalSymbols)
      throw InvalidOption("count",
                          "times each length must be at most 1e8 (the problems are "
                          "held whole)");
  }
  trainer::set_threads_option(options.threads);
  const c10::Device device = trainer::resolve_device(options.device);
  NpiModel model = load_model(options.model_path, task);
  model->to(device);
  std::mt19937_64 rng(options.seed);
  std::vector<LengthReport> reports;
  for (int length : options.lengths) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> inputs;
    for (int i = 0; i < options.count; ++i) inputs.push_back(task.random_input(length, rng));
    InterpretOptions limits{options.max_steps, options.max_depth};
    const auto runs = interpret(model, task, inputs, limits);
    LengthReport report;
    report.task = task.name();
    if (const auto primitive = task.bound_primitive()) {
      report.primitive = primitive->ref().text();
      report.primitive_implementation = primitive->implementation();
      report.k = primitive->domain();
    }
    report.length = length;
    report.count = options.count;
    int exact = 0;
    for (const auto& run : runs) {
      const std::string expected = task.solve(run.input);
      const bool correct = run.error.empty() && run.output == expected;
      const auto reference = datasets::call_sequence(task.teach(run.input), task.programs());
      long diverged = -1;
      const std::size_t common = std::min(reference.size(), run.calls.size());
      for (std::size_t k = 0; k < common && diverged < 0; ++k) {
        if (!(reference[k] == run.calls[k])) diverged = static_cast<long>(k);
      }
      if (diverged < 0 && reference.size() != run.calls.size())
        diverged = static_cast<long>(common);
      report.correct += correct ? 1 : 0;
      exact += diverged < 0 ? 1 : 0;
      if ((!correct || diverged >= 0) &&
          static_cast<int>(report.failures.size()) < options.max_failures) {
        Failure f{run.input, expected, run.output, run.error, diverged, "", ""};
        if (diverged >= 0) {
          const auto k = static_cast<std::size_t>(diverged);
          if (k < reference.size()) f.expected_call = format_call(task, reference[k]);
          if (k < run.calls.size()) f.generated_call = format_call(task, run.calls[k]);
        }
        report.failures.push_back(std::move(f));
      }
    }
    report.accuracy = static_cast<double>(report.correct) / options.count;
    report.trace_exact = static_cast<double>(exact) / options.count;
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    reports.push_back(std::move(report));
  }
  return reports;
}

RunReport run_npi(const RunOptions& options) {
  check_limits(options.max_steps, options.max_depth);
  const auto bound = datasets::bind_task(options.task, options.binding);
  const auto& task = *bound;
  task.make_environment(options.input);  // validates the input before any file is read
  trainer::set_threads_option(options.threads);
  const c10::Device device = trainer::resolve_device(options.device);
  NpiModel model = load_model(options.model_path, task);
  model->to(device);
  const auto runs = interpret(model, task, {options.input}, {options.max_steps, options.max_depth});
  RunReport report;
  report.task = task.name();
  if (const auto primitive = task.bound_primitive()) report.primitive = primitive->ref().text();
  report.input = options.input;
  report.output = runs[0].output;
  report.expected = task.solve(options.input);
  report.error = runs[0].error;
  report.correct = report.error.empty() && report.output == report.expected;
  report.steps = runs[0].steps;
  report.calls = runs[0].calls;
  return report;
}

namespace {

/// The pipeline's stages in the order they run (inputs first), with the value each produced.
struct StageRunner {
  const PipelineOptions& options;
  std::vector<int> xs, ys;
  PipelineReport& report;

  /// The list a sub-expression evaluates to; empty optional after an error.
  std::optional<std::vector<int>> run(const datasets::Expression& e) {
    if (e.function == "xs") return xs;
    if (e.function == "ys") return ys;
    std::vector<std::vector<int>> lists;
    for (const auto& input : e.inputs) {
      auto value = run(input);
      if (!value) return std::nullopt;
      lists.push_back(std::move(*value));
    }
    RunOptions ro;
    ro.model_path = options.models_dir + "/" + e.function + ".pt";
    ro.task = e.function;
    ro.binding.primitive = options.primitive(e.primitive);
    ro.binding.init = e.init;
    ro.input = datasets::format_value_list(lists[0]);
    if (lists.size() == 2) ro.input += ";" + datasets::format_value_list(lists[1]);
    ro.threads = options.threads;
    ro.device = options.device;
    ro.max_steps = options.max_steps;
    ro.max_depth = options.max_depth;
    StageReport stage{e.text(), run_npi(ro)};
    const bool failed = !stage.run.error.empty();
    if (failed) report.error = "stage " + stage.expression + ": " + stage.run.error;
    const std::string output = stage.run.output;
    report.stages.push_back(std::move(stage));
    if (failed) return std::nullopt;
    return datasets::parse_value_list(output, options.k);
  }
};

/// Calls `visit` on every stage of `program` (not its input lists), outermost first.
template <typename Visit>
void for_each_stage(const datasets::Expression& program, const Visit& visit) {
  std::vector<const datasets::Expression*> pending{&program};
  while (!pending.empty()) {
    const datasets::Expression* e = pending.back();
    pending.pop_back();
    if (e->is_list()) continue;
    visit(*e);
    for (const auto& input : e->inputs) pending.push_back(&input);
  }
}

/// The trained program of stage `e` in `models_dir`; std::runtime_error when there is none.
std::string stage_model_path(const std::string& models_dir, const datasets::Expression& e) {
  const std::string model = models_dir + "/" + e.function + ".pt";
  if (!std::filesystem::is_regular_file(model)) {
    throw std::runtime_error("no model for " + e.function + ": '" + model +
                             "' not found (train one with engram train npi --task " + e.function +
                             ")");
  }
  return model;
}

}  // namespace

PipelineReport run_pipeline(const PipelineOptions& options) {
  check_limits(options.max_steps, options.max_depth);
  // K before the input's values are checked against it ("outside the domain 0..-6").
  if (options.k < datasets::kMinDomain || options.k > datasets::kMaxDomain)
    throw InvalidOption("k", "must lie in " + std::to_string(datasets::kMinDomain) + ".." +
                                 std::to_string(datasets::kMaxDomain));
  const datasets::Expression program = datasets::parse_expression(options.program);
  if (program.is_list()) {
    throw InputError(
        "program column 1: the program applies no function; write e.g. "
        "map(double, " +
        program.function + ")");
  }
  datasets::check_expression_domain(program, options.k);
  const auto semicolon = options.input.find(';');
  const bool two = datasets::uses_second_list(program);
  if (two != (semicolon != std::string::npos)) {
    throw InputError(two ? "the program reads ys: give two lists separated by ';', "
                                     "e.g. --input \"1,2;3,4\""
                                   : "the program reads only xs, but --input has a ';' at "
                                     "column " +
                                         std::to_string(semicolon + 1));
  }
  PipelineReport report;
  report.program = program.text();
  report.input = options.input;
  StageRunner runner{options, {}, {}, report};
  runner.xs = datasets::parse_value_list(options.input.substr(0, semicolon), options.k);
  if (two)
    runner.ys =
        datasets::parse_value_list(options.input.substr(semicolon + 1), options.k, semicolon + 1);
  if (options.models_dir.empty()) throw InvalidOption("models_dir", "is required");
  // Every stage's model file and primitive before any stage runs.
  for_each_stage(program, [&](const datasets::Expression& e) {
    stage_model_path(options.models_dir, e);
    options.primitive(e.primitive);  // UsageError when the library lacks its family
  });
  trainer::set_threads_option(options.threads);
  trainer::resolve_device(options.device);
  const auto expected = datasets::evaluate_symbolic(program, runner.xs, runner.ys, options.k);
  report.expected = datasets::format_value_list(expected);
  const auto output = runner.run(program);
  report.output = report.stages.empty() ? "" : report.stages.back().run.output;
  report.correct = output.has_value() && report.output == report.expected;
  return report;
}

void check_pipeline_models(const std::string& program, const std::string& models_dir) {
  for_each_stage(datasets::parse_expression(program), [&](const datasets::Expression& e) {
    load_model(stage_model_path(models_dir, e), datasets::task_by_name(e.function));
  });
}

std::string pipeline_text(const PipelineReport& report) {
  std::string out;
  for (std::size_t i = 0; i < report.stages.size(); ++i) {
    const auto& stage = report.stages[i];
    out += "stage " + std::to_string(i + 1) + ": " + stage.expression + "   input [" +
           stage.run.input + "]\n";
    std::string tree = call_tree_text(stage.run);
    std::size_t start = 0;
    while (start < tree.size()) {
      const auto end = tree.find('\n', start);
      out += "  " + tree.substr(start, end - start + 1);
      start = end + 1;
    }
    out += "  result: " + stage.run.output +
           (stage.run.correct ? "" : "  (WRONG, expected " + stage.run.expected + ")") + "\n";
    if (!stage.run.error.empty()) out += "  stopped: " + stage.run.error + "\n";
  }
  out += "result: " + report.output +
         (report.correct ? "  (correct)" : "  (WRONG, expected " + report.expected + ")") + "\n";
  return out;
}

std::string pipeline_json(const PipelineReport& report) {
  json stages = json::array();
  for (const auto& stage : report.stages) {
    json run = json::parse(run_report_json(stage.run));
    run["expression"] = stage.expression;
    stages.push_back(std::move(run));
  }
  json out{{"program", report.program},   {"input", report.input},     {"output", report.output},
           {"expected", report.expected}, {"correct", report.correct}, {"stages", stages}};
  if (!report.error.empty()) out["error"] = report.error;
  return out.dump(2);
}

std::string call_tree_text(const RunReport& report) {
  const auto& task = datasets::task_by_name(report.task);
  std::string out;
  for (const auto& call : report.calls) {
    out.append(2 * static_cast<std::size_t>(call.depth), ' ');
    out += format_call(task, call) + "\n";
  }
  return out;
}

std::string run_report_json(const RunReport& report) {
  const auto& task = datasets::task_by_name(report.task);
  // Build the tree from the pre-order sequence with an explicit stack (depth may be in thousands).
  json root;
  std::vector<json*> path;
  for (const auto& call : report.calls) {
    json node{{"program", task.programs().at(call.program).name},
              {"args", call.args},
              {"text", format_call(task, call)},
              {"calls", json::array()}};
    path.resize(std::min<std::size_t>(path.size(), static_cast<std::size_t>(call.depth)));
    if (path.empty()) {
      root = std::move(node);
      path.push_back(&root);
    } else {
      auto& siblings = (*path.back())["calls"];
      siblings.push_back(std::move(node));
      path.push_back(&siblings.back());
    }
  }
  json out{{"task", report.task},
           {"input", report.input},
           {"output", report.output},
           {"expected", report.expected},
           {"correct", report.correct},
           {"steps", report.steps},
           {"program", root}};
  if (!report.primitive.empty()) out["primitive"] = report.primitive;
  if (!report.error.empty()) out["error"] = report.error;
  return out.dump(2);
}

std::string eval_reports_json(const std::vector<LengthReport>& reports) {
  json list = json::array();
  for (const auto& r : reports) {
    json failures = json::array();
    for (const auto& f : r.failures) {
      json j{{"input", f.input},
             {"expected", f.expected},
             {"output", f.output},
             {"first_divergence", f.first_divergence}};
      if (!f.error.empty()) j["error"] = f.error;
      if (f.first_divergence >= 0) {
        j["expected_call"] = f.expected_call;
        j["generated_call"] = f.generated_call;
      }
      failures.push_back(std::move(j));
    }
    json j{{"task", r.task},       {"length", r.length},     {"count", r.count},
           {"correct", r.correct}, {"accuracy", r.accuracy}, {"trace_exact", r.trace_exact},
           {"seconds", r.seconds}, {"failures", failures}};
    if (!r.primitive.empty()) {
      j["primitive"] = r.primitive;
      j["primitives"] = r.primitive_implementation;
      j["k"] = r.k;
    }
    list.push_back(std::move(j));
  }
  return (list.size() == 1 ? list[0] : list).dump(2);
}

}  // namespace engram::npi
