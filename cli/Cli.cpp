#include "cli/Cli.h"

#include "bench/MemoryBench.h"
#include "bench/NpiBench.h"
#include "bench/TbcnnBench.h"
#include "cli/Demo.h"
#include "common/Errors.h"
#include "datasets/CodeCorpus.h"
#include "datasets/TraceFile.h"
#include "npi/Npi.h"
#include "primitives/Primitives.h"
#include "tbcnn/Tbcnn.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace engram::cli {
namespace {

std::string known_tasks() {
  std::string s;
  for (const auto& n : datasets::task_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

/// The options that bind a high-order task to a primitive (datasets/ListTask.h).
struct PrimitiveOptions {
  std::string primitive;  ///< --primitive, e.g. "gt(5)"
  std::string library;    ///< --primitives P: learned networks
  bool symbolic = false;  ///< --symbolic-primitives
  int k = 10;             ///< --k, symbolic primitives only (a library has its own)
  int init = 0;           ///< --init
  CLI::Option *primitive_option = nullptr, *library_option = nullptr, *symbolic_option = nullptr,
              *k_option = nullptr, *init_option = nullptr;

  bool any_given() const {
    for (const CLI::Option* o :
         {primitive_option, library_option, symbolic_option, k_option, init_option}) {
      if (o != nullptr && o->count() > 0) return true;
    }
    return false;
  }
};

/// Adds --primitive, --k, --init and, for commands that run programs (`learned`), --primitives
/// and --symbolic-primitives.
void add_primitive_options(CLI::App* command, PrimitiveOptions& po, bool learned) {
  po.primitive_option = command->add_option(
      "--primitive", po.primitive,
      "High-order tasks: the primitive the program applies, e.g. double or gt(5) (see `engram "
      "help run`)");
  if (learned) {
    po.library_option = command->add_option(
        "--primitives", po.library, "Primitive library from `engram train primitives` (neural)");
    po.symbolic_option = command->add_flag(
        "--symbolic-primitives", po.symbolic,
        "Apply the exact functions instead of networks, to tell control-flow errors from "
        "primitive errors");
  }
  po.k_option =
      command->add_option("--k", po.k,
                          std::string("High-order tasks: values lie in 0..K-1 (default 10") +
                              (learned ? "; with --primitives the library's K)" : ")"));
  po.init_option =
      command->add_option("--init", po.init, "fold, scan: the accumulator's initial value (0)");
}

/// The binding the options describe for `task`; an empty binding for tasks without primitives.
/// `learned`: the command runs programs, so one of --primitives and --symbolic-primitives is
/// required; otherwise (data generation) the reference program needs only the exact function.
datasets::Binding make_binding(const std::string& task, const PrimitiveOptions& po, bool learned) {
  datasets::task_by_name(task);  // unknown task first
  if (!datasets::takes_primitive(task)) {
    if (po.any_given()) {
      throw UsageError(
          "--primitive, --primitives, --symbolic-primitives, --k and --init apply to "
          "the tasks with primitives (map, filter, fold, zipwith, scan, addition-primitive), not " +
          task);
    }
    return {};
  }
  const auto kind = datasets::primitive_kind_of(task);
  std::string text = po.primitive;
  if (kind == datasets::PrimitiveKind::kFullAdder && text.empty()) text = "fulladd";
  if (text.empty()) {
    if (learned) {
      throw UsageError("--primitive is required for " + task + ": a " + datasets::kind_name(kind) +
                       " primitive, e.g. " +
                       (kind == datasets::PrimitiveKind::kUnary       ? "double"
                        : kind == datasets::PrimitiveKind::kPredicate ? "gt(5)"
                                                                      : "add"));
    }
    text = kind == datasets::PrimitiveKind::kUnary       ? "succ"
           : kind == datasets::PrimitiveKind::kPredicate ? "even"
                                                         : "add";
  }
  const datasets::PrimitiveRef ref = datasets::parse_primitive(text);
  const auto* family = datasets::find_family(ref.family);
  if (family->kind != kind) {
    throw UsageError("arity mismatch: " + task + " applies a " + datasets::kind_name(kind) +
                     " primitive, but '" + ref.text() + "' is " +
                     datasets::kind_name(family->kind));
  }
  if (po.init_option->count() > 0 && task != "fold" && task != "scan")
    throw UsageError("--init applies to fold and scan, not " + task);
  datasets::Binding binding;
  binding.init = po.init;
  if (learned && po.symbolic == !po.library.empty()) {
    throw UsageError(po.symbolic ? "give --primitives or --symbolic-primitives, not both"
                                 : "--primitives P (learned networks) or --symbolic-primitives "
                                   "is required for " +
                                       task);
  }
  if (learned && !po.symbolic) {
    const auto library = primitives::PrimitiveLibrary::load(po.library);
    if (po.k_option->count() > 0 && po.k != library.domain()) {
      throw UsageError("--k " + std::to_string(po.k) + " does not match the primitive library '" +
                       po.library + "' (K = " + std::to_string(library.domain()) + ")");
    }
    binding.primitive = library.get(ref);
  } else {
    binding.primitive = datasets::make_symbolic_primitive(ref, po.k);
  }
  return binding;
}

struct DataGenCommand {
  std::string task, out;
  datasets::GenerateOptions gen;
  bool min_set = false;
};

void print_eval_table(std::ostream& out, const std::vector<npi::LengthReport>& reports) {
  out << "task                length  count  accuracy  trace_exact  seconds\n";
  for (const auto& r : reports) {
    out << std::left << std::setw(20) << r.task << std::right << std::setw(6) << r.length
        << std::setw(7) << r.count << std::setw(10) << std::fixed << std::setprecision(3)
        << r.accuracy << std::setw(13) << r.trace_exact << std::setw(9) << std::setprecision(1)
        << r.seconds << "\n";
    for (const auto& f : r.failures) {
      out << "  failed: " << (f.input.size() > 60 ? f.input.substr(0, 57) + "..." : f.input);
      if (!f.error.empty()) out << "  (" << f.error << ")";
      if (f.first_divergence >= 0) {
        out << "  diverged at call " << f.first_divergence << ": expected " << f.expected_call
            << ", generated " << (f.generated_call.empty() ? "nothing" : f.generated_call);
      }
      out << "\n";
    }
  }
}

}  // namespace

int engram_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "engram: train neural programs on execution traces and code encoders on syntax "
      "trees, and query them",
      "engram"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");

  // engram data gen
  auto* data = app.add_subcommand("data", "Training data");
  data->require_subcommand(1);
  auto* gen = data->add_subcommand("gen", "Generate reference execution traces");
  DataGenCommand dg;
  gen->add_option("--task", dg.task, "Task: " + known_tasks())->required();
  gen->add_option("--out", dg.out, "Output trace file (JSON lines)")->required();
  auto* min_len = gen->add_option("--min-len", dg.gen.min_length,
                                  "Shortest problem (default: 1 for addition, 2 for sort)");
  auto* max_len = gen->add_option("--max-len", dg.gen.max_length,
                                  "Longest problem (default: 20; 10 for the list tasks)");
  auto* per_length = gen->add_option(
      "--per-length", dg.gen.per_length,
      "Traces per length (default: 32 for addition and the list tasks, 64 for sort)");
  gen->add_option("--seed", dg.gen.seed, "Random seed")->capture_default_str();
  PrimitiveOptions gen_primitive;
  add_primitive_options(gen, gen_primitive, /*learned=*/false);

  // engram data code, engram data stdlib
  auto* code = data->add_subcommand(
      "code",
      "Parse a folder-per-class source tree into a corpus (tree-sitter ASTs, 60/20/20 split)");
  datasets::CorpusOptions co;
  std::string code_language, code_out;
  code->add_option("--lang", code_language, "Language: python, c, cpp")->required();
  code->add_option("--src", co.src_dir, "Folder with one folder per class, one file per sample")
      ->required();
  code->add_option("--out", code_out, "Corpus file to write")->required();
  code->add_option("--max-nodes", co.max_nodes, "Skip (and count) larger trees; 0: no limit")
      ->capture_default_str();
  code->add_flag("--skip-errors", co.skip_errors,
                 "Skip files with parse errors instead of keeping them with ERROR nodes");
  auto* stdlib = data->add_subcommand(
      "stdlib",
      "Write the functions of Python's standard library, one file each, labelled by "
      "top-level package (folder-per-class layout for `data code`)");
  datasets::StdlibOptions so;
  stdlib->add_option("--out", so.out_dir, "Folder to create")->required();
  stdlib->add_option("--lib", so.lib_dir, "The standard library")->capture_default_str();
  stdlib->add_option("--min-files", so.min_files, "Files a package needs to be a class")
      ->capture_default_str();
  stdlib->add_option("--min-functions", so.min_functions, "Functions a package needs to be a class")
      ->capture_default_str();
  stdlib->add_flag("--modules", so.modules,
                   "Write the classes' modules whole, one file each, instead of their functions");

  // engram train npi
  auto* train = app.add_subcommand("train", "Train a model");
  train->require_subcommand(1);
  auto* train_npi = train->add_subcommand("npi", "Train a Neural Programmer-Interpreter on traces");
  npi::TrainOptions to;
  train_npi->add_option("--task", to.task, "Task: " + known_tasks())->required();
  train_npi->add_option("--data", to.data_path, "Trace file from `engram data gen`")->required();
  train_npi->add_option("--out", to.out_path, "Model file to write")->required();
  train_npi->add_option("--steps", to.steps, "Optimizer steps")->capture_default_str();
  train_npi->add_option("--batch", to.batch, "Traces per step")->capture_default_str();
  train_npi->add_option("--lr", to.learning_rate, "Adam learning rate")->capture_default_str();
  train_npi->add_option("--hidden", to.hidden, "LSTM width")->capture_default_str();
  train_npi
      ->add_option("--layers", to.layers,
                   "Layer implementation: engram (nn/, the default) or torch (plain torch "
                   "modules, for comparison)")
      ->check(CLI::IsMember({"engram", "torch"}))
      ->capture_default_str();
  train_npi->add_option("--threads", to.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  train_npi->add_option("--seed", to.seed, "Random seed")->capture_default_str();
  train_npi->add_option("--metrics", to.metrics_path, "Write JSON-lines metrics here");
  train_npi
      ->add_option("--memory", to.memory,
                   "Comma-separated memory techniques, all lossless: none (the default), relu "
                   "(ReLU outputs kept compressed for backward), recompute and swap (of the "
                   "model's units, chosen per unit under --memory-budget), all")
      ->delimiter(',');
  train_npi->add_option("--memory-budget", to.memory_budget,
                        "Bound on a step's activation peak in bytes for recompute and swap (the "
                        "planner picks per unit; 0: every unit)");
  train_npi->add_option("--swap-bandwidth", to.swap_bandwidth,
                        "Throttle the swap spill file to this many bytes per second (0: no)");

  // engram train primitives
  auto* train_primitives = train->add_subcommand(
      "primitives", "Train one small network per primitive on its whole domain");
  primitives::TrainPrimitivesOptions tp;
  train_primitives->add_option("--out", tp.out_path, "Primitive library file to write")->required();
  train_primitives->add_option("--k", tp.k, "Values lie in 0..K-1")->capture_default_str();
  train_primitives
      ->add_option("--primitive", tp.families,
                   "Families to train (repeat or separate by commas; default: the library: "
                   "succ, double, square, negate, even, prime, gt, add, mul, max, min)")
      ->delimiter(',');
  train_primitives->add_flag("--add", tp.add,
                             "Add the families to the existing library --out, leaving its other "
                             "networks as they are");
  train_primitives
      ->add_option("--steps", tp.max_steps, "Most optimizer steps per family (stops once exact)")
      ->capture_default_str();
  train_primitives->add_option("--batch", tp.batch, "Examples per step")->capture_default_str();
  train_primitives->add_option("--lr", tp.learning_rate, "Adam learning rate")
      ->capture_default_str();
  train_primitives->add_option("--hidden", tp.hidden, "Width of the hidden layers")
      ->capture_default_str();
  train_primitives->add_option("--embedding", tp.embedding, "Width of each input's embedding")
      ->capture_default_str();
  train_primitives->add_option("--threads", tp.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  train_primitives->add_option("--seed", tp.seed, "Random seed")->capture_default_str();

  // engram train tbcnn
  auto* train_tbcnn =
      train->add_subcommand("tbcnn", "Train a TBCNN code encoder (or the bag-of-types baseline)");
  tbcnn::TrainTbcnnOptions tt;
  train_tbcnn->add_option("--corpus", tt.corpus_path, "Corpus from `engram data code`")->required();
  train_tbcnn->add_option("--out", tt.out_path, "Model file to write")->required();
  train_tbcnn
      ->add_option("--model", tt.model,
                   "tbcnn (whole tree, max pooling), localized (the pivot's vector; --task "
                   "masked), bow (bag of node types, logistic regression)")
      ->capture_default_str();
  train_tbcnn
      ->add_option("--task", tt.task,
                   "classify (each file's class) or masked (the kind of a statement whose subtree "
                   "is masked)")
      ->capture_default_str();
  train_tbcnn->add_option("--steps", tt.steps, "Optimizer steps")->capture_default_str();
  train_tbcnn->add_option("--batch", tt.batch, "Trees per step")->capture_default_str();
  train_tbcnn->add_option("--lr", tt.learning_rate, "Adam learning rate")->capture_default_str();
  train_tbcnn->add_option("--embedding", tt.embedding, "Node vector width")->capture_default_str();
  train_tbcnn->add_option("--channels", tt.channels, "Convolution width")->capture_default_str();
  train_tbcnn->add_option("--layers", tt.layers, "Convolution layers")->capture_default_str();
  train_tbcnn->add_flag("--residual", tt.residual,
                        "Add each convolution layer's input to its output (after the first), so "
                        "deep stacks train");
  train_tbcnn->add_option("--activation", tt.activation, "relu (default) or tanh (the paper's)")
      ->capture_default_str();
  train_tbcnn->add_flag("--identifiers", tt.identifiers,
                        "Add identifier sub-token embeddings (hashed) to the node vectors");
  train_tbcnn
      ->add_option("--statements", tt.statements_per_file,
                   "masked task: statements drawn from each file")
      ->capture_default_str();
  train_tbcnn
      ->add_option("--valid-every", tt.valid_every,
                   "Score the valid split every N steps (0: never) and write the model with the "
                   "best valid accuracy; the scores go into --metrics as valid_accuracy")
      ->capture_default_str();
  train_tbcnn
      ->add_option("--valid-statements", tt.valid_statements_per_file,
                   "masked task with --valid-every: statements drawn from each valid file")
      ->capture_default_str();
  train_tbcnn->add_option("--threads", tt.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  train_tbcnn->add_option("--seed", tt.seed, "Random seed")->capture_default_str();
  train_tbcnn->add_option("--metrics", tt.metrics_path, "Write JSON-lines metrics here");
  train_tbcnn
      ->add_option("--memory", tt.memory,
                   "Memory techniques: none (the default) or relu (ReLU outputs kept compressed "
                   "for backward; lossless)")
      ->delimiter(',');

  // engram eval npi
  auto* eval = app.add_subcommand("eval", "Evaluate a model");
  eval->require_subcommand(1);
  auto* eval_npi = eval->add_subcommand("npi", "Exact-match accuracy on random problems");
  npi::EvalOptions eo;
  std::string lengths;
  bool eval_json = false;
  eval_npi->add_option("--model", eo.model_path, "Model file")->required();
  eval_npi->add_option("--task", eo.task, "Task: " + known_tasks())->required();
  eval_npi->add_option("--length", lengths, "Problem length(s), e.g. 100 or 20,60,100")->required();
  eval_npi->add_option("--count", eo.count, "Problems per length")->capture_default_str();
  eval_npi->add_option("--seed", eo.seed, "Random seed")->capture_default_str();
  eval_npi->add_option("--threads", eo.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  eval_npi->add_option("--max-steps", eo.max_steps, "Step limit (default: scales with length)");
  eval_npi->add_option("--max-depth", eo.max_depth,
                       "Call-depth limit (default: scales with length)");
  eval_npi->add_flag("--json", eval_json, "Print JSON: one object per length, a list for several");
  PrimitiveOptions eval_primitive;
  add_primitive_options(eval_npi, eval_primitive, /*learned=*/true);

  // engram eval tbcnn
  auto* eval_tbcnn =
      eval->add_subcommand("tbcnn", "Accuracy and top-5 of a TBCNN on a corpus split");
  tbcnn::EvalTbcnnOptions et;
  bool eval_tbcnn_json_flag = false;
  eval_tbcnn->add_option("--model", et.model_path, "Model file")->required();
  eval_tbcnn->add_option("--corpus", et.corpus_path, "Corpus file")->required();
  eval_tbcnn->add_option("--split", et.split, "train, valid or test")->capture_default_str();
  eval_tbcnn
      ->add_option("--statements", et.statements_per_file,
                   "masked task: statements drawn from each file")
      ->capture_default_str();
  eval_tbcnn->add_option("--threads", et.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  eval_tbcnn->add_flag("--json", eval_tbcnn_json_flag, "Print JSON");

  // engram eval primitives
  auto* eval_primitives = eval->add_subcommand(
      "primitives", "Exhaustive accuracy of every network in a primitive library");
  std::string eval_primitives_model;
  int eval_primitives_threads = 1;
  bool eval_primitives_json = false;
  eval_primitives->add_option("--model", eval_primitives_model, "Primitive library file")
      ->required();
  eval_primitives
      ->add_option("--threads", eval_primitives_threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  eval_primitives->add_flag("--json", eval_primitives_json, "Print JSON");

  // engram run
  auto* run =
      app.add_subcommand("run", "Query a model: print the generated program and its result");
  npi::RunOptions ro;
  bool run_json = false;
  npi::PipelineOptions po;
  auto* run_model = run->add_option("--model", ro.model_path, "Model file (with --task)");
  auto* run_task = run->add_option("--task", ro.task, "Task: " + known_tasks());
  auto* run_program = run->add_option(
      "--program", po.program,
      "A pipeline of high-order programs instead of --task, e.g. \"fold(add, 0, map(square, "
      "filter(even, xs)))\" (grammar below)");
  auto* run_models = run->add_option(
      "--models", po.models_dir,
      "With --program: the folder of trained models, one per function (DIR/map.pt, DIR/fold.pt, "
      "...)");
  run->add_option("--input", ro.input,
                  "Problem: \"A+B\" for addition, comma-separated digits for sort, "
                  "comma-separated values for the list tasks (two lists joined by ';' for zipwith)")
      ->required();
  run->footer(R"HELP(Program expressions (--program):
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
    --models models/ --primitives prims.pt)HELP");
  run->add_option("--threads", ro.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  run->add_option("--max-steps", ro.max_steps, "Step limit (default: scales with length)");
  run->add_option("--max-depth", ro.max_depth, "Call-depth limit (default: scales with length)");
  run->add_flag("--json", run_json, "Print the call tree and result as JSON");
  PrimitiveOptions run_primitive;
  add_primitive_options(run, run_primitive, /*learned=*/true);

  // engram encode, engram classify
  tbcnn::EncodeOptions enc;
  auto* encode = app.add_subcommand("encode", "Print a source file's TBCNN vector as JSON");
  encode->add_option("--model", enc.model_path, "TBCNN model file")->required();
  encode->add_option("--file", enc.file, "Source file")->required();
  encode->add_option("--pivot", enc.pivot,
                     "LINE:COL (1-based) of the subtree to encode (localized and masked models)");
  encode->add_option("--threads", enc.threads, "Intra-op threads")->capture_default_str();
  auto* classify = app.add_subcommand("classify", "Print a source file's most probable classes");
  classify->add_option("--model", enc.model_path, "TBCNN model file")->required();
  classify->add_option("--file", enc.file, "Source file")->required();
  classify->add_option("--pivot", enc.pivot, "LINE:COL (1-based), for masked-task models");
  classify->add_option("--threads", enc.threads, "Intra-op threads")->capture_default_str();

  // engram demo
  auto* demo = app.add_subcommand("demo",
                                  "Generate data, train a small addition model, evaluate "
                                  "it far beyond its training lengths and query it");
  DemoOptions demo_options;
  demo->add_option("--dir", demo_options.dir, "Working directory for the demo's files")
      ->capture_default_str();
  demo->add_option("--threads", demo_options.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();

  // engram bench npi
  auto* bench = app.add_subcommand("bench", "Benchmarks that write JSON");
  bench->require_subcommand(1);
  auto* bench_npi = bench->add_subcommand(
      "npi", "NPI training throughput (traces/s) at batch 1 and 32, beside the PyTorch peer");
  bench::NpiBenchOptions bo;
  bench_npi->add_option("--json", bo.json_path, "Write the results here")->required();
  bench_npi->add_option("--task", bo.task, "Task: " + known_tasks())->capture_default_str();
  bench_npi->add_option("--steps", bo.steps, "Timed optimizer steps per batch size")
      ->capture_default_str();
  bench_npi->add_option("--batch", bo.batch_sizes, "Traces per step (repeatable)")
      ->capture_default_str();
  bench_npi->add_option("--threads", bo.threads, "Intra-op threads, C++ and peer alike")
      ->capture_default_str();
  bench_npi->add_option("--hidden", bo.hidden, "LSTM width")->capture_default_str();
  bench_npi->add_option("--seed", bo.seed, "Random seed")->capture_default_str();
  bench_npi->add_option("--python", bo.python, "Interpreter with torch for the peer")
      ->capture_default_str();
  bench_npi->add_flag("--no-peer", bo.skip_peer, "Measure C++ only");

  // engram bench memory
  auto* bench_memory = bench->add_subcommand(
      "memory",
      "Training-step memory (peak, activation peak) per memory technique, exactly counted, "
      "beside PyTorch's profiler (resnet)");
  bench::MemoryBenchOptions mo;
  bench_memory->add_option("--workload", mo.workload, "Workload: npi or resnet")->required();
  bench_memory
      ->add_option("--techniques", mo.techniques,
                   "Comma-separated memory techniques, one row each: none, relu (ReLU outputs "
                   "as bitmap plus nonzero values), recompute, swap (units of the network), all "
                   "(the three)")
      ->delimiter(',')
      ->capture_default_str();
  bench_memory->add_option("--json", mo.json_path, "Write the results here")->required();
  bench_memory->add_option("--trace", mo.trace_path,
                           "Write the last measured step as a Chrome trace here");
  bench_memory->add_option("--steps", mo.steps, "Measured steps (after one warm-up step)")
      ->capture_default_str();
  bench_memory->add_option("--batch", mo.batch,
                           "Examples per step (default: 8 traces for npi, 32 images for resnet)");
  bench_memory->add_option("--image-size", mo.image_size, "resnet: image height and width")
      ->capture_default_str();
  bench_memory
      ->add_option("--width", mo.width,
                   "resnet: channels of the first stage (stages: 1x, 2x, 4x, 8x)")
      ->capture_default_str();
  bench_memory->add_option("--hidden", mo.hidden, "npi: LSTM width")->capture_default_str();
  bench_memory
      ->add_option("--layers", mo.layers,
                   "npi: layer implementation, engram (nn/) or torch (plain torch modules)")
      ->capture_default_str();
  bench_memory->add_option("--seed", mo.seed, "Random seed")->capture_default_str();
  bench_memory->add_option("--threads", mo.threads, "Intra-op threads, C++ and peer alike")
      ->capture_default_str();
  bench_memory->add_option("--python", mo.python, "Interpreter with torch for the peer")
      ->capture_default_str();
  bench_memory->add_flag("--no-peer", mo.skip_peer, "Measure C++ only");
  bench_memory->add_option("--budget", mo.budget,
                           "Bound on activation_peak_bytes for recompute, swap and all: bytes, or "
                           "a fraction of none's activation peak such as 0.5x (none first); "
                           "without it every unit is recomputed or swapped");
  bench_memory
      ->add_option("--swap-bandwidth", mo.swap_bandwidth,
                   "Throttle the spill file to this many bytes per second (0: unthrottled)")
      ->capture_default_str();
  bench_memory->add_flag("--explain", mo.explain, "Print the swap/recompute plan of each row");

  // engram bench tbcnn
  auto* bench_tbcnn = bench->add_subcommand(
      "tbcnn",
      "Parse throughput beside raw tree-sitter, TBCNN training throughput and peak memory");
  bench::TbcnnBenchOptions tbo;
  bench_tbcnn->add_option("--json", tbo.json_path, "Write the results here")->required();
  bench_tbcnn->add_option("--corpus", tbo.corpus_path, "Corpus the training steps run on")
      ->required();
  bench_tbcnn->add_option("--src", tbo.src_dir, "Source files whose parsing is timed")
      ->capture_default_str();
  bench_tbcnn->add_option("--lang", tbo.language, "Their language")->capture_default_str();
  bench_tbcnn->add_option("--model", tbo.model, "tbcnn, localized or bow")->capture_default_str();
  bench_tbcnn->add_option("--steps", tbo.steps, "Training steps timed")->capture_default_str();
  bench_tbcnn->add_option("--batch", tbo.batch, "Trees per step")->capture_default_str();
  bench_tbcnn->add_option("--threads", tbo.threads, "Intra-op threads")->capture_default_str();
  bench_tbcnn->add_option("--repeats", tbo.repeats, "Parse passes (the fastest counts)")
      ->capture_default_str();

  // engram help [command...]
  auto* help = app.add_subcommand("help", "Show help for a command, e.g. `engram help train npi`");
  std::vector<std::string> help_topic;
  help->add_option("command", help_topic, "Command to describe");

  // CLI11 reports an unknown first word only as "a subcommand is required"; name it instead.
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
    const auto known = app.get_subcommands([](const CLI::App*) { return true; });
    const bool found = std::any_of(known.begin(), known.end(),
                                   [&](const CLI::App* sub) { return sub->get_name() == args[0]; });
    if (!found) {
      err << "engram: error: unknown command '" << args[0] << "' (see `engram help`)\n";
      return 2;
    }
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    // help() descends to the innermost subcommand that was named, with its full usage line.
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "engram: error: " << e.what() << " (see `engram help`)\n";
    return 2;
  }

  try {
    if (help->parsed()) {
      const CLI::App* target = &app;
      std::string usage = app.get_name();
      for (const auto& name : help_topic) {
        const CLI::App* next = nullptr;
        try {
          next = target->get_subcommand(name);
        } catch (const CLI::OptionNotFound&) {
          throw UsageError("no command '" + name + "' (see `engram help`)");
        }
        target = next;
        usage += " " + name;
      }
      // Not target->help(): it descends into parsed subcommands, so on the app it would describe
      // the `help` command itself.
      out << target->get_formatter()->make_help(target, usage, CLI::AppFormatMode::Normal);
      return 0;
    }
    if (gen->parsed()) {
      const auto bound = datasets::bind_task(dg.task, make_binding(dg.task, gen_primitive, false));
      const auto& task = *bound;
      const bool lists = datasets::is_higher_order(task.name());
      if (min_len->count() == 0) dg.gen.min_length = task.min_length();
      if (max_len->count() == 0 && lists) dg.gen.max_length = 10;
      if (per_length->count() == 0)
        dg.gen.per_length = task.name() == "addition" || lists ? 32 : 64;
      const auto set = datasets::generate_traces(task, dg.gen);
      datasets::write_trace_file(dg.out, set);
      out << "wrote " << set.traces.size() << " " << task.name() << " traces (lengths "
          << dg.gen.min_length << ".." << dg.gen.max_length << ") to " << dg.out << "\n";
      return 0;
    }
    if (code->parsed()) {
      co.language = datasets::parse_language(code_language);
      const auto corpus = datasets::build_corpus(co);
      datasets::write_corpus(code_out, corpus);
      const auto& r = corpus.report;
      for (const auto& w : r.warnings) err << "engram: warning: " << w << "\n";
      out << "wrote " << r.kept << " " << code_language << " samples in " << corpus.classes.size()
          << " classes (train " << corpus.indices(datasets::Split::kTrain).size() << ", valid "
          << corpus.indices(datasets::Split::kValid).size() << ", test "
          << corpus.indices(datasets::Split::kTest).size() << ") to " << code_out << "; "
          << r.with_errors << " with parse errors (" << r.error_nodes << " ERROR nodes), skipped "
          << r.skipped_errors << " for errors, " << r.skipped_not_text << " not text, "
          << r.skipped_too_large << " above --max-nodes\n";
      return 0;
    }
    if (stdlib->parsed()) {
      const auto report = datasets::write_stdlib_functions(so);
      if (so.modules) {
        out << "wrote " << report.modules << " modules (" << report.functions << " functions) in "
            << report.classes.size() << " classes to " << so.out_dir << ":";
      } else {
        out << "wrote " << report.functions << " functions of " << report.files << " modules in "
            << report.classes.size() << " classes to " << so.out_dir << ":";
      }
      for (const auto& [pkg, count] : report.classes) out << " " << pkg << " " << count;
      out << "\n";
      return 0;
    }
    if (train_tbcnn->parsed()) {
      tt.progress = ::isatty(STDERR_FILENO) != 0;
      const auto r = tbcnn::train_tbcnn(tt);
      out << "trained " << tt.model << " (" << tt.task << ") on " << r.examples
          << " examples: " << r.steps << " steps in " << std::fixed << std::setprecision(1)
          << r.seconds << " s (" << r.trees_per_second << " trees/s, " << std::setprecision(0)
          << r.nodes_per_second << " nodes/s), final loss " << std::setprecision(4) << r.final_loss
          << "; wrote " << tt.out_path;
      if (tt.valid_every > 0) {
        out << ", the model of step " << r.best_step << " (valid accuracy " << std::setprecision(4)
            << r.best_valid_accuracy << ", the best of " << r.valid_curve.size() << " scored)";
      }
      out << "\n";
      return 0;
    }
    if (eval_tbcnn->parsed()) {
      const auto r = tbcnn::evaluate_tbcnn(et);
      if (eval_tbcnn_json_flag) {
        out << tbcnn::eval_tbcnn_json(r) << "\n";
      } else {
        out << r.model << " (" << r.task << ") on " << r.split << ": accuracy " << std::fixed
            << std::setprecision(4) << r.accuracy << ", top-5 " << r.top5 << " over " << r.count
            << " examples, " << r.classes << " classes\n";
      }
      return 0;
    }
    if (encode->parsed()) {
      const auto r = tbcnn::encode_file(enc);
      if (r.error_nodes > 0)
        err << "engram: warning: " << enc.file << " has " << r.error_nodes << " parse errors\n";
      out << tbcnn::encode_json(r) << "\n";
      return 0;
    }
    if (classify->parsed()) {
      const auto r = tbcnn::classify_file(enc);
      if (r.error_nodes > 0)
        err << "engram: warning: " << enc.file << " has " << r.error_nodes << " parse errors\n";
      for (const auto& [name, p] : r.top)
        out << std::left << std::setw(24) << name << std::right << std::fixed
            << std::setprecision(4) << p << "\n";
      return 0;
    }
    if (train_npi->parsed()) {
      to.progress = ::isatty(STDERR_FILENO) != 0;
      const auto report = npi::train_npi(to);
      out << "trained " << to.task << " NPI: " << report.steps << " steps in " << std::fixed
          << std::setprecision(1) << report.seconds << " s (" << report.traces_per_second
          << " traces/s), final loss " << std::setprecision(5) << report.final_loss << "; wrote "
          << to.out_path << "\n";
      return 0;
    }
    if (train_primitives->parsed()) {
      tp.progress = ::isatty(STDERR_FILENO) != 0;
      tp.on_family = [&](const primitives::FamilyReport& r) {
        out << std::left << std::setw(8) << r.family << std::right << " K=" << r.k << "  "
            << r.correct << "/" << r.examples << (r.exact ? " exact" : " NOT EXACT") << " after "
            << r.steps << " steps, " << std::fixed << std::setprecision(1) << r.seconds << " s\n";
        out.flush();
      };
      const auto reports = primitives::train_primitives(tp);
      const bool exact =
          std::all_of(reports.begin(), reports.end(), [](const auto& r) { return r.exact; });
      out << "wrote " << reports.size() << " primitive network(s) to " << tp.out_path
          << (exact ? "" : " (some are not exact: raise --steps or --hidden)") << "\n";
      return 0;
    }
    if (eval_primitives->parsed()) {
      const auto reports =
          primitives::evaluate_primitives(eval_primitives_model, eval_primitives_threads);
      if (eval_primitives_json) {
        out << primitives::family_reports_json(reports) << "\n";
      } else {
        out << "primitive  kind        K  correct/examples  accuracy\n";
        for (const auto& r : reports) {
          out << std::left << std::setw(10) << r.family << " " << std::setw(9) << r.kind
              << std::right << std::setw(5) << r.k << std::setw(10) << r.correct << "/" << std::left
              << std::setw(8) << r.examples << std::right << std::fixed << std::setprecision(4)
              << r.accuracy << "\n";
        }
      }
      return 0;
    }
    if (eval_npi->parsed()) {
      eo.binding = make_binding(eo.task, eval_primitive, /*learned=*/true);
      eo.lengths = npi::parse_lengths(lengths);
      const auto reports = npi::evaluate_npi(eo);
      if (eval_json) {
        out << npi::eval_reports_json(reports) << "\n";
      } else {
        print_eval_table(out, reports);
      }
      return 0;
    }
    if (run->parsed() && run_program->count() > 0) {
      if (run_task->count() > 0 || run_model->count() > 0)
        throw UsageError("--program runs the models in --models; it takes no --task or --model");
      if (run_models->count() == 0) throw UsageError("--program needs --models DIR");
      if (run_primitive.primitive_option->count() > 0 || run_primitive.init_option->count() > 0)
        throw UsageError(
            "with --program, primitives and initial values are written in the program");
      if (run_primitive.symbolic == !run_primitive.library.empty()) {
        throw UsageError(run_primitive.symbolic
                             ? "give --primitives or --symbolic-primitives, not both"
                             : "--primitives P (learned networks) or --symbolic-primitives is "
                               "required with --program");
      }
      po.input = ro.input;
      po.threads = ro.threads;
      po.max_steps = ro.max_steps;
      po.max_depth = ro.max_depth;
      po.k = run_primitive.k;
      std::shared_ptr<primitives::PrimitiveLibrary> library;
      if (!run_primitive.symbolic) {
        library = std::make_shared<primitives::PrimitiveLibrary>(
            primitives::PrimitiveLibrary::load(run_primitive.library));
        if (run_primitive.k_option->count() > 0 && run_primitive.k != library->domain()) {
          throw UsageError("--k " + std::to_string(run_primitive.k) +
                           " does not match the primitive library (K = " +
                           std::to_string(library->domain()) + ")");
        }
        po.k = library->domain();
      }
      const int k = po.k;
      po.primitive = [library, k](const datasets::PrimitiveRef& ref) {
        return library ? library->get(ref) : datasets::make_symbolic_primitive(ref, k);
      };
      const auto report = npi::run_pipeline(po);
      out << (run_json ? npi::pipeline_json(report) + "\n" : npi::pipeline_text(report));
      return 0;
    }
    if (run->parsed()) {
      if (run_task->count() == 0 || run_model->count() == 0)
        throw UsageError("run needs --task and --model (or --program and --models)");
      ro.binding = make_binding(ro.task, run_primitive, /*learned=*/true);
      const auto report = npi::run_npi(ro);
      if (run_json) {
        out << npi::run_report_json(report) << "\n";
      } else {
        out << npi::call_tree_text(report);
        out << "result: " << report.output
            << (report.correct ? "  (correct)" : "  (WRONG, expected " + report.expected + ")")
            << "\n";
        if (!report.error.empty()) out << "stopped: " << report.error << "\n";
      }
      return 0;
    }
    if (demo->parsed()) return run_demo(demo_options, out);
    if (bench_npi->parsed()) {
      bench::run_npi_bench(bo, out);
      return 0;
    }
    if (bench_tbcnn->parsed()) {
      bench::run_tbcnn_bench(tbo, out);
      return 0;
    }
    if (bench_memory->parsed()) {
      bench::run_memory_bench(mo, out);
      return 0;
    }
  } catch (const UsageError& e) {
    err << "engram: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "engram: error: " << e.what() << "\n";
    return 1;
  }
  err << "engram: error: no command given (see `engram help`)\n";
  return 2;
}

}  // namespace engram::cli
