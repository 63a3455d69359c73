// engram synth: recover the high-order program a Python function computes, bound to primitives.
#include "synth/Synth.h"
#include "cli/Command.h"
#include "cli/Flags.h"
#include "common/Errors.h"
#include "datasets/ListTask.h"
#include "tbcnn/Tbcnn.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {
namespace {

const char* const kSynthHelp =
    R"HELP(The function takes one list (xs) or two (xs, ys) of values 0..K-1 and returns a list or
a number; it may loop (for, while, comprehensions, generators), call helpers, zip, and use
sum, max, min, functools.reduce and itertools.accumulate. It runs under python3 on sample
lists; what it computed is recovered as MAP, FILTER, FOLD, SCAN and ZIPWITH stages (the
grammar of `engram run --program`), each element computation bound to a library primitive
whose values equal it, or to a new primitive whose table is the code's own. The program is
then checked against the function on random lists.
--recognizer tbcnn reads the function's loop with a localized TBCNN of the loop task (`engram
train tbcnn --task loop`, --tbcnn-model) before tracing: its class is the program's outermost
high-order function, the trace supplies the element computations, and a trace that does not fit
that function stops synthesis (exit 1) naming both.
Example:
  engram synth --source f.py --function evens_squared --k 10)HELP";

struct Synth {
  synth::SynthOptions options;
  std::string recognizer = "trace";
  std::string tbcnn_model;
  bool json = false;
};

/// The TBCNN's reading of the function's loop: its most probable class.
synth::SynthOptions::SourceClass tbcnn_class(const Synth& c) {
  tbcnn::EncodeOptions enc;
  enc.model_path = c.tbcnn_model;
  enc.file = c.options.source;
  enc.function = c.options.function;
  enc.threads = c.options.threads;
  tbcnn::ClassifyReport report;
  try {
    report = tbcnn::classify_file(enc, 1);
  } catch (const InvalidOption& e) {
    if (e.option() != "function") throw;
    // A model of another task: it reads no loop of a function.
    throw InvalidOption("tbcnn_model", "'" + c.tbcnn_model +
                                           "' is not a loop-task model (engram train tbcnn "
                                           "--task loop makes one)");
  }
  const std::string& stage = report.top.front().first;
  if (!datasets::is_higher_order(stage)) {
    throw InvalidOption("tbcnn_model", "'" + c.tbcnn_model + "' classifies into '" + stage +
                                           "', not high-order functions: a loop-task model is "
                                           "needed (engram train tbcnn --task loop)");
  }
  return {"tbcnn", stage, report.top.front().second};
}

int run_synth(const Synth& c, std::ostream& out) {
  if (c.recognizer == "tbcnn" && c.tbcnn_model.empty())
    throw InvalidOption("tbcnn_model", "is required with --recognizer tbcnn");
  if (c.recognizer != "tbcnn" && !c.tbcnn_model.empty())
    throw InvalidOption("tbcnn_model", "goes with --recognizer tbcnn");
  synth::SynthOptions options = c.options;
  synth::validate(options);  // a bad option before the TBCNN model is read and run
  if (c.recognizer == "tbcnn") options.source_class = tbcnn_class(c);
  const auto report = synth::synthesize(options);
  out << (c.json ? synth::synth_json(report) + "\n" : synth::synth_text(report));
  const bool agree = report.agreed == report.checked &&
                     (!report.neural || report.neural_agreed == report.neural_checked);
  return agree ? 0 : 1;
}

}  // namespace

Command register_synth(CLI::App& parent) {
  auto c = std::make_shared<Synth>();
  auto& o = c->options;
  CLI::App* sub = parent.add_subcommand(
      "synth", "Recover the high-order program of a Python function, with its primitives");
  sub->add_option("--source", o.source, "Python source file")->required();
  sub->add_option("--function", o.function, "The function in it")->required();
  sub->add_option("--k", o.k, "Domain size K: values 0..K-1")->capture_default_str();
  sub->add_option("--samples", o.samples, "Random sample lists to trace")->capture_default_str();
  sub->add_option("--checks", o.checks, "Random lists to check the program on")
      ->capture_default_str();
  sub->add_option("--check-length", o.check_length, "Their length")->capture_default_str();
  sub->add_option("--seed", o.seed, "Seed of the sample and check lists")
      ->check(seed_check())
      ->capture_default_str();
  sub->add_option("--python", o.python, "The Python interpreter")->capture_default_str();
  sub->add_option("--timeout", o.timeout_seconds, "Seconds each python3 run may take")
      ->capture_default_str();
  sub->add_option("--models", o.models_dir,
                  "Folder of trained high-order programs (map.pt, filter.pt, ...): check the "
                  "neural program too (with --primitives)");
  sub->add_option("--primitives", o.primitives,
                  "Primitive library; a new primitive is trained into it first (as --add)");
  sub->add_option("--threads", o.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  sub->add_option("--recognizer", c->recognizer,
                  "trace: the trace decides the program; tbcnn: a TBCNN reads the loop first "
                  "(with --tbcnn-model)")
      ->check(CLI::IsMember({"trace", "tbcnn"}))
      ->capture_default_str();
  sub->add_option("--tbcnn-model", c->tbcnn_model,
                  "Loop-task TBCNN model (engram train tbcnn --task loop) for --recognizer tbcnn");
  sub->add_flag("--json", c->json, "Print JSON");
  sub->footer(kSynthHelp);
  return {sub,
          [c](std::ostream& out, std::ostream&) { return run_synth(*c, out); },
          {{"k", "--k"},
           {"samples", "--samples"},
           {"checks", "--checks"},
           {"check_length", "--check-length"},
           {"source", "--source"},
           {"timeout_seconds", "--timeout"},
           {"models_dir", "--models"},
           {"primitives", "--primitives"},
           {"threads", "--threads"},
           {"tbcnn_model", "--tbcnn-model"},
           {"model_path", "--tbcnn-model"},
           {"function", "--function"}}};
}

}  // namespace engram::cli
