// engram train npi: a Neural Programmer-Interpreter trained on execution traces. Flags the user
// does not give take the task's defaults (npi::train_defaults: the model the claims use).
#include "cli/Command.h"
#include "cli/Flags.h"
#include "trainer/MemoryTechnique.h"
#include "npi/Npi.h"

#include <iomanip>
#include <memory>

namespace engram::cli {
namespace {

struct TrainNpi {
  npi::TrainOptions options;
  TrainingFlags training;
  CLI::Option *hidden = nullptr, *impl = nullptr;

  /// The task's defaults for every flag not given.
  void fill_unset() {
    const npi::TrainOptions defaults = npi::train_defaults(options.task);
    training.fill_unset(defaults.training, options.training);
    if (hidden->count() == 0) options.hidden = defaults.hidden;
    if (impl->count() == 0) options.impl = defaults.impl;
  }
};

int run_train_npi(TrainNpi& c, std::ostream& out) {
  c.fill_unset();
  auto& o = c.options;
  refuse_overwriting({{"--data", o.data_path}}, training_outputs("--out", o.out_path, o.training));
  o.training.progress = stderr_is_terminal();
  o.training.job = read_job_environment();
  const auto report = npi::train_npi(o);
  out << "trained " << o.task << " NPI: " << report.steps << " steps in " << std::fixed
      << std::setprecision(1) << report.seconds << " s (" << report.traces_per_second
      << " traces/s), final loss " << std::setprecision(5) << report.final_loss;
  if (o.training.writes_files()) out << "; wrote " << o.out_path;
  out << "\n" << report.memory_plan;
  return 0;
}

}  // namespace

Command register_train_npi(CLI::App& parent) {
  auto c = std::make_shared<TrainNpi>();
  auto& o = c->options;
  FlagTable flags{{"task", "--task"},
                  {"data_path", "--data"},
                  {"out_path", "--out"},
                  {"hidden", "--hidden"},
                  {"impl", "--impl"}};
  CLI::App* sub = parent.add_subcommand("npi", "Train a Neural Programmer-Interpreter on traces");
  sub->add_option("--task", o.task, "Task: " + known_tasks())->required();
  sub->add_option("--data", o.data_path, "Trace file from `engram data gen`")->required();
  sub->add_option("--out", o.out_path, "Model file to write")->required();
  TrainingFlagsSpec spec;
  spec.batch = "Traces per step";
  spec.batch_default = "per task: 8, 1 for sort and sort-recursive";
  spec.memory =
      "Comma-separated memory techniques: " + trainer::memory_techniques_help() +
      ". The NPI's units are its encoder and core; algo needs convolutions, which it has none of";
  spec.memory_budget = true;
  c->training = add_training_flags(sub, o.training, spec, flags);
  c->hidden = sub->add_option("--hidden", o.hidden,
                              "LSTM width (default: per task: 256, 64 for sort and "
                              "sort-recursive)");
  c->impl = sub->add_option("--impl", o.impl,
                            "Layer implementation: engram (nn/, the default) or torch (plain "
                            "torch modules, for comparison)")
                ->check(CLI::IsMember({"engram", "torch"}))
                ->capture_default_str();
  return {sub, [c](std::ostream& out, std::ostream&) { return run_train_npi(*c, out); }, flags};
}

}  // namespace engram::cli
