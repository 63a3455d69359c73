#pragma once
/// \file
/// Programs from source (US11836613B2's first half): trace a Python function on sample lists,
/// recover the high-order program it computes (synth/Recognizer.h), and bind each element
/// computation to a primitive: a library family where the code's table equals one, or a new
/// table family (datasets::register_table_family) named after the function and line.
///
/// \code
///   engram::synth::SynthOptions o;
///   o.source = "f.py";  o.function = "evens_squared";  o.k = 10;
///   auto report = engram::synth::synthesize(o);
///   report.expression;             // "map(square, filter(even, xs))"
///   report.agreed == report.checked;
/// \endcode
///
/// Errors: UsageError (exit 2) for code outside the supported subset, naming the construct and
/// line; std::runtime_error (exit 1) when the function raises on a sample input, returns
/// something outside the domain, or python3 cannot run. No torch in this header.

#include <cstdint>
#include <string>
#include <vector>

namespace engram::synth {

/// Bounds on SynthOptions' counts, far above any use, so that a mistyped count is refused rather
/// than exhausting memory (every sample and check list is held whole, in Python and here).
constexpr int kMaxSamples = 100000;
constexpr int kMaxChecks = 1000000;
constexpr int kMaxCheckLength = 100000;
constexpr long long kMaxCheckElements = 10000000;  ///< checks x check_length

struct SynthOptions {
  std::string source;    ///< the Python file
  std::string function;  ///< the function in it: f(xs) or f(xs, ys)
  int k = 10;            ///< the domain 0..K-1
  int samples = 40;      ///< random sample lists traced (beside lists holding every value)
  int max_sample_length = 12;
  int checks = 1000;       ///< random lists the recovered program is checked on
  int check_length = 100;  ///< their length
  std::uint64_t seed = 1;
  std::string python = "python3";
  double timeout_seconds = 120;  ///< for each run of python3
  /// The neural check (both or neither): the folder of trained high-order programs (map.pt,
  /// filter.pt, ...) and the primitive library. A new primitive the library lacks (or holds
  /// with another table) is trained into it first, as `engram train primitives --add` does:
  /// the library's other networks and the programs stay as they are.
  std::string models_dir;
  std::string primitives;
  int threads = 1;
  /// What a recogniser of the source alone read the function's loop as (`--recognizer tbcnn`:
  /// the localized TBCNN's class of its loop, cli/commands/Synth.cpp). Given, the traced
  /// program's outermost stage must be that high-order function, or synthesis stops
  /// (std::runtime_error) naming both; empty `stage`: the trace alone decides.
  struct SourceClass {
    std::string recognizer;  ///< "tbcnn"
    std::string stage;       ///< map, filter, fold, scan, zipwith
    double probability = 0;  ///< the recogniser's confidence in it
  } source_class;
};

/// One element computation of the recovered program.
struct RecoveredPrimitive {
  std::string stage;   ///< map, filter, fold, scan, zipwith
  std::string where;   ///< "line 7"
  std::string kind;    ///< unary, predicate, binary
  std::string name;    ///< the primitive as the expression names it: "square", "gt(5)", "f_7"
  bool known = false;  ///< a library family (else a new table family)
  int covered = 0;     ///< domain entries the traces' paths decide
  int entries = 0;     ///< K, or K*K
  std::string code;    ///< the recorded computation, e.g. "mod(mul(x0, x0), 10)"
  std::vector<int> table;
};

struct SynthReport {
  std::string function;
  int k = 0;
  std::string shape;                       ///< e.g. "fold(map(xs))"
  SynthOptions::SourceClass source_class;  ///< as given (agreed with the trace)
  std::string expression;                  ///< the grammar of `engram run --program`
  std::vector<RecoveredPrimitive> primitives;
  int sample_runs = 0;
  /// The recovered program with the exact primitives against the function itself.
  int checked = 0, agreed = 0;
  std::string first_disagreement;  ///< input, expected, got
  /// With models and primitives: the neural program (trained programs, primitive networks) on
  /// the same lists, and the primitives trained for it.
  bool neural = false;
  int neural_checked = 0, neural_agreed = 0;
  std::string first_neural_disagreement;
  struct Trained {
    std::string name;
    long steps = 0;
    bool exact = false;
    double seconds = 0;
  };
  std::vector<Trained> trained;
};

/// InvalidOption for options out of range, before any file is read or process started (the
/// command line checks them before a --recognizer tbcnn model is loaded).
void validate(const SynthOptions& options);

/// Traces, recovers and checks (validate() first); registers the new table families in this
/// process.
SynthReport synthesize(const SynthOptions& options);

/// {"function", "k", "expression", "shape", "primitives": [...], "check": {...}}
std::string synth_json(const SynthReport& report);
/// A few lines for people.
std::string synth_text(const SynthReport& report);

/// The tracer's source (synth/python/engram_tracer.py, compiled in).
const char* tracer_source();

}  // namespace engram::synth
