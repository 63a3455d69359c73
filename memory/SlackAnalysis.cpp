#include "memory/SlackAnalysis.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::memory {
namespace {

/// One operation of the step: it takes `duration_ms` once all its predecessors have finished.
struct Operation {
  double duration_ms = 0;
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, Operation>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

/// Throws unless `value` is a finite, non-negative duration; `what` names it in the message.
void check_duration(double value, const std::string& what) {
  if (std::isfinite(value) && value >= 0) return;
  std::ostringstream message;
  message << "schedule_swap_ins: " << what << " is " << value
          << "; durations must be finite and non-negative";
  throw std::invalid_argument(message.str());
}

/// Throws unless every per-unit vector has one entry per unit and every duration is valid.
void validate(const StepTimeline& t) {
  const std::size_t n = t.forward_ms.size();
  const auto check_length = [n](const std::vector<double>& v, const char* name) {
    if (v.size() == n) return;
    std::ostringstream message;
    message << "schedule_swap_ins: " << name << " has " << v.size()
            << " entries but forward_ms has " << n << " (one per unit)";
    throw std::invalid_argument(message.str());
  };
  check_length(t.backward_ms, "backward_ms");
  check_length(t.swap_out_ms, "swap_out_ms");
  check_length(t.swap_in_ms, "swap_in_ms");

  check_duration(t.head_ms, "head_ms");
  const auto check_all = [](const std::vector<double>& v, const char* name) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      check_duration(v[i], std::string(name) + "[" + std::to_string(i) + "]");
    }
  };
  check_all(t.forward_ms, "forward_ms");
  check_all(t.backward_ms, "backward_ms");
  check_all(t.swap_out_ms, "swap_out_ms");
  check_all(t.swap_in_ms, "swap_in_ms");
}

/// The dataflow graph of the step (see SlackAnalysis.h) and where each operation sits in it.
struct StepGraph {
  Graph graph;
  std::vector<Vertex> forward, backward;  // F_i and B_i, per unit
  Vertex head = 0;                        // H
  std::vector<int> swapped;               // the swapped units, increasing
  std::vector<Vertex> swap_out, swap_in;  // SO_i and SI_i, per unit (valid if swapped)
};

StepGraph build_graph(const StepTimeline& t) {
  const int n = static_cast<int>(t.forward_ms.size());
  StepGraph s;
  Graph& g = s.graph;
  const auto add = [&g](double duration_ms) {
    return boost::add_vertex(Operation{duration_ms}, g);
  };

  // The compute chain F_0 -> ... -> F_{n-1} -> H -> B_{n-1} -> ... -> B_0.
  s.forward.resize(n);
  s.backward.resize(n);
  for (int i = 0; i < n; ++i) s.forward[i] = add(t.forward_ms[i]);
  s.head = add(t.head_ms);
  for (int i = 0; i < n; ++i) s.backward[i] = add(t.backward_ms[i]);
  for (int i = 0; i + 1 < n; ++i) boost::add_edge(s.forward[i], s.forward[i + 1], g);
  if (n > 0) {
    boost::add_edge(s.forward[n - 1], s.head, g);
    boost::add_edge(s.head, s.backward[n - 1], g);
  }
  for (int i = n - 1; i > 0; --i) boost::add_edge(s.backward[i], s.backward[i - 1], g);

  // Per swapped unit: F_i -> SO_i -> SI_i -> B_i, and SO_i -> F_{i+1} (H after the last unit):
  // the forward goes on once the unit's tensors are written.
  s.swap_out.resize(n);
  s.swap_in.resize(n);
  for (int i = 0; i < n; ++i) {
    if (t.swap_out_ms[i] <= 0 && t.swap_in_ms[i] <= 0) continue;
    s.swapped.push_back(i);
    s.swap_out[i] = add(t.swap_out_ms[i]);
    s.swap_in[i] = add(t.swap_in_ms[i]);
    boost::add_edge(s.forward[i], s.swap_out[i], g);
    boost::add_edge(s.swap_out[i], i + 1 < n ? s.forward[i + 1] : s.head, g);
    boost::add_edge(s.swap_out[i], s.swap_in[i], g);
    boost::add_edge(s.swap_in[i], s.backward[i], g);
  }

  // The single transfer channel: swap-outs in forward order, then swap-ins in backward order.
  const std::vector<int>& sw = s.swapped;
  for (std::size_t k = 0; k + 1 < sw.size(); ++k) {
    boost::add_edge(s.swap_out[sw[k]], s.swap_out[sw[k + 1]], g);
    boost::add_edge(s.swap_in[sw[k + 1]], s.swap_in[sw[k]], g);
  }
  // The last SO -> the first SI: both belong to the highest swapped unit, whose SO_i -> SI_i edge
  // above already says so.
  return s;
}

}  // namespace

