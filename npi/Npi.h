#pragma once
/// \file
/// The NPI's public entry points, one per command, over plain option structs (no torch in this
/// header, so the command line compiles fast). Each validates its options, runs, and returns a
/// report.
///
/// \code
///   engram::npi::TrainOptions t;
///   t.task = "addition";  t.data_path = "add.jsonl";  t.out_path = "m.pt";
///   engram::npi::train_npi(t);
///   engram::npi::EvalOptions e;
///   e.model_path = "m.pt";  e.task = "addition";  e.lengths = {100};
///   for (const auto& r : engram::npi::evaluate_npi(e)) std::cout << r.accuracy << "\n";
///   engram::npi::RunOptions r;
///   r.model_path = "m.pt";  r.task = "addition";  r.input = "25+17";
///   std::cout << engram::npi::call_tree_text(engram::npi::run_npi(r));
/// \endcode
///
/// Errors: UsageError for invalid options or input, FormatError for unusable files (corrupt,
/// mismatched), std::runtime_error for other failures.

#include "datasets/ListTask.h"
#include "datasets/Task.h"
#include "trainer/TrainingOptions.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace engram::npi {

struct TrainOptions {
  std::string task;
  std::string data_path;
  std::string out_path;
  int hidden = 256;  ///< LSTM width
  /// "engram" (the layers of nn/) or "torch" (plain torch modules, for comparison).
  std::string impl = "engram";
  /// The session: steps, batch (traces per step), learning rate, seed (also the initial
  /// weights), threads, metrics, and the memory techniques (docs/ARCHITECTURE.md;
  /// trainer/MemoryTechniques.h): "relu" (ReLU outputs kept compressed for backward),
  /// "recompute" and "swap" (of the model's units: encoder and core; impl "engram" only), "all";
  /// all lossless: the same losses and weights as without. One thread is the default because the
  /// NPI's matrices are small: on the 2-core reference machine two threads trained addition 1.8x
  /// slower than one.
  trainer::TrainingOptions training = default_training();

  static trainer::TrainingOptions default_training() {
    trainer::TrainingOptions t;
    t.steps = 2000;
    t.batch = 8;
    t.learning_rate = 2e-3;
    return t;
  }
};

/// The options the claims use for `task` (scripts/reproduce/npi_*.sh), for a user who gives none:
/// addition and the list tasks as TrainOptions' defaults; sort and sort-recursive 64 wide on one
/// trace per step. Throws InputError for an unknown task.
TrainOptions train_defaults(const std::string& task);

struct TrainReport {
  long steps = 0;
  double seconds = 0;
  double final_loss = 0;
  double traces_per_second = 0;
  /// With recompute or swap: the plan training ran under (trainer::TrainSummary::memory_plan).
  std::string memory_plan;
};

TrainReport train_npi(const TrainOptions& options);

struct EvalOptions {
  std::string model_path;
  std::string task;
  /// High-order tasks: the primitive the program is applied with (symbolic or learned, chosen by
  /// the caller) and FOLD/SCAN's initial value; empty for other tasks.
  datasets::Binding binding;
  std::vector<int> lengths;
  int count = 100;  ///< problems per length
  std::uint64_t seed = 1;
  int threads = 1;        ///< 0: all cores (see TrainOptions::threads)
  std::string device = "cpu";  ///< where the model runs: cpu, cuda, cuda:N (trainer/Device.h)
  long max_steps = 0;     ///< 0: task default, scaled with length
  int max_depth = 0;      ///< 0: task default, scaled with length
  int max_failures = 10;  ///< failures kept in the report, per length
};

struct Failure {
  std::string input, expected, output, error;
  long first_divergence =
      -1;  ///< index in the call sequence where the trace first differs; -1: none
  std::string expected_call, generated_call;  ///< the calls at that index ("" past the end)
};

