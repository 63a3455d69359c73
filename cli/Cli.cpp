#include "cli/Cli.h"

#include "bench/MemoryBench.h"
#include "bench/NpiBench.h"
#include "cli/Demo.h"
#include "common/Errors.h"
#include "datasets/TraceFile.h"
#include "npi/Npi.h"

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

struct DataGenCommand {
  std::string task, out;
  datasets::GenerateOptions gen;
  bool min_set = false;
};

void print_eval_table(std::ostream& out, const std::vector<npi::LengthReport>& reports) {
  out << "task            length  count  accuracy  trace_exact  seconds\n";
  for (const auto& r : reports) {
    out << std::left << std::setw(16) << r.task << std::right << std::setw(6) << r.length
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
  CLI::App app{"engram: train neural programs on execution traces and query them", "engram"};
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
  gen->add_option("--max-len", dg.gen.max_length, "Longest problem")->capture_default_str();
  auto* per_length = gen->add_option("--per-length", dg.gen.per_length,
                                     "Traces per length (default: 32 for addition, 64 for sort)");
  gen->add_option("--seed", dg.gen.seed, "Random seed")->capture_default_str();

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

  // engram run
  auto* run =
      app.add_subcommand("run", "Query a model: print the generated program and its result");
  npi::RunOptions ro;
  bool run_json = false;
  run->add_option("--model", ro.model_path, "Model file")->required();
  run->add_option("--task", ro.task, "Task: " + known_tasks())->required();
  run->add_option("--input", ro.input,
                  "Problem: \"A+B\" for addition, comma-separated digits for sort")
      ->required();
  run->add_option("--threads", ro.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  run->add_option("--max-steps", ro.max_steps, "Step limit (default: scales with length)");
  run->add_option("--max-depth", ro.max_depth, "Call-depth limit (default: scales with length)");
  run->add_flag("--json", run_json, "Print the call tree and result as JSON");

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
      const auto& task = datasets::task_by_name(dg.task);
      if (min_len->count() == 0) dg.gen.min_length = task.min_length();
      if (per_length->count() == 0) dg.gen.per_length = task.name() == "addition" ? 32 : 64;
      const auto set = datasets::generate_traces(task, dg.gen);
      datasets::write_trace_file(dg.out, set);
      out << "wrote " << set.traces.size() << " " << task.name() << " traces (lengths "
          << dg.gen.min_length << ".." << dg.gen.max_length << ") to " << dg.out << "\n";
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
    if (eval_npi->parsed()) {
      eo.lengths = npi::parse_lengths(lengths);
      const auto reports = npi::evaluate_npi(eo);
      if (eval_json) {
        out << npi::eval_reports_json(reports) << "\n";
      } else {
        print_eval_table(out, reports);
      }
      return 0;
    }
    if (run->parsed()) {
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
