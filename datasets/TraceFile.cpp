#include "datasets/TraceFile.h"

#include "common/AtomicFile.h"
#include "common/FileChecks.h"
#include "datasets/ListTask.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace engram::datasets {
namespace {

using nlohmann::json;
constexpr const char* kFormat = "engram-traces";
constexpr int kVersion = 1;

json trace_to_json(const Trace& trace) {
  json invocations = json::array();
  for (const auto& inv : trace.invocations) {
    json steps = json::array();
    for (const auto& step : inv.steps) {
      json s = json::array();
      for (int o : step.observation) s.push_back(o);
      s.push_back(step.end ? 1 : 0);
      s.push_back(step.end ? -1 : step.callee);
      for (int a : step.callee_args) s.push_back(step.end ? 0 : a);
      steps.push_back(std::move(s));
    }
    invocations.push_back(json::array({inv.program, inv.args[0], inv.args[1], inv.args[2], steps}));
  }
  return json{{"input", trace.input}, {"output", trace.output}, {"invocations", invocations}};
}

class Validator {
 public:
  Validator(const Task& task, std::string where) : task_(task), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& what) const { throw FormatError(where_ + ": " + what); }

  int integer(const json& j, int lo, int hi, const char* what) const {
    if (!j.is_number_integer()) fail(std::string(what) + " is not an integer");
    const auto v = j.get<long long>();
    if (v < lo || v >= hi) {
      fail(std::string(what) + " " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " +
           std::to_string(hi) + ")");
    }
    return static_cast<int>(v);
  }

  Trace trace(const json& j) const {
    if (!j.is_object()) fail("a trace must be a JSON object");
    for (const char* key : {"input", "output", "invocations"}) {
      if (!j.contains(key)) fail(std::string("trace has no '") + key + "'");
    }
    if (!j["input"].is_string() || !j["output"].is_string())
      fail("input and output must be strings");
    Trace t;
    t.input = j["input"].get<std::string>();
    t.output = j["output"].get<std::string>();
    // A problem the task cannot pose is the file's fault (exit 1, its line named), not a usage
    // error: e.g. list traces made with another --k than the task's default domain.
    try {
      task_.make_environment(t.input);
    } catch (const InputError& e) {
      fail("input '" + t.input + "': " + e.what() +
           " (made with another --k? training reads the default domain's traces; the programs "
           "learned work at any K)");
    }
    const auto& invs = j["invocations"];
    if (!invs.is_array() || invs.empty()) fail("'invocations' must be a non-empty array");
    const auto sizes = task_.observation_sizes();
    const int programs = static_cast<int>(task_.programs().size());
    size_t subprogram_calls = 0;
    for (const auto& ji : invs) {
      if (!ji.is_array() || ji.size() != 5 || !ji[4].is_array()) {
        fail("an invocation must be [program, a1, a2, a3, steps]");
      }
      Invocation inv;
      inv.program = integer(ji[0], 0, programs, "program");
      if (task_.programs()[inv.program].is_act) fail("an ACT cannot be invoked as a subprogram");
      for (int a = 0; a < kNumArgs; ++a)
        inv.args[a] = integer(ji[1 + a], 0, task_.arg_size(), "argument");
      if (ji[4].empty()) fail("an invocation has no steps");
      for (const auto& js : ji[4]) {
        if (!js.is_array() || js.size() != sizes.size() + 5)
          fail("a step has the wrong number of fields");
        Step step;
        for (size_t k = 0; k < sizes.size(); ++k) {
          step.observation.push_back(integer(js[k], 0, sizes[k], "observation value"));
        }
        step.end = integer(js[sizes.size()], 0, 2, "end flag") == 1;
        if (!step.end) {
          step.callee = integer(js[sizes.size() + 1], 0, programs, "callee");
          for (int a = 0; a < kNumArgs; ++a) {
            step.callee_args[a] =
                integer(js[sizes.size() + 2 + a], 0, task_.arg_size(), "argument");
          }
          if (!task_.programs()[step.callee].is_act) ++subprogram_calls;
        }
        inv.steps.push_back(std::move(step));
      }
      if (!inv.steps.back().end) fail("an invocation does not end with a return step");
      t.invocations.push_back(std::move(inv));
    }
    if (subprogram_calls + 1 != t.invocations.size()) {
      fail("the number of invocations does not match the subprogram calls");
    }
    return t;
  }

 private:
  const Task& task_;
  std::string where_;
};

}  // namespace

GenerateOptions default_generate_options(const Task& task) {
  const bool lists = is_higher_order(task.name());
  GenerateOptions options;
  options.min_length = task.min_length();
  options.max_length = lists ? 10 : 20;
  options.per_length = task.name() == "addition" || lists ? 32 : 64;
  return options;
}

