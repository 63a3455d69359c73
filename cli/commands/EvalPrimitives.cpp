// engram eval primitives: exhaustive accuracy of every network in a primitive library.
#include "cli/Command.h"
#include "cli/Flags.h"
#include "primitives/Primitives.h"

#include <CLI/CLI.hpp>

#include <iomanip>
#include <memory>

namespace engram::cli {
namespace {

struct EvalPrimitives {
  std::string model;
  int threads = 1;
  std::string device = "cpu";
  bool json = false;
};

int run_eval_primitives(const EvalPrimitives& c, std::ostream& out) {
  const auto reports = primitives::evaluate_primitives(c.model, c.threads, c.device);
  if (c.json) {
    out << primitives::family_reports_json(reports) << "\n";
    return 0;
  }
  out << "primitive  kind        K  correct/examples  accuracy\n";
  for (const auto& r : reports) {
    out << std::left << std::setw(10) << r.family << " " << std::setw(9) << r.kind << std::right
        << std::setw(5) << r.k << std::setw(10) << r.correct << "/" << std::left << std::setw(8)
        << r.examples << std::right << std::fixed << std::setprecision(4) << r.accuracy << "\n";
  }
  return 0;
}

}  // namespace

Command register_eval_primitives(CLI::App& parent) {
  auto c = std::make_shared<EvalPrimitives>();
  CLI::App* sub = parent.add_subcommand(
      "primitives", "Exhaustive accuracy of every network in a primitive library");
  sub->add_option("--model", c->model, "Primitive library file")->required();
  sub->add_option("--threads", c->threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  FlagTable flags{{"threads", "--threads"}};
  add_device_flag(sub, c->device, flags);
  sub->add_flag("--json", c->json, "Print JSON");
  return {sub, [c](std::ostream& out, std::ostream&) { return run_eval_primitives(*c, out); },
          flags};
}

}  // namespace engram::cli
