#include "synth/Synth.h"

#include "common/Errors.h"
#include "common/Subprocess.h"
#include "datasets/ListTask.h"
#include "datasets/Primitive.h"
#include "datasets/ProgramExpression.h"
#include "npi/Npi.h"
#include "primitives/Primitives.h"
#include "synth/Recognizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

namespace engram::synth {
namespace {

using json = nlohmann::json;

/// Runs the tracer `script` in `mode` on `inputs`; its JSON output.
json run_tracer(const SynthOptions& o, const ScratchDir& scratch, const std::string& script,
                const std::string& mode, const json& inputs) {
  const std::string input_path = scratch.file("inputs_" + mode + ".json");
  std::ofstream(input_path) << inputs.dump();
  ProcessOptions io;
  io.stdout_path = scratch.file("out_" + mode + ".json");
  io.stderr_path = scratch.file("err_" + mode + ".txt");
  std::optional<ChildProcess> tracer;
  try {
    tracer.emplace(
        std::vector<std::string>{o.python, "-I", script, mode, "--source", o.source, "--function",
                                 o.function, "--k", std::to_string(o.k), "--inputs", input_path},
        io);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot run the tracer: ") + e.what());
  }
  if (!tracer->wait(o.timeout_seconds)) {
    tracer->kill();
    throw std::runtime_error(o.function + "() did not finish within " +
                             std::to_string(static_cast<int>(o.timeout_seconds)) +
                             " s on the sample inputs (an endless loop?)");
  }
  const std::string err = last_line(read_file(io.stderr_path));
  if (tracer->exit_code() < 0)
    throw std::runtime_error("the tracer (" + o.python + ") " + tracer->outcome());
  if (tracer->exit_code() == 2) throw UsageError(err);
  if (tracer->exit_code() != 0) throw std::runtime_error(err.empty() ? "the tracer failed" : err);
  try {
    return json::parse(read_file(io.stdout_path));
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("the tracer's output is not JSON: ") + e.what());
  }
}

json sample_inputs(const SynthOptions& o, std::mt19937_64& rng) {
  json inputs = json::array();
  std::vector<int> all(static_cast<std::size_t>(o.k));
  for (int v = 0; v < o.k; ++v) all[static_cast<std::size_t>(v)] = v;
  std::vector<int> reversed(all.rbegin(), all.rend()), shuffled = all;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  inputs.push_back({all, shuffled});
  inputs.push_back({reversed, all});
  inputs.push_back({shuffled, reversed});
  std::uniform_int_distribution<int> value(0, o.k - 1);
  std::uniform_int_distribution<int> length(1, std::max(1, o.max_sample_length));
  for (int s = 0; s < o.samples; ++s) {
    const int n = length(rng);
    std::vector<int> xs(static_cast<std::size_t>(n)), ys(static_cast<std::size_t>(n));
    for (auto& v : xs) v = value(rng);
    for (auto& v : ys) v = value(rng);
    inputs.push_back({xs, ys});
  }
  return inputs;
}

std::int64_t python_mod(std::int64_t a, std::int64_t k) {
  const std::int64_t r = a % k;
  return r < 0 ? r + k : r;
}

struct Binder {
  const SynthOptions& options;
  SynthReport& report;
  std::set<std::string> names;

  std::string kind_of(Stage::Kind stage) const {
    switch (stage) {
      case Stage::Kind::kMap:
        return "unary";
      case Stage::Kind::kFilter:
        return "predicate";
      default:
        return "binary";
    }
  }
  static std::string stage_name(Stage::Kind stage) { return stage_kind_name(stage); }

  /// The value the most elements' path computes, whatever the branches (for entries no
  /// observed path decides: values the code never computed there).
  std::optional<std::int64_t> fallback(const Template& fn, const std::vector<std::int64_t>& args) {
    const Path* best = nullptr;
    for (const auto& p : fn.paths())
      if (p.included && (best == nullptr || p.seen > best->seen)) best = &p;
    return best == nullptr ? std::nullopt : best->value.evaluate(args);
  }

