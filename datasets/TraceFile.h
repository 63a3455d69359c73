#pragma once
/// \file
/// Training data: generation of reference traces and their file format.
///
/// The file is JSON Lines. Line 1 is a header,
///   {"format":"engram-traces","version":1,"task":"addition","count":640,"min_len":1,...}
/// and each further line one trace,
///   {"input":"25+17","output":"42","invocations":[[program,a1,a2,a3,[step,...]],...]}
/// where a step is the flat array [observation..., end, callee, c1, c2, c3]. Invocations are in
/// pre-order (see Trace). Reading validates every field against the task, so a malformed or
/// truncated file is a FormatError naming the line, never garbage in training.
///
/// \code
///   auto data = engram::datasets::generate_traces(task, {1, 20, 32, 1});
///   engram::datasets::write_trace_file("add.jsonl", data);
///   auto again = engram::datasets::read_trace_file("add.jsonl");
/// \endcode

#include "datasets/Task.h"

#include <cstdint>
#include <string>
#include <vector>

namespace engram::datasets {

struct GenerateOptions {
  int min_length = 1;
  int max_length = 20;
  int per_length = 32;
  std::uint64_t seed = 1;
  /// When positive, this many traces in all instead of `per_length` each, spread as evenly as
  /// whole numbers allow over the lengths (the extra ones to evenly spaced lengths). A multiple of
  /// the number of lengths draws the same traces as the matching `per_length`.
  int traces = 0;
};

/// How many traces each length gets under `options`, shortest first.
std::vector<int> traces_per_length(const GenerateOptions& options);

struct TraceSet {
  std::string task;
  GenerateOptions options;
  std::vector<Trace> traces;
};

/// `per_length` reference traces for every length in [min_length, max_length], deterministic in
/// seed.
/// The data sizes a user who gives none gets for `task`: lengths from the task's shortest to 20
/// (10 for the list tasks), 32 traces per length for addition and the list tasks, 64 otherwise.
GenerateOptions default_generate_options(const Task& task);

/// Throws InvalidOption naming GenerateOptions' fields ("min_length", "max_length",
/// "per_length", "traces") for sizes the task cannot generate.
TraceSet generate_traces(const Task& task, const GenerateOptions& options);

/// Writes atomically (temporary file, then rename).
void write_trace_file(const std::string& path, const TraceSet& set);

/// Reads and validates; throws std::runtime_error if missing, FormatError if malformed.
TraceSet read_trace_file(const std::string& path);

}  // namespace engram::datasets
