// engram train primitives: one small network per primitive, trained on its whole domain.
#include "cli/Command.h"
#include "cli/Flags.h"
#include "primitives/Primitives.h"

#include <algorithm>
#include <iomanip>
#include <memory>

namespace engram::cli {
namespace {

int run_train_primitives(primitives::TrainPrimitivesOptions& tp, std::ostream& out) {
  refuse_overwriting({}, training_outputs("--out", tp.out_path, tp.training,
                                          /*checkpoint_beside_model=*/false));
  tp.training.progress = stderr_is_terminal();
  tp.training.job = read_job_environment();
  tp.on_family = [&](const primitives::FamilyReport& r) {
    out << std::left << std::setw(8) << r.family << std::right << " K=" << r.k << "  "
        << r.correct << "/" << r.examples << (r.exact ? " exact" : " NOT EXACT") << " after "
        << r.steps << " steps, " << std::fixed << std::setprecision(1) << r.seconds << " s\n";
    out.flush();
  };
  const auto reports = primitives::train_primitives(tp);
  const bool exact =
      std::all_of(reports.begin(), reports.end(), [](const auto& r) { return r.exact; });
  out << (tp.training.writes_files() ? "wrote " : "trained ") << reports.size()
      << " primitive network(s)" << (tp.training.writes_files() ? " to " + tp.out_path : "")
      << (exact ? "" : " (some are not exact: raise --steps or --hidden)") << "\n";
  return 0;
}

}  // namespace

Command register_train_primitives(CLI::App& parent) {
  auto tp = std::make_shared<primitives::TrainPrimitivesOptions>();
  FlagTable flags{{"out_path", "--out"},
                  {"k", "--k"},
                  {"families", "--primitive"},
                  {"add", "--add"},
                  {"hidden", "--hidden"},
                  {"embedding", "--embedding"}};
  CLI::App* sub = parent.add_subcommand(
      "primitives", "Train one small network per primitive on its whole domain");
  sub->add_option("--out", tp->out_path, "Primitive library file to write")->required();
  sub->add_option("--k", tp->k, "Values lie in 0..K-1")->capture_default_str();
  sub->add_option("--primitive", tp->families,
                  "Families to train (repeat or separate by commas; default: the library: "
                  "succ, double, square, negate, even, prime, gt, add, mul, max, min, fulladd)")
      ->delimiter(',');
  sub->add_flag("--add", tp->add,
                "Add the families to the existing library --out, leaving its other networks as "
                "they are");
  TrainingFlagsSpec spec;
  spec.steps = "Most optimizer steps per family (stops once exact)";
  add_training_flags(sub, tp->training, spec, flags);
  sub->add_option("--hidden", tp->hidden, "Width of the hidden layers")->capture_default_str();
  sub->add_option("--embedding", tp->embedding, "Width of each input's embedding")
      ->capture_default_str();
  return {sub, [tp](std::ostream& out, std::ostream&) { return run_train_primitives(*tp, out); },
          flags};
}

}  // namespace engram::cli