  RecoveredPrimitive table(const Stage& s) {
    const int k = options.k;
    RecoveredPrimitive r;
    r.stage = stage_name(s.kind);
    r.where = s.where;
    r.kind = kind_of(s.kind);
    r.code = s.fn.text();
    const bool binary = r.kind == "binary";
    r.entries = binary ? k * k : k;
    for (int i = 0; i < r.entries; ++i) {
      const std::vector<std::int64_t> args =
          binary ? std::vector<std::int64_t>{i / k, i % k} : std::vector<std::int64_t>{i};
      const auto result = s.fn.apply(args);
      std::optional<std::int64_t> value;
      if (s.kind == Stage::Kind::kFilter) {
        value = result.covered ? (result.included ? 1 : 0) : 0;
      } else if (result.covered && result.included) {
        value = result.value;
      } else {
        value = fallback(s.fn, args);
      }
      if (result.covered && (s.kind == Stage::Kind::kFilter || result.included)) ++r.covered;
      if (!value) {
        throw InputError("the computation at " + s.where + " cannot be evaluated for " +
                         (binary
                              ? "(" + std::to_string(args[0]) + ", " + std::to_string(args[1]) + ")"
                              : std::to_string(args[0])));
      }
      std::int64_t v = s.reduce_mod_k ? python_mod(*value, k) : *value;
      if (v < 0 || v >= k) {
        throw InputError("the computation at " + s.where + " gives " + std::to_string(v) + " for " +
                         (binary
                              ? "(" + std::to_string(args[0]) + ", " + std::to_string(args[1]) + ")"
                              : std::to_string(args[0])) +
                         ", outside the domain 0.." + std::to_string(k - 1) + " (reduce it % " +
                         std::to_string(k) + ")");
      }
      r.table.push_back(static_cast<int>(v));
    }
    return r;
  }

  /// The library primitive that equals the table where the traces decide it, if any.
  std::string match(const Stage& s, const RecoveredPrimitive& r) {
    const int k = options.k;
    const datasets::PrimitiveKind kind =
        s.kind == Stage::Kind::kMap      ? datasets::PrimitiveKind::kUnary
        : s.kind == Stage::Kind::kFilter ? datasets::PrimitiveKind::kPredicate
                                         : datasets::PrimitiveKind::kBinary;
    for (const auto& family : datasets::primitive_families()) {
      if (family.kind != kind) continue;
      std::vector<int> parameters{-1};
      if (family.has_parameter) {
        parameters.clear();
        for (int c = family.min_parameter; c < k; ++c) parameters.push_back(c);
      }
      for (int c : parameters) {
        datasets::PrimitiveRef ref{family.name, c};
        bool same = true;
        for (int i = 0; i < r.entries && same; ++i) {
          const bool binary = kind == datasets::PrimitiveKind::kBinary;
          const std::vector<std::int64_t> args =
              binary ? std::vector<std::int64_t>{i / k, i % k} : std::vector<std::int64_t>{i};
          const auto decided = s.fn.apply(args);
          if (!decided.covered || (s.kind != Stage::Kind::kFilter && !decided.included)) continue;
          const int want = r.table[static_cast<std::size_t>(i)];
          same = datasets::symbolic_apply(ref, k, binary ? i / k : i, binary ? i % k : 0) == want;
        }
        if (same) return ref.text();
      }
    }
    return {};
  }

  std::string primitive(const Stage& s) {
    RecoveredPrimitive r = table(s);
    r.name = match(s, r);
    r.known = !r.name.empty();
    if (!r.known) {
      std::string base = options.function + "_" + r.stage + "_";
      const auto digits = r.where.find_first_of("0123456789");
      base += digits == std::string::npos ? "0" : r.where.substr(digits);
      std::string name = base;
      for (int n = 2; names.count(name) != 0; ++n) name = base + "_" + std::to_string(n);
      r.name = name;
      datasets::TableFamily family;
      family.name = name;
      family.kind = s.kind == Stage::Kind::kMap      ? datasets::PrimitiveKind::kUnary
                    : s.kind == Stage::Kind::kFilter ? datasets::PrimitiveKind::kPredicate
                                                     : datasets::PrimitiveKind::kBinary;
      family.k = options.k;
      family.table = r.table;
      family.help = options.source + " " + r.where;
      datasets::register_table_family(family);
    }
    names.insert(r.name);
    report.primitives.push_back(r);
    return r.name;
  }

