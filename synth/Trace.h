#pragma once
/// \file
/// The trace that synth/python/engram_tracer.py writes (its docstring is the format's
/// reference): per run on one sample input, the dataflow graph of the values computed from the
/// input lists, the branches taken on them, the loop-header snapshots (accumulators), the lists
/// the code materialised, and the result.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace engram::synth {

/// A value: a node of the graph, or a constant the code wrote.
struct Ref {
  bool is_const = false;
  std::int64_t value = 0;  ///< the constant
  int node = -1;
  bool operator==(const Ref& o) const {
    return is_const == o.is_const && (is_const ? value == o.value : node == o.node);
  }
  bool operator!=(const Ref& o) const { return !(*this == o); }
};

struct Node {
  int id = 0;
  std::string op;  ///< "in" for an element of an input list
  std::vector<Ref> args;
  int list = -1, position = -1;  ///< "in": which list (0 xs, 1 ys) and where
  std::int64_t value = 0;
  int line = 0;
};

struct Branch {
  int seq = 0;
  int node = 0;
  bool outcome = false;
  int line = 0;
};

/// One hit of a loop header (or a frame's return: loop "exit"): the ints the frame held.
struct Snapshot {
  int seq = 0;
  int frame = 0;
  std::string loop;
  std::map<std::string, Ref> values;
};

struct Run {
  std::vector<std::vector<int>> input;
  std::map<int, Node> nodes;
  std::vector<Branch> branches;
  std::vector<Snapshot> snapshots;
  std::vector<std::vector<Ref>> lists;  ///< materialised lists
  bool list_result = false;
  std::vector<Ref> result_list;
  Ref result_value;
};

struct Trace {
  std::string function;
  int k = 0;
  int arity = 1;
  std::vector<Run> runs;
};

/// Parses the tracer's JSON; throws FormatError (common/Errors.h) naming what is malformed.
Trace parse_trace(const std::string& json_text);

}  // namespace engram::synth