std::vector<int> traces_per_length(const GenerateOptions& options) {
  const long lengths = std::max(0, options.max_length - options.min_length + 1);
  std::vector<int> counts(static_cast<std::size_t>(lengths), options.per_length);
  if (options.traces > 0) {
    // Length i gets floor((i+1)N/L) - floor(iN/L): N in all, no two lengths more than one apart.
    for (long i = 0; i < lengths; ++i) {
      counts[static_cast<std::size_t>(i)] =
          static_cast<int>((i + 1) * options.traces / lengths - i * options.traces / lengths);
    }
  }
  return counts;
}

TraceSet generate_traces(const Task& task, const GenerateOptions& options) {
  if (options.min_length < task.min_length()) {
    throw InvalidOption("min_length", "must be at least " + std::to_string(task.min_length()) +
                                          " for " + task.name());
  }
  if (options.max_length < options.min_length)
    throw InvalidOption("max_length", "is below the shortest length");
  task.check_length_option(options.max_length, "max_length");
  if (options.per_length < 1) throw InvalidOption("per_length", "must be at least 1");
  if (options.traces < 0) throw InvalidOption("traces", "must be at least 1");
  // Every trace is held in memory until the file is written: far more than any training reads
  // ran the machine out of memory (the OOM killer, not an error) instead of being refused.
  constexpr long long kMaxTraces = 10'000'000;
  const long long lengths = options.max_length - options.min_length + 1;
  const long long total = options.traces > 0
                              ? static_cast<long long>(options.traces)
                              : static_cast<long long>(options.per_length) * lengths;
  if (total > kMaxTraces)
    throw InvalidOption(options.traces > 0 ? "traces" : "per_length",
                        "asks for " + std::to_string(total) +
                            " traces in all: at most 1e7, which are held in memory until the "
                            "file is written");
  TraceSet set;
  set.task = task.name();
  set.options = options;
  const std::vector<int> counts = traces_per_length(options);
  std::mt19937_64 rng(options.seed);
  for (int len = options.min_length; len <= options.max_length; ++len) {
    for (int i = 0; i < counts[static_cast<std::size_t>(len - options.min_length)]; ++i) {
      set.traces.push_back(task.teach(task.random_input(len, rng)));
    }
  }
  return set;
}

void write_trace_file(const std::string& path, const TraceSet& set) {
  AtomicFile file(path);
  json header{{"format", kFormat},
              {"version", kVersion},
              {"task", set.task},
              {"count", set.traces.size()},
              {"min_len", set.options.min_length},
              {"max_len", set.options.max_length},
              {"seed", set.options.seed}};
  // One of the two counts: the one the traces were drawn by.
  if (set.options.traces > 0) {
    header["traces"] = set.options.traces;
  } else {
    header["per_length"] = set.options.per_length;
  }
  file.stream() << header.dump() << '\n';
  for (const auto& trace : set.traces) file.stream() << trace_to_json(trace).dump() << '\n';
  file.commit();
}

TraceSet read_trace_file(const std::string& path) {
  refuse_folder(path, "data file");
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read data file '" + path + "': " + std::strerror(errno));
  std::string line;
  auto parse_line = [&](int number) {
    try {
      return json::parse(line);
    } catch (const json::exception&) {
      throw FormatError(path + ":" + std::to_string(number) + ": not valid JSON");
    }
  };
  if (!std::getline(in, line))
    throw FormatError(path + ": empty file, expected an engram trace file");
  const json header = parse_line(1);
  if (!header.is_object() || header.value("format", "") != kFormat) {
    throw FormatError(path + ": not an engram trace file (make one with `engram data gen`)");
  }
  // Header fields of the wrong type are a FormatError like any other malformed content.
  auto field = [&](const char* key, auto fallback) {
    try {
      return header.value(key, fallback);
    } catch (const json::exception&) {
      throw FormatError(path + ": header field '" + key + "' has the wrong type");
    }
  };
  if (field("version", 0) != kVersion) {
    throw FormatError(path + ": unsupported trace file version " +
                      (header.contains("version") ? header.at("version").dump() : "(none)"));
  }
  TraceSet set;
  set.task = field("task", "");
  const Task* task = nullptr;
  try {
    task = &task_by_name(set.task);
  } catch (const InputError& e) {
    throw FormatError(path + ": " + e.what());
  }
  set.options.min_length = field("min_len", 0);
  set.options.max_length = field("max_len", 0);
  set.options.per_length = field("per_length", 0);
  set.options.traces = field("traces", 0);
  set.options.seed = field("seed", std::uint64_t{0});
  const auto count = field("count", std::size_t{0});
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const Validator validator(*task, path + ":" + std::to_string(number));
    set.traces.push_back(validator.trace(parse_line(number)));
  }
  if (set.traces.size() != count) {
    throw FormatError(path + ": header promises " + std::to_string(count) + " traces, file has " +
                      std::to_string(set.traces.size()) + " (truncated?)");
  }
  if (set.traces.empty()) throw FormatError(path + ": the file holds no traces");
  return set;
}

}  // namespace engram::datasets
