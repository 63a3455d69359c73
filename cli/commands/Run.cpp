// engram run: query a model (or a pipeline of them) and print the generated program and result.
#include "cli/Command.h"
#include "cli/Flags.h"
#include "common/Errors.h"
#include "npi/Npi.h"

#include <memory>

namespace engram::cli {
namespace {

const char* const kProgramHelp = R"HELP(Program expressions (--program):
  expr      := xs | ys | stage                 xs, ys: the first and second list of --input
  stage     := map(primitive, expr)            apply a unary primitive to every element
             | filter(primitive, expr)         keep the elements the predicate holds for
             | fold(primitive, INIT, expr)     combine into one number, starting at INIT
             | scan(primitive, INIT, expr)     the accumulator after each element
             | zipwith(primitive, expr, expr)  combine two lists element by element
  primitive := name | name(INT)                e.g. double, gt(5)
Primitives: unary succ, double, square, negate; predicates even, prime, gt(c), div(c);
binary add, mul, max, min (arithmetic modulo K). fold returns a number, so it can only be the
outermost stage. Lists are comma-separated values 0..K-1; zipwith's two lists are separated by
';', e.g. --input "1,2,3;4,5,6". Each stage runs the trained model of its function with its
primitive's network (--primitives P) or the exact function (--symbolic-primitives), and prints
its call tree and result.
Example:
  engram run --program "fold(add, 0, map(square, filter(even, xs)))" --input "1,2,3,4" \
    --models models/ --primitives prims.pt)HELP";

struct Run {
  npi::RunOptions options;
  npi::PipelineOptions pipeline;
  bool json = false;
  PrimitiveFlags primitive;
  CLI::Option *model = nullptr, *task = nullptr, *program = nullptr, *models = nullptr;
};

int run_pipeline(Run& c, std::ostream& out) {
  if (c.task->count() > 0 || c.model->count() > 0)
    throw UsageError("--program runs the models in --models; it takes no --task or --model");
  if (c.models->count() == 0) throw UsageError("--program needs --models DIR");
  auto& po = c.pipeline;
  po.input = c.options.input;
  po.threads = c.options.threads;
  po.device = c.options.device;
  po.max_steps = c.options.max_steps;
  po.max_depth = c.options.max_depth;
  auto source = primitives::open_primitive_source(c.primitive.given());
  po.k = source.k;
  po.primitive = std::move(source.get);
  const auto report = npi::run_pipeline(po);
  out << (c.json ? npi::pipeline_json(report) + "\n" : npi::pipeline_text(report));
  return 0;
}

int run_run(Run& c, std::ostream& out) {
  if (c.program->count() > 0) return run_pipeline(c, out);
  if (c.task->count() == 0 || c.model->count() == 0)
    throw UsageError("run needs --task and --model (or --program and --models)");
  auto& ro = c.options;
  ro.binding = primitives::make_binding(ro.task, c.primitive.given());
  const auto report = npi::run_npi(ro);
  if (c.json) {
    out << npi::run_report_json(report) << "\n";
    return 0;
  }
  out << npi::call_tree_text(report);
  out << "result: " << report.output
      << (report.correct ? "  (correct)" : "  (WRONG, expected " + report.expected + ")") << "\n";
  if (!report.error.empty()) out << "stopped: " << report.error << "\n";
  return 0;
}

}  // namespace

Command register_run(CLI::App& parent) {
  auto c = std::make_shared<Run>();
  auto& ro = c->options;
  FlagTable flags{{"model_path", "--model"}, {"task", "--task"},
                  {"input", "--input"},      {"threads", "--threads"},
                  {"max_steps", "--max-steps"}, {"max_depth", "--max-depth"},
                  {"program", "--program"},  {"models_dir", "--models"}};
  CLI::App* run =
      parent.add_subcommand("run", "Query a model: print the generated program and its result");
  c->model = run->add_option("--model", ro.model_path, "Model file (with --task)");
  c->task = run->add_option("--task", ro.task, "Task: " + known_tasks());
  c->program = run->add_option(
      "--program", c->pipeline.program,
      "A pipeline of high-order programs instead of --task, e.g. \"fold(add, 0, map(square, "
      "filter(even, xs)))\" (grammar below)");
  c->models = run->add_option(
      "--models", c->pipeline.models_dir,
      "With --program: the folder of trained models, one per function (DIR/map.pt, "
      "DIR/fold.pt, ...)");
  run->add_option("--input", ro.input,
                  "Problem: \"A+B\" for addition, comma-separated digits for sort, "
                  "comma-separated values for the list tasks (two lists joined by ';' for zipwith)")
      ->required();
  run->footer(kProgramHelp);
  run->add_option("--threads", ro.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  add_device_flag(run, ro.device, flags);
  run->add_option("--max-steps", ro.max_steps, "Step limit (default: scales with length)");
  run->add_option("--max-depth", ro.max_depth, "Call-depth limit (default: scales with length)");
  run->add_flag("--json", c->json, "Print the call tree and result as JSON");
  add_primitive_flags(run, c->primitive, /*runs_programs=*/true, flags);
  return {run, [c](std::ostream& out, std::ostream&) { return run_run(*c, out); }, flags};
}

}  // namespace engram::cli
