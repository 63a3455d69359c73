#include "cli/Demo.h"

#include "common/Errors.h"
#include "datasets/TraceFile.h"
#include "npi/Npi.h"
#include "trainer/Device.h"
#include "trainer/Threads.h"

#include <unistd.h>

#include <filesystem>
#include <iomanip>
#include <stdexcept>
#include <system_error>

namespace engram::cli {

int run_demo(const DemoOptions& options, std::ostream& out) {
  // The options first: nothing is written for a run that cannot go through.
  if (options.dir.empty()) throw InvalidOption("dir", "must name a folder");
  trainer::set_threads_option(options.threads);
  trainer::resolve_device(options.device);  // a GPU it does not see: a usage error, before work
  std::error_code error;
  std::filesystem::create_directories(options.dir, error);
  if (error || !std::filesystem::is_directory(options.dir))
    throw std::runtime_error("cannot create the folder '" + options.dir + "'" +
                             (error ? ": " + error.message() : ": a file is in the way"));
  const std::string data_path = options.dir + "/addition.jsonl";
  const std::string model_path = options.dir + "/addition.pt";
  const auto& task = datasets::task_by_name("addition");

  out << "== 1/4  engram data gen --task addition --out " << data_path << "\n";
  datasets::GenerateOptions gen;  // the paper's set: 32 traces for each length 1..20
  const auto set = datasets::generate_traces(task, gen);
  datasets::write_trace_file(data_path, set);
  out << set.traces.size() << " reference traces of lengths 1..20\n\n" << std::flush;

  npi::TrainOptions train;
  train.task = "addition";
  train.data_path = data_path;
  train.out_path = model_path;
  train.hidden = 64;
  train.training.steps = 1500;
  train.training.threads = options.threads;
  train.training.device = options.device;
  train.training.metrics_path = options.dir + "/metrics.jsonl";
  train.training.progress = ::isatty(STDERR_FILENO) != 0;
  train.training.resume = options.resume;
  out << "== 2/4  engram train npi --task addition --hidden " << train.hidden << " --steps "
      << train.training.steps << (options.resume ? " --resume" : "") << "\n"
      << std::flush;
  const auto trained = npi::train_npi(train);
  out << std::fixed << std::setprecision(1) << "trained in " << trained.seconds << " s, final loss "
      << std::setprecision(5) << trained.final_loss << "\n\n"
      << std::flush;

  npi::EvalOptions eval;
  eval.model_path = model_path;
  eval.task = "addition";
  eval.lengths = {20, 100, 1000};
  eval.count = 20;
  eval.threads = options.threads;
  eval.device = options.device;
  out << "== 3/4  engram eval npi --length 20,100,1000 --count 20 (trained on lengths up to 20)\n"
      << std::flush;
  const auto reports = npi::evaluate_npi(eval);
  for (const auto& r : reports) {
    out << "  length " << std::setw(5) << r.length << ": accuracy " << std::setprecision(3)
        << r.accuracy << ", trace_exact " << r.trace_exact << "\n"
        << std::flush;
  }
  out << "\n";

  npi::RunOptions run;
  run.model_path = model_path;
  run.task = "addition";
  run.input = "96+38";
  run.threads = options.threads;
  run.device = options.device;
  out << "== 4/4  engram run --task addition --input \"" << run.input << "\"\n";
  const auto report = npi::run_npi(run);
  out << npi::call_tree_text(report) << "result: " << report.output
      << (report.correct ? "  (correct)\n" : "  (wrong, expected " + report.expected + ")\n");
  out << "\nfiles in " << options.dir
      << "/: addition.jsonl (traces), addition.pt (model), "
         "metrics.jsonl (training curve)\n";
  return 0;
}

}  // namespace engram::cli