  std::int64_t identity_of(const Stage& s, const RecoveredPrimitive& r) const {
    const int k = options.k;
    for (int c = 0; c < k; ++c) {
      bool identity = true;
      for (int v = 0; v < k && identity; ++v)
        identity = r.table[static_cast<std::size_t>(c * k + v)] == v;
      if (identity) return c;
    }
    throw InputError("the accumulation at " + s.where +
                     " starts from the first element, and its "
                     "combiner has no identity in 0.." +
                     std::to_string(k - 1) + " to start from instead; give it an initial value");
  }

  std::string expression(const Stage& s) {
    switch (s.kind) {
      case Stage::Kind::kInput:
        return s.list == 0 ? "xs" : "ys";
      case Stage::Kind::kMap:
      case Stage::Kind::kFilter: {
        const std::string inner = expression(s.inputs.at(0));
        return stage_name(s.kind) + "(" + primitive(s) + ", " + inner + ")";
      }
      case Stage::Kind::kFold:
      case Stage::Kind::kScan: {
        const std::string inner = expression(s.inputs.at(0));
        const std::string name = primitive(s);
        const std::int64_t init =
            s.identity_init ? identity_of(s, report.primitives.back()) : s.init;
        if (init < 0 || init >= options.k)
          throw InputError("the accumulation at " + s.where + " starts from " +
                           std::to_string(init) + ", outside the domain 0.." +
                           std::to_string(options.k - 1));
        return stage_name(s.kind) + "(" + name + ", " + std::to_string(init) + ", " + inner + ")";
      }
      case Stage::Kind::kZipWith: {
        const std::string a = expression(s.inputs.at(0)), b = expression(s.inputs.at(1));
        return "zipwith(" + primitive(s) + ", " + a + ", " + b + ")";
      }
      default:
        throw InputError("the sample inputs leave part of the program unknown (" + s.shape() +
                         "); longer samples may show it");
    }
  }
};

/// Trains a network for each new primitive the library lacks (or holds for another table),
/// adding it to the library file.
void train_missing_primitives(const SynthOptions& o, SynthReport& report) {
  std::vector<std::string> missing;
  {
    // Loading registers the tables the library stores, which may differ from ours.
    const auto library = primitives::PrimitiveLibrary::load(o.primitives);
    if (library.domain() != o.k)
      throw InvalidOption("primitives", "'" + o.primitives + "' holds primitives for K = " +
                                            std::to_string(library.domain()) + ", not " +
                                            std::to_string(o.k));
    const auto held = library.families();
    for (const auto& p : report.primitives) {
      if (p.known) continue;
      const auto* stored = datasets::find_table_family(p.name);
      const bool same = std::find(held.begin(), held.end(), p.name) != held.end() &&
                        stored != nullptr && stored->table == p.table;
      datasets::TableFamily ours;
      ours.name = p.name;
      ours.kind = p.kind == "unary"       ? datasets::PrimitiveKind::kUnary
                  : p.kind == "predicate" ? datasets::PrimitiveKind::kPredicate
                                          : datasets::PrimitiveKind::kBinary;
      ours.k = o.k;
      ours.table = p.table;
      ours.help = o.source + " " + p.where;
      datasets::register_table_family(ours);
      if (!same && std::find(missing.begin(), missing.end(), p.name) == missing.end())
        missing.push_back(p.name);
    }
  }
  if (missing.empty()) return;
  primitives::TrainPrimitivesOptions t;
  t.out_path = o.primitives;
  t.k = o.k;
  t.families = missing;
  t.add = true;
  t.training.seed = o.seed;
  t.training.threads = o.threads;
  t.on_family = [&](const primitives::FamilyReport& r) {
    report.trained.push_back({r.family, r.steps, r.exact, r.seconds});
  };
  primitives::train_primitives(t);
}

/// The neural program (trained programs, primitive networks) on one list.
void check_neural(const SynthOptions& o, SynthReport& report,
                  const datasets::Expression& expression,
                  const primitives::PrimitiveLibrary& library, const std::vector<int>& xs,
                  const std::vector<int>& ys, const std::vector<int>& want) {
  npi::PipelineOptions po;
  po.program = report.expression;
  po.input = datasets::format_value_list(xs);
  if (datasets::uses_second_list(expression)) po.input += ";" + datasets::format_value_list(ys);
  po.models_dir = o.models_dir;
  po.k = o.k;
  po.threads = o.threads;
  po.primitive = [&](const datasets::PrimitiveRef& ref) { return library.get(ref); };
  const auto neural = npi::run_pipeline(po);
  const std::string expected = datasets::format_value_list(want);
  ++report.neural_checked;
  if (neural.error.empty() && neural.output == expected) {
    ++report.neural_agreed;
  } else if (report.first_neural_disagreement.empty()) {
    report.first_neural_disagreement =
        "input " + po.input + ": the function gives " + expected + ", the neural program " +
        (neural.error.empty() ? neural.output : "stopped: " + neural.error);
  }
}

}  // namespace