struct LengthReport {
  std::string task;
  std::string primitive;                 ///< high-order tasks: the bound primitive, e.g. "gt(5)"
  std::string primitive_implementation;  ///< "symbolic" or "neural"; empty for other tasks
  int k = 0;                             ///< the primitive's domain; 0 for other tasks
  int length = 0;
  int count = 0;
  int correct = 0;
  double accuracy = 0;
  double trace_exact = 0;  ///< fraction whose call sequence equals the reference program's
  double seconds = 0;
  std::vector<Failure> failures;
};

std::vector<LengthReport> evaluate_npi(const EvalOptions& options);

struct RunOptions {
  std::string model_path;
  std::string task;
  datasets::Binding binding;  ///< as EvalOptions::binding
  std::string input;
  int threads = 1;  ///< 0: all cores
  std::string device = "cpu";  ///< where the model runs: cpu, cuda, cuda:N (trainer/Device.h)
  long max_steps = 0;
  int max_depth = 0;
};

struct RunReport {
  std::string task, input, output, expected, error;
  std::string primitive;  ///< high-order tasks: the bound primitive, e.g. "gt(5)"
  bool correct = false;
  long steps = 0;
  std::vector<datasets::Call> calls;  ///< pre-order with depths: the generated call tree
};

RunReport run_npi(const RunOptions& options);

/// A pipeline of high-order programs (datasets/ProgramExpression.h), each stage run by the trained
/// NPI of its function with its primitive bound.
struct PipelineOptions {
  std::string program;     ///< the expression, e.g. "fold(add, 0, map(square, xs))"
  std::string input;       ///< "3,1,2", or "1,2;3,4" when the program reads ys
  std::string models_dir;  ///< holds one model per function used: DIR/map.pt, DIR/fold.pt, ...
  /// The primitive a stage applies (learned or symbolic: the caller decides).
  std::function<std::shared_ptr<const datasets::Primitive>(const datasets::PrimitiveRef&)>
      primitive;
  int k = 10;  ///< the domain of the input and of the primitives
  int threads = 1;
  std::string device = "cpu";  ///< where every stage's model runs (trainer/Device.h)
  long max_steps = 0;  ///< per stage; 0: the task default
  int max_depth = 0;
};

struct StageReport {
  std::string expression;  ///< the stage's own text, e.g. "map(square, xs)"
  RunReport run;           ///< its generated program, input, output and expected output
};

struct PipelineReport {
  std::string program, input, output, expected;
  bool correct = false;
  std::string error;                ///< the first stage that stopped with an error, if any
  std::vector<StageReport> stages;  ///< innermost first, in the order they ran
};

/// Throws InputError for a malformed program or input (with the column), UsageError for a
/// primitive the library lacks, std::runtime_error for a missing model file (all checked before
/// any stage runs), FormatError for an unusable model.
PipelineReport run_pipeline(const PipelineOptions& options);
/// Loads the trained program of every stage of `program` from `models_dir` (<function>.pt), as
/// run_pipeline will: std::runtime_error for a missing file, FormatError for a model of another
/// task or an unusable one. For callers that must know before they change anything.
void check_pipeline_models(const std::string& program, const std::string& models_dir);
/// Each stage's call tree and result, then the pipeline's result.
std::string pipeline_text(const PipelineReport& report);
/// {"program":..,"input":..,"output":..,"expected":..,"correct":..,"stages":[run report, ...]}
std::string pipeline_json(const PipelineReport& report);

/// The call tree indented two spaces per level, e.g. "ADD\n  ADD1\n    WRITE(OUT, 2)\n".
std::string call_tree_text(const RunReport& report);
/// {"task":..,"input":..,"output":..,"expected":..,"correct":..,"steps":..,"program":{tree}}.
std::string run_report_json(const RunReport& report);
/// One object per length; a list when there are several.
std::string eval_reports_json(const std::vector<LengthReport>& reports);

/// Parses "100" or "20,60,100"; throws UsageError.
std::vector<int> parse_lengths(const std::string& text);

}  // namespace engram::npi
