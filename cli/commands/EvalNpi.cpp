// engram eval npi: exact-match accuracy of an NPI on random problems of given lengths.
#include "cli/Command.h"
#include "cli/Flags.h"
#include "npi/Npi.h"

#include <iomanip>
#include <memory>

namespace engram::cli {
namespace {

struct EvalNpi {
  npi::EvalOptions options;
  std::string lengths;
  bool json = false;
  PrimitiveFlags primitive;
};

void print_failure(std::ostream& out, const npi::Failure& f) {
  out << "  failed: " << (f.input.size() > 60 ? f.input.substr(0, 57) + "..." : f.input);
  if (!f.error.empty()) out << "  (" << f.error << ")";
  if (f.first_divergence >= 0) {
    out << "  diverged at call " << f.first_divergence << ": expected " << f.expected_call
        << ", generated " << (f.generated_call.empty() ? "nothing" : f.generated_call);
  }
  out << "\n";
}

void print_eval_table(std::ostream& out, const std::vector<npi::LengthReport>& reports) {
  out << "task                length  count  accuracy  trace_exact  seconds\n";
  for (const auto& r : reports) {
    out << std::left << std::setw(20) << r.task << std::right << std::setw(6) << r.length
        << std::setw(7) << r.count << std::setw(10) << std::fixed << std::setprecision(3)
        << r.accuracy << std::setw(13) << r.trace_exact << std::setw(9) << std::setprecision(1)
        << r.seconds << "\n";
    for (const auto& f : r.failures) print_failure(out, f);
  }
}

int run_eval_npi(EvalNpi& c, std::ostream& out) {
  auto& eo = c.options;
  eo.binding = primitives::make_binding(eo.task, c.primitive.given());
  eo.lengths = npi::parse_lengths(c.lengths);
  const auto reports = npi::evaluate_npi(eo);
  if (c.json) {
    out << npi::eval_reports_json(reports) << "\n";
  } else {
    print_eval_table(out, reports);
  }
  return 0;
}

}  // namespace

Command register_eval_npi(CLI::App& parent) {
  auto c = std::make_shared<EvalNpi>();
  auto& eo = c->options;
  FlagTable flags{{"model_path", "--model"}, {"task", "--task"},         {"lengths", "--length"},
                  {"count", "--count"},      {"seed", "--seed"},         {"threads", "--threads"},
                  {"max_steps", "--max-steps"}, {"max_depth", "--max-depth"}};
  CLI::App* sub = parent.add_subcommand("npi", "Exact-match accuracy on random problems");
  sub->add_option("--model", eo.model_path, "Model file")->required();
  sub->add_option("--task", eo.task, "Task: " + known_tasks())->required();
  sub->add_option("--length", c->lengths, "Problem length(s), e.g. 100 or 20,60,100")->required();
  sub->add_option("--count", eo.count, "Problems per length")->capture_default_str();
  sub->add_option("--seed", eo.seed, "Random seed")->check(seed_check())->capture_default_str();
  sub->add_option("--threads", eo.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  add_device_flag(sub, eo.device, flags);
  sub->add_option("--max-steps", eo.max_steps, "Step limit (default: scales with length)");
  sub->add_option("--max-depth", eo.max_depth, "Call-depth limit (default: scales with length)");
  sub->add_flag("--json", c->json, "Print JSON: one object per length, a list for several");
  add_primitive_flags(sub, c->primitive, /*runs_programs=*/true, flags);
  return {sub, [c](std::ostream& out, std::ostream&) { return run_eval_npi(*c, out); }, flags};
}

}  // namespace engram::cli
