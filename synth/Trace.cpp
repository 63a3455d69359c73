#include "synth/Trace.h"

#include "common/Errors.h"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace engram::synth {
namespace {

using json = nlohmann::json;

/// A 64-bit integer of the trace: one past that range (read as unsigned, or as a float) would
/// wrap or be an undefined conversion; the tracer refuses such values where they are computed.
std::int64_t int64_of(const json& j) {
  if (!j.is_number_integer() ||
      (j.is_number_unsigned() &&
       j.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
    throw FormatError("trace: " + j.dump() + " is not a 64-bit integer");
  return j.get<std::int64_t>();
}

Ref parse_ref(const json& j) {
  Ref r;
  if (j.is_number_integer()) {
    r.node = j.get<int>();
  } else if (j.is_array() && j.size() == 2 && j[0] == "c" && j[1].is_number()) {
    r.is_const = true;
    r.value = int64_of(j[1]);
  } else {
    throw FormatError("trace: a value reference is neither a node id nor [\"c\", int]: " +
                      j.dump());
  }
  return r;
}

Run parse_run(const json& j) {
  Run run;
  for (const auto& list : j.at("input")) run.input.push_back(list.get<std::vector<int>>());
  for (const auto& n : j.at("nodes")) {
    Node node;
    node.id = n.at(0).get<int>();
    node.op = n.at(1).get<std::string>();
    if (node.op == "in") {
      node.list = n.at(2).at(0).get<int>();
      node.position = n.at(2).at(1).get<int>();
    } else {
      for (const auto& a : n.at(2)) node.args.push_back(parse_ref(a));
    }
    node.value = int64_of(n.at(3));
    node.line = n.at(4).get<int>();
    run.nodes[node.id] = node;
  }
  for (const auto& b : j.at("branches"))
    run.branches.push_back(
        {b.at(0).get<int>(), b.at(1).get<int>(), b.at(2).get<int>() != 0, b.at(3).get<int>()});
  for (const auto& s : j.at("iters")) {
    Snapshot snap;
    snap.seq = s.at(0).get<int>();
    snap.frame = s.at(1).get<int>();
    snap.loop = s.at(2).get<std::string>();
    for (const auto& [name, value] : s.at(3).items()) {
      if (!value.is_object()) snap.values[name] = parse_ref(value);  // lists: only lengths
    }
    run.snapshots.push_back(snap);
  }
  for (const auto& l : j.at("lists")) {
    std::vector<Ref> refs;
    for (const auto& r : l.at(1)) refs.push_back(parse_ref(r));
    run.lists.push_back(refs);
  }
  const auto& result = j.at("result");
  if (result.contains("list")) {
    run.list_result = true;
    for (const auto& r : result.at("list")) run.result_list.push_back(parse_ref(r));
  } else {
    run.result_value = parse_ref(result.at("value"));
  }
  for (const auto& [id, node] : run.nodes) {
    for (const auto& a : node.args) {
      if (!a.is_const && (a.node >= id || run.nodes.count(a.node) == 0))
        throw FormatError("trace: node " + std::to_string(id) + " uses a node it cannot see");
    }
  }
  return run;
}

}  // namespace

Trace parse_trace(const std::string& json_text) {
  try {
    const json j = json::parse(json_text);
    Trace t;
    t.function = j.at("function").get<std::string>();
    t.k = j.at("k").get<int>();
    t.arity = j.at("arity").get<int>();
    for (const auto& r : j.at("runs")) t.runs.push_back(parse_run(r));
    return t;
  } catch (const json::exception& e) {
    throw FormatError(std::string("trace: malformed: ") + e.what());
  }
}

}  // namespace engram::synth