SwapInSchedule schedule_swap_ins(const StepTimeline& timeline, SwapInTiming timing) {
  validate(timeline);
  const int n = static_cast<int>(timeline.forward_ms.size());
  const StepGraph s = build_graph(timeline);
  const Graph& g = s.graph;
  const auto duration = [&g](Vertex v) { return g[v].duration_ms; };

  // topological_sort writes the vertices in reverse topological order.
  std::vector<Vertex> reverse_order;
  reverse_order.reserve(boost::num_vertices(g));
  boost::topological_sort(g, std::back_inserter(reverse_order));

  // Forward pass in topological order: a vertex starts once its last predecessor finishes.
  std::vector<double> es(boost::num_vertices(g), 0.0);
  for (auto it = reverse_order.rbegin(); it != reverse_order.rend(); ++it) {
    const double finish = es[*it] + duration(*it);
    for (const auto& e : boost::make_iterator_range(boost::out_edges(*it, g))) {
      const Vertex next = boost::target(e, g);
      es[next] = std::max(es[next], finish);
    }
  }

  // The last vertex is B_0 (H when there are no units): every other vertex leads to it.
  const Vertex last = n > 0 ? s.backward[0] : s.head;
  SwapInSchedule out;
  out.makespan_ms = es[last] + duration(last);

  // Reverse pass: a vertex must start early enough for each successor to start at its latest.
  std::vector<double> ls(boost::num_vertices(g), 0.0);
  for (const Vertex v : reverse_order) {
    double latest_finish = out.makespan_ms;
    for (const auto& e : boost::make_iterator_range(boost::out_edges(v, g))) {
      latest_finish = std::min(latest_finish, ls[boost::target(e, g)]);
    }
    ls[v] = latest_finish - duration(v);
  }

  // Times are sums of doubles taken in different orders; compare them with a small tolerance so
  // that a transfer that fits exactly is not judged late by a rounding error.
  const double tolerance = 1e-9 * std::max(1.0, out.makespan_ms);
  const auto trigger_time = [&](int t) { return t == n ? es[s.head] : es[s.backward[t]]; };

  out.trigger.assign(n, -1);
  out.prefetch_at.assign(n + 1, {});
  out.earliest_start_ms.assign(n, 0.0);
  out.latest_start_ms.assign(n, 0.0);
  out.slack_ms.assign(n, 0.0);
  out.predicted_stall_ms.assign(n, 0.0);
  out.forward_wait_ms.assign(n, 0.0);

  // Triggers, latest first: trigger times grow as t goes from n down to i, so the latest trigger
  // that is early enough is the smallest t in [i, n] with trigger_time(t) <= LS(SI_i).
  for (const int i : s.swapped) {
    // What follows unit i's forward starts when both it and the unit's swap-out are done.
    const Vertex next = i + 1 < n ? s.forward[i + 1] : s.head;
    const double wait = es[next] - (es[s.forward[i]] + duration(s.forward[i]));
    if (wait > tolerance) out.forward_wait_ms[i] = wait;
    const Vertex si = s.swap_in[i];
    out.earliest_start_ms[i] = es[si];
    out.latest_start_ms[i] = ls[si];
    out.slack_ms[i] = ls[si] - es[si];
    int chosen = n;  // the fallback when even the end of forward is too late
    for (int t = i; t <= n; ++t) {
      if (trigger_time(t) <= ls[si] + tolerance) {
        chosen = t;
        break;
      }
    }
    out.trigger[i] = timing == SwapInTiming::slack ? chosen : i;
  }

  // The simulation: the channel first come first served, the compute chain as in the graph but
  // with each B_i waiting for its swap-in. The forward, each unit waiting for its swap-out, is
  // the graph's, so each swap-out finishes at its graph time ES(SO_i) + duration. Trigger n
  // fires when forward ends (ES(H)); trigger k when B_k is ready to begin (before it waits).
  // prefetch_at lists each trigger's units in decreasing index, the order they are queued in.
  for (auto it = s.swapped.rbegin(); it != s.swapped.rend(); ++it) {
    out.prefetch_at[out.trigger[*it]].push_back(*it);
  }
  double channel_free = 0;
  if (!s.swapped.empty()) {
    const Vertex last_out = s.swap_out[s.swapped.back()];
    channel_free = es[last_out] + duration(last_out);
  }
  std::vector<double> swap_in_finish(n, 0.0);
  const auto fire = [&](int t, double now) {
    for (const int i : out.prefetch_at[t]) {
      const Vertex so = s.swap_out[i];
      const double start = std::max({now, channel_free, es[so] + duration(so)});
      channel_free = start + duration(s.swap_in[i]);
      swap_in_finish[i] = channel_free;
    }
  };
  if (n > 0) fire(n, es[s.head]);
  double ready = es[s.head] + duration(s.head);  // when the next backward can begin
  for (int k = n - 1; k >= 0; --k) {
    fire(k, ready);
    double begin = ready;
    if (out.trigger[k] >= 0) {
      const double wait = swap_in_finish[k] - ready;
      if (wait > tolerance) {
        out.predicted_stall_ms[k] = wait;
        begin = swap_in_finish[k];
      }
    }
    ready = begin + duration(s.backward[k]);
  }
  if (timing == SwapInTiming::on_demand) out.prefetch_at.assign(n + 1, {});
  return out;
}

const char* timing_name(SwapInTiming timing) {
  switch (timing) {
    case SwapInTiming::slack:
      return "slack";
    case SwapInTiming::just_in_time:
      return "just_in_time";
    case SwapInTiming::on_demand:
      return "on_demand";
  }
  return "?";
}

}  // namespace engram::memory
