// engram data gen: reference execution traces of a task.
#include "cli/Command.h"
#include "cli/Flags.h"
#include "datasets/TraceFile.h"

#include <memory>

namespace engram::cli {
namespace {

struct DataGen {
  std::string task, out;
  datasets::GenerateOptions gen;
  CLI::Option *min_length = nullptr, *max_length = nullptr, *per_length = nullptr,
              *traces = nullptr;
  PrimitiveFlags primitive;
};

int run_data_gen(DataGen& c, std::ostream& out) {
  const auto bound =
      datasets::bind_task(c.task, primitives::make_binding(c.task, c.primitive.given()));
  const auto& task = *bound;
  const datasets::GenerateOptions defaults = datasets::default_generate_options(task);
  if (c.min_length->count() == 0) c.gen.min_length = defaults.min_length;
  if (c.max_length->count() == 0) c.gen.max_length = defaults.max_length;
  if (c.per_length->count() == 0) c.gen.per_length = defaults.per_length;
  if (c.traces->count() > 0 && c.gen.traces < 1)
    throw InvalidOption("traces", "must be at least 1");
  const auto set = datasets::generate_traces(task, c.gen);
  datasets::write_trace_file(c.out, set);
  out << "wrote " << set.traces.size() << " " << task.name() << " traces (lengths "
      << c.gen.min_length << ".." << c.gen.max_length << ") to " << c.out << "\n";
  return 0;
}

}  // namespace

Command register_data_gen(CLI::App& parent) {
  auto c = std::make_shared<DataGen>();
  FlagTable flags{{"min_length", "--min-len"},
                  {"max_length", "--max-len"},
                  {"per_length", "--per-length"},
                  {"traces", "--traces"},
                  {"seed", "--seed"}};
  CLI::App* gen = parent.add_subcommand("gen", "Generate reference execution traces");
  gen->add_option("--task", c->task, "Task: " + known_tasks())->required();
  gen->add_option("--out", c->out, "Output trace file (JSON lines)")->required();
  c->min_length = gen->add_option("--min-len", c->gen.min_length,
                                  "Shortest problem (default: per task, its shortest: 1 for "
                                  "addition and the list tasks, 2 for sort)");
  c->max_length = gen->add_option("--max-len", c->gen.max_length,
                                  "Longest problem (default: per task: 20; 10 for the list tasks)");
  c->per_length = gen->add_option(
      "--per-length", c->gen.per_length,
      "Traces per length (default: per task: 32 for addition and the list tasks, 64 otherwise)");
  c->traces = gen->add_option("--traces", c->gen.traces,
                              "Traces in all, spread evenly over the lengths (instead of "
                              "--per-length; a multiple of the lengths draws the same traces)");
  c->traces->excludes(c->per_length);
  gen->add_option("--seed", c->gen.seed, "Random seed")->check(seed_check())->capture_default_str();
  add_primitive_flags(gen, c->primitive, /*runs_programs=*/false, flags);
  return {gen, [c](std::ostream& out, std::ostream&) { return run_data_gen(*c, out); }, flags};
}

}  // namespace engram::cli