void validate(const SynthOptions& o) {
  if (o.source.empty()) throw InvalidOption("source", "is required");
  if (o.function.empty()) throw InvalidOption("function", "is required");
  if (o.k < datasets::kMinDomain || o.k > datasets::kMaxDomain)
    throw InvalidOption("k", "must lie in " + std::to_string(datasets::kMinDomain) + ".." +
                                 std::to_string(datasets::kMaxDomain));
  if (o.samples < 0 || o.samples > kMaxSamples)
    throw InvalidOption("samples", "must be between 0 and " + std::to_string(kMaxSamples));
  if (o.checks < 0 || o.checks > kMaxChecks)
    throw InvalidOption("checks", "must be between 0 and " + std::to_string(kMaxChecks));
  if (o.check_length < 1 || o.check_length > kMaxCheckLength)
    throw InvalidOption("check_length", "must be between 1 and " + std::to_string(kMaxCheckLength));
  if (static_cast<long long>(o.checks) * o.check_length > kMaxCheckElements)
    throw InvalidOption("checks", "times check_length must be at most " +
                                      std::to_string(kMaxCheckElements) +
                                      " values: the check lists are held whole");
  if (o.threads < 0 || o.threads > 1024)
    throw InvalidOption("threads", "must be 0 (all cores) or between 1 and 1024");
  if (!(o.timeout_seconds > 0)) throw InvalidOption("timeout_seconds", "must be positive");
}

SynthReport synthesize(const SynthOptions& o) {
  validate(o);
  if (std::ifstream(o.source).fail())
    throw std::runtime_error("cannot read source file '" + o.source + "'");
  const ScratchDir scratch("synth");
  const std::string tracer = scratch.file("engram_tracer.py");  // written once, run twice
  std::ofstream(tracer) << tracer_source();
  std::mt19937_64 rng(o.seed);
  SynthReport report;
  report.function = o.function;
  report.k = o.k;
  const json traced = run_tracer(o, scratch, tracer, "trace", {{"inputs", sample_inputs(o, rng)}});
  const Trace trace = parse_trace(traced.dump());
  report.sample_runs = static_cast<int>(trace.runs.size());
  const Stage program = recognize(trace);
  report.shape = program.shape();
  if (!o.source_class.stage.empty()) {
    const std::string outermost = report.shape.substr(0, report.shape.find('('));
    if (outermost != o.source_class.stage) {
      std::ostringstream message;
      message << "the " << o.source_class.recognizer << " recogniser reads the loop of "
              << o.function << " as " << o.source_class.stage << " (probability " << std::fixed
              << std::setprecision(2) << o.source_class.probability << "), and its trace computes "
              << report.shape << ": no " << o.source_class.stage
              << " program fits (--recognizer trace lets the trace decide)";
      throw std::runtime_error(message.str());
    }
    report.source_class = o.source_class;
  }
  Binder binder{o, report, {}};
  report.expression = binder.expression(program);
  const datasets::Expression expression = datasets::parse_expression(report.expression);
  if (!o.models_dir.empty() || !o.primitives.empty()) {
    // Named by what they hold (the command line names each field by its flag).
    if (o.models_dir.empty())
      throw InvalidOption("models_dir", "is needed with the primitive library: both or neither");
    if (o.primitives.empty())
      throw InvalidOption("primitives",
                          "is needed with the folder of trained programs: both or neither");
    // The programs first: a missing or wrong one fails before the library changes.
    npi::check_pipeline_models(report.expression, o.models_dir);
    train_missing_primitives(o, report);
    report.neural = true;
  }
  if (o.checks > 0) {
    json lists = json::array();
    std::uniform_int_distribution<int> value(0, o.k - 1);
    for (int c = 0; c < o.checks; ++c) {
      std::vector<int> xs(static_cast<std::size_t>(o.check_length));
      std::vector<int> ys(static_cast<std::size_t>(o.check_length));
      for (auto& v : xs) v = value(rng);
      for (auto& v : ys) v = value(rng);
      lists.push_back({xs, ys});
    }
    const json outputs = run_tracer(o, scratch, tracer, "run", {{"inputs", lists}}).at("outputs");
    std::optional<primitives::PrimitiveLibrary> library;
    if (report.neural) library.emplace(primitives::PrimitiveLibrary::load(o.primitives));
    for (int c = 0; c < o.checks; ++c) {
      const auto& in = lists[static_cast<std::size_t>(c)];
      const auto xs = in[0].get<std::vector<int>>(), ys = in[1].get<std::vector<int>>();
      const auto got = datasets::evaluate_symbolic(expression, xs, ys, o.k);
      const auto& want_json = outputs[static_cast<std::size_t>(c)];
      const std::vector<int> want = want_json.is_array() ? want_json.get<std::vector<int>>()
                                                         : std::vector<int>{want_json.get<int>()};
      ++report.checked;
      if (got == want) {
        ++report.agreed;
      } else if (report.first_disagreement.empty()) {
        report.first_disagreement = "xs=" + datasets::format_value_list(xs) +
                                    ": the function gives " + datasets::format_value_list(want) +
                                    ", the program " + datasets::format_value_list(got);
      }
      if (library) check_neural(o, report, expression, *library, xs, ys, want);
    }
  }
  return report;
}

std::string synth_json(const SynthReport& r) {
  json prims = json::array();
  for (const auto& p : r.primitives) {
    prims.push_back({{"stage", p.stage},
                     {"where", p.where},
                     {"kind", p.kind},
                     {"primitive", p.name},
                     {"known", p.known},
                     {"covered", p.covered},
                     {"entries", p.entries},
                     {"code", p.code}});
  }
  json j{{"function", r.function},
         {"k", r.k},
         {"expression", r.expression},
         {"shape", r.shape},
         {"primitives", prims},
         {"sample_runs", r.sample_runs},
         {"recognizer", r.source_class.stage.empty()
                            ? json{{"name", "trace"}}
                            : json{{"name", r.source_class.recognizer},
                                   {"stage", r.source_class.stage},
                                   {"probability", r.source_class.probability},
                                   {"agrees_with_trace", true}}},
         {"check", {{"lists", r.checked}, {"agreed", r.agreed}}}};
  if (!r.first_disagreement.empty()) j["check"]["first_disagreement"] = r.first_disagreement;
  if (r.neural) {
    json trained = json::array();
    for (const auto& t : r.trained)
      trained.push_back(
          {{"primitive", t.name}, {"steps", t.steps}, {"exact", t.exact}, {"seconds", t.seconds}});
    j["neural"] = {{"lists", r.neural_checked}, {"agreed", r.neural_agreed}, {"trained", trained}};
    if (!r.first_neural_disagreement.empty())
      j["neural"]["first_disagreement"] = r.first_neural_disagreement;
  }
  return j.dump();
}

std::string synth_text(const SynthReport& r) {
  std::ostringstream out;
  out << r.expression << "\n";
  if (!r.source_class.stage.empty()) {
    out << "  " << r.source_class.recognizer << " recogniser: " << r.source_class.stage
        << " (probability " << std::fixed << std::setprecision(2) << r.source_class.probability
        << std::defaultfloat << "), as the trace\n";
  }
  for (const auto& p : r.primitives) {
    out << "  " << p.stage << " at " << p.where << ": " << p.name
        << (p.known ? " (library)" : " (new: its table from the code)") << "  <- " << p.code
        << "\n";
  }
  if (r.checked > 0) {
    out << "check: " << r.agreed << " of " << r.checked << " random lists agree with " << r.function
        << "()\n";
    if (!r.first_disagreement.empty())
      out << "  first disagreement: " << r.first_disagreement << "\n";
  }
  for (const auto& t : r.trained) {
    out << "trained " << t.name << ": " << t.steps << " steps, "
        << (t.exact ? "exact" : "NOT exact") << " on its domain\n";
  }
  if (r.neural && r.neural_checked > 0) {
    out << "neural: " << r.neural_agreed << " of " << r.neural_checked
        << " random lists agree with " << r.function << "()\n";
    if (!r.first_neural_disagreement.empty())
      out << "  first disagreement: " << r.first_neural_disagreement << "\n";
  }
  return out.str();
}

}  // namespace engram::synth
