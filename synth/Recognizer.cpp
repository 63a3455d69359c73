#include "synth/Recognizer.h"

#include "common/Errors.h"
#include "datasets/ListTask.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace engram::synth {
namespace {

std::string at_line(int line) { return line > 0 ? "line " + std::to_string(line) : "the function"; }

[[noreturn]] void unsupported(int line, const std::string& what) {
  throw InputError(at_line(line) + ": " + what);
}

/// A variable bound before a loop and rebound in it: its value at each hit of the loop header.
struct Chain {
  std::vector<Ref> values;  ///< a_0 (before the first iteration) .. a_n
  std::vector<int> seqs;    ///< the hits' sequence numbers
  std::string var;
  int frame = 0;
  /// Runs inside an iteration of another frame's loop (max(acc, x) in a loop): part of that
  /// loop's update, never a stage of its own.
  bool inner = false;
};

struct ChainInfo {
  Template fn;
  std::vector<int> elements;  ///< the sequence the accumulation runs over
  bool identity_init = false;
  std::int64_t init = 0;
};

bool ring_only(const Expr& e) {
  if (e.kind != Expr::Kind::kOp) return true;
  static const std::set<std::string> ring{"add", "sub", "mul", "neg"};
  if (e.op == "pow")
    return e.args.size() == 2 && e.args[1].kind == Expr::Kind::kConst && e.args[1].value >= 0 &&
           ring_only(e.args[0]);
  if (ring.count(e.op) == 0) return false;
  for (const auto& a : e.args)
    if (!ring_only(a)) return false;
  return true;
}

class RunRecognizer {
 public:
  RunRecognizer(const Run& run, int k) : run_(run), k_(k) {
    for (const auto& [id, n] : run.nodes)
      if (n.op == "in") stops_.insert(id);
    find_chains();
  }

  Stage recognize() {
    if (run_.list_result) return sequence(run_.result_list, false);
    const Ref& r = run_.result_value;
    if (r.is_const) return {};
    const Node& n = node(r.node);
    if (const Chain* c = chain_ending_at(r.node)) return fold(*c, false);
    if (const auto operand = reduced_operand(r)) {
      if (const Chain* c = chain_ending_at(*operand)) return fold(*c, true);
    }
    // From one element (a fold over a list that one element reached) a run shows no iteration.
    if (sources(r.node).size() <= 1) return {};

    unsupported(n.line,
                "the result is not accumulated over a list (no loop's accumulator, "
                "sum, max, min or reduce ends with it)");
  }

 private:
  const Node& node(int id) const { return run_.nodes.at(id); }

  /// The node `r` is `n % K` of, if it is one.
  std::optional<int> reduced_operand(const Ref& r) const {
    if (r.is_const) return std::nullopt;
    const Node& n = node(r.node);
    if (n.op != "mod" || n.args.size() != 2 || n.args[0].is_const || !n.args[1].is_const ||
        n.args[1].value != k_)
      return std::nullopt;
    return n.args[0].node;
  }

  void find_chains() {
    std::map<std::pair<int, std::string>, std::vector<const Snapshot*>> hits;
    for (const auto& s : run_.snapshots)
      if (s.loop != "exit") hits[{s.frame, s.loop}].push_back(&s);
    for (const auto& [key, group] : hits) {
      if (group.size() < 2) continue;
      for (const auto& [name, first] : group.front()->values) {
        Chain c;
        c.var = name;
        c.frame = key.first;
        bool complete = true;
        for (const Snapshot* h : group) {
          auto it = h->values.find(name);
          if (it == h->values.end()) {
            complete = false;
            break;
          }
          c.values.push_back(it->second);
          c.seqs.push_back(h->seq);
        }
        // A variable that only held constants in this run (min(1, x) while no x is smaller) is
        // still an accumulator: a SCAN of it wrote those constants.
        if (!complete) continue;
        for (const auto& v : c.values)
          if (!v.is_const) stops_.insert(v.node);
        chains_.push_back(std::move(c));
      }
    }
    for (auto& c : chains_) {
      for (const auto& d : chains_) {
        if (d.frame != c.frame && d.seqs.front() < c.seqs.front() && c.seqs.back() < d.seqs.back())
          c.inner = true;
      }
    }
  }

  const Chain* chain_ending_at(int id) const {
    const Chain* best = nullptr;
    for (const auto& c : chains_) {
      if (!c.inner && !c.values.back().is_const && c.values.back().node == id &&
          (best == nullptr || c.values.size() > best->values.size()))
        best = &c;
    }
    return best;
  }

  /// The input elements and accumulator values `root` is computed from.
  std::set<int> sources(int root) const {
    std::set<int> out, seen;
    std::vector<int> stack{root};
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second) continue;
      if (stops_.count(id) != 0) {  // an input element or an accumulator value, the root too
        out.insert(id);
        continue;
      }
      for (const auto& a : node(id).args)
        if (!a.is_const) stack.push_back(a.node);
    }
    return out;
  }

  /// Whether `target` is among what `root` is computed from (not looking past inputs and other
  /// accumulator values).
  bool contains(int root, int target) const { return dag(root).count(target) != 0; }

  /// `root` and every node it is computed from, down to (and with) the stops.
  std::set<int> dag(int root) const {
    std::set<int> seen;
    std::vector<int> stack{root};
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second) continue;
      if (id != root && stops_.count(id) != 0) continue;
      for (const auto& a : node(id).args)
        if (!a.is_const) stack.push_back(a.node);
    }
    return seen;
  }

  /// The largest parts of `root` computed without `a`.
  std::set<int> free_of(int root, int a) const {
    std::set<int> out;
    std::function<void(int)> visit = [&](int id) {
      if (id == a) return;
      if (!contains(id, a)) {
        out.insert(id);
        return;
      }
      for (const auto& arg : node(id).args)
        if (!arg.is_const) visit(arg.node);
    };
    visit(root);
    return out;
  }

  /// One element among several candidate parts: the one node all are computed from that was
  /// computed last.
  std::optional<int> common_part(const std::set<int>& parts) const {
    if (parts.empty()) return std::nullopt;
    if (parts.size() == 1) return *parts.begin();
    std::optional<std::set<int>> common;
    for (int p : parts) {
      const auto d = dag(p);
      if (!common) {
        common = d;
      } else {
        std::set<int> both;
        std::set_intersection(common->begin(), common->end(), d.begin(), d.end(),
                              std::inserter(both, both.begin()));
        common = both;
      }
    }
    if (!common || common->empty()) return std::nullopt;
    return *common->rbegin();
  }

  /// A node's operation with comparisons in one orientation: Python asks a traced int for the
  /// reflected comparison when a plain int stands on the left (`9 > v` runs v.__lt__(9)), so
  /// gt(a, b) is written lt(b, a) and ge(a, b) le(b, a).
  static std::pair<std::string, std::vector<Ref>> canonical(const Node& n) {
    if ((n.op == "gt" || n.op == "ge") && n.args.size() == 2)
      return {n.op == "gt" ? "lt" : "le", {n.args[1], n.args[0]}};
    return {n.op, n.args};
  }

  /// The computation of `r` from the parameters (the root may itself be an accumulator's value).
  std::optional<Expr> build(const Ref& r, const std::map<int, int>& params,
                            bool root = true) const {
    if (r.is_const) return Expr::constant(r.value);
    if (auto it = params.find(r.node); it != params.end()) return Expr::parameter(it->second);
    const Node& n = node(r.node);
    if (n.op == "in" || (!root && stops_.count(r.node) != 0)) return std::nullopt;
    const auto [op, refs] = canonical(n);
    std::vector<Expr> args;
    for (const auto& a : refs) {
      auto e = build(a, params, false);
      if (!e) return std::nullopt;
      args.push_back(std::move(*e));
    }
    // == and != are symmetric: one order of their operands.
    if ((op == "eq" || op == "ne") && args.size() == 2 && args[1].text() < args[0].text())
      std::swap(args[0], args[1]);
    return Expr::operation(op, std::move(args));
  }

  Expr build_or_fail(const Ref& r, const std::map<int, int>& params, int line,
                     const std::string& what) const {
    auto e = build(r, params);
    if (!e) unsupported(line, what);
    return *e;
  }

  /// Matches `t` against the value `r`, binding the template's parameters.
  bool align(const Expr& t, const Ref& r, std::map<int, Ref>& bind) const {
    switch (t.kind) {
      case Expr::Kind::kParam: {
        auto it = bind.find(t.param);
        if (it != bind.end()) return it->second == r;
        bind[t.param] = r;
        return true;
      }
      case Expr::Kind::kConst:
        return r.is_const && r.value == t.value;
      case Expr::Kind::kOp: {
        if (r.is_const) return false;
        const auto [op, refs] = canonical(node(r.node));
        if (op != t.op || refs.size() != t.args.size()) return false;
        std::map<int, Ref> trial = bind;
        bool ok = true;
        for (std::size_t i = 0; i < t.args.size() && ok; ++i) ok = align(t.args[i], refs[i], trial);
        if (!ok && (op == "eq" || op == "ne") && refs.size() == 2) {
          trial = bind;
          ok = align(t.args[0], refs[1], trial) && align(t.args[1], refs[0], trial);
        }
        if (ok) bind = trial;
        return ok;
      }
    }
    return false;
  }

  std::vector<const Branch*> branches_between(int lo, int hi) const {
    std::vector<const Branch*> out;
    for (const auto& b : run_.branches)
      if (b.seq > lo && b.seq < hi && used_.count(b.seq) == 0) out.push_back(&b);
    return out;
  }

  int first_line(const Chain& c) const {
    for (const auto& b : run_.branches)
      if (b.seq > c.seqs.front() && b.line > 0) return b.line;
    for (const auto& v : c.values)
      if (!v.is_const && node(v.node).op != "in") return node(v.node).line;
    return 0;
  }

  /// nullopt: this run's iterations all start from a constant, so they show no update rule.
  std::optional<ChainInfo> accumulation(const Chain& c) {
    // Its elements may look like its values (the max of a rising list), and loops run inside
    // its iterations (max(acc, x) is one) are part of its update.
    for (const auto& inner : chains_)
      if (inner.seqs.front() >= c.seqs.front() && inner.seqs.back() <= c.seqs.back())
        consumed_.insert(&inner);
    ChainInfo info;
    const int line = first_line(c);
    info.fn = Template(2, at_line(line));
    std::vector<std::pair<std::size_t, int>> elements;  // (iteration, element)
    std::vector<std::size_t> pending;                   // iterations from a constant
    const bool starts_from_source =
        !c.values.front().is_const &&
        sources(c.values.front().node) == std::set<int>{c.values.front().node};
    for (std::size_t i = 1; i < c.values.size(); ++i) {
      const Ref a = c.values[i - 1], b = c.values[i];
      if (a.is_const) {
        pending.push_back(i);
        continue;
      }
      // The update's tests read the accumulator and an element; a test of the accumulator
      // alone in this stretch is a consumer's (a generator yields before its next iteration).
      std::vector<const Branch*> guards;
      for (const Branch* g : branches_between(c.seqs[i - 1], c.seqs[i]))
        if (contains(g->node, a.node) && sources(g->node) != std::set<int>{a.node})
          guards.push_back(g);
      int e = -1;
      if (b == a) {
        if (guards.empty()) continue;  // an iteration that left it alone
        auto part = common_part(free_of(guards.front()->node, a.node));
        if (!part) unsupported(line, "the test of the accumulator '" + c.var + "' uses no element");
        e = *part;
      } else if (!b.is_const && contains(b.node, a.node)) {
        std::set<int> parts = free_of(b.node, a.node);
        for (const Branch* g : guards) {
          auto more = free_of(g->node, a.node);
          parts.insert(more.begin(), more.end());
        }
        auto part = common_part(parts);
        if (!part)
          unsupported(node(b.node).line, "the update of '" + c.var +
                                             "' combines it with several "
                                             "elements at once, not one per iteration");
        e = *part;
        // Started from the first element as it is (reduce or accumulate without an initial
        // value): the later elements enter as they are too, and what is computed from them
        // belongs to the update, not to a MAP before it (which the first element skipped).
        if (starts_from_source && sources(e).size() == 1) e = *sources(e).begin();
      } else if (!b.is_const) {
        if (guards.empty())
          unsupported(node(b.node).line, "'" + c.var +
                                             "' is replaced, not combined with its "
                                             "previous value");
        e = b.node;
      } else {
        unsupported(line, "'" + c.var + "' is set to a constant inside its loop");
      }
      const std::map<int, int> params{{a.node, 0}, {e, 1}};
      const std::string more = "the update of '" + c.var +
                               "' depends on more than its previous "
                               "value and one element";
      Path p;
      for (const Branch* g : guards) {
        p.guards.push_back({build_or_fail({false, 0, g->node}, params, g->line, more), g->outcome});
        used_.insert(g->seq);
      }
      p.value = build_or_fail(b, params, line, more);
      info.fn.add(p);
      elements.emplace_back(i, e);
    }
    if (info.fn.paths().empty()) return std::nullopt;
    // Iterations from the initial constant: the constant sits where the accumulator does in
    // the later iterations' computation; align each with a path seen there (its tests may come
    // out the other way).
    const std::vector<Path> learned = info.fn.paths();
    for (std::size_t i : pending) {
      const Ref a = c.values[i - 1], b = c.values[i];
      const auto candidates = branches_between(c.seqs[i - 1], c.seqs[i]);
      bool done = false;
      for (const Path& p : learned) {
        std::map<int, Ref> bind;
        std::vector<const Branch*> matched;
        std::size_t next = 0;
        bool ok = true;
        for (const Guard& g : p.guards) {
          bool found = false;
          for (; next < candidates.size() && !found; ++next) {
            std::map<int, Ref> trial = bind;
            if (align(g.cond, {false, 0, candidates[next]->node}, trial)) {
              bind = trial;
              matched.push_back(candidates[next]);
              found = true;
            }
          }
          ok = ok && found;
        }
        if (!ok) continue;
        bool outcomes_as_seen = true;
        for (std::size_t g = 0; g < matched.size(); ++g)
          outcomes_as_seen = outcomes_as_seen && matched[g]->outcome == p.guards[g].outcome;
        Path taken;
        if (outcomes_as_seen) {
          if (!p.included || !align(p.value, b, bind)) continue;
          taken = p;
        } else {
          // Another branch than this path's: the value is the accumulator or the element.
          if (!bind.count(1) || bind[1].is_const) continue;
          if (b == a) {
            taken.value = Expr::parameter(0);
          } else if (b == bind[1]) {
            taken.value = Expr::parameter(1);
          } else {
            continue;
          }
          for (std::size_t g = 0; g < matched.size(); ++g)
            taken.guards.push_back({p.guards[g].cond, matched[g]->outcome});
        }
        if (!bind.count(0) || !bind.count(1) || bind[0] != a || bind[1].is_const) continue;
        for (const Branch* m : matched) used_.insert(m->seq);
        taken.seen = 1;
        info.fn.add(taken);
        elements.emplace_back(i, bind[1].node);
        done = true;
        break;
      }
      if (!done && b != a)
        unsupported(line, "the first update of '" + c.var + "' (from its initial value " +
                              std::to_string(a.value) + ") differs from the later ones");
    }
    std::sort(elements.begin(), elements.end());
    if (c.values.front().is_const) {
      info.init = c.values.front().value;
    } else {
      info.identity_init = true;
      info.elements.push_back(c.values.front().node);
    }
    for (const auto& [i, e] : elements) info.elements.push_back(e);
    // Its values are elements from here on (a max keeps one), no longer an accumulator's.
    for (const auto& v : c.values)
      if (!v.is_const && node(v.node).op != "in") stops_.erase(v.node);
    return info;
  }

  /// Whether reducing the result % K changes nothing that follows: no test, only + - *.
  static bool reducible(const Template& fn) {
    for (const auto& p : fn.paths())
      if (!p.guards.empty() || !ring_only(p.value)) return false;
    return true;
  }

  /// Whether the update already reduces % K an expression of + - * (acc = (acc + x*x) % K):
  /// then its element may be reduced first.
  bool reduces(const Template& fn) const {
    for (const auto& p : fn.paths()) {
      const Expr& v = p.value;
      if (!p.guards.empty() || v.kind != Expr::Kind::kOp || v.op != "mod" || v.args.size() != 2 ||
          v.args[1].kind != Expr::Kind::kConst || v.args[1].value != k_ || !ring_only(v.args[0]))
        return false;
    }
    return true;
  }

  void check_reducible(const Template& fn) const {
    if (!reducible(fn))
      unsupported(0, "'% " + std::to_string(k_) + "' applied after the accumulation at " +
                         fn.where() +
                         " cannot be moved into it (it tests values or uses "
                         "operations other than +, - and *); reduce each step instead");
  }

  /// The FOLD or SCAN of accumulator `c`; `t`: the list a SCAN must explain. Unknown where the
  /// run cannot show it.
  Stage accumulation_stage(Stage::Kind kind, const Chain& c, bool mod_k,
                           const std::vector<Ref>* t = nullptr) {
    auto found = accumulation(c);
    if (!found) return {};
    ChainInfo& info = *found;
    if (mod_k) check_reducible(info.fn);
    std::vector<Ref> elements;
    for (int e : info.elements) elements.push_back({false, 0, e});
    // Each value was its element (a running max of a rising list): this run cannot show the
    // scan; other runs do.
    if (t != nullptr && elements == *t) return {};
    Stage s;
    s.kind = kind;
    s.fn = info.fn;
    s.where = info.fn.where();
    s.init = info.init;
    s.identity_init = info.identity_init;
    s.reduce_mod_k = mod_k;
    s.inputs.push_back(sequence(elements, mod_k || reduces(info.fn)));
    return s;
  }

  Stage fold(const Chain& c, bool mod_k) {
    return accumulation_stage(Stage::Kind::kFold, c, mod_k);
  }

  std::optional<Stage> as_scan(const std::vector<Ref>& t) {
    for (const bool mod_k : {false, true}) {
      std::vector<Ref> values = t;
      if (mod_k) {
        for (auto& v : values) {
          const auto operand = reduced_operand(v);
          if (!operand) return std::nullopt;
          v = {false, 0, *operand};
        }
      }
      std::vector<const Chain*> by_length;
      for (const auto& c : chains_) by_length.push_back(&c);
      std::stable_sort(by_length.begin(), by_length.end(), [](const Chain* a, const Chain* b) {
        return a->values.size() > b->values.size();  // a loop's own before a helper's (max(a, b))
      });
      for (const Chain* chain : by_length) {
        const Chain& c = *chain;
        if (consumed_.count(&c) != 0 || c.inner) continue;
        const bool from_first = !c.values.front().is_const;
        std::vector<Ref> expected(c.values.begin() + (from_first ? 0 : 1), c.values.end());
        if (expected != values) continue;
        return accumulation_stage(Stage::Kind::kScan, c, mod_k, &t);
      }
    }
    return std::nullopt;
  }

  Stage sequence(const std::vector<Ref>& t, bool mod_k) {
    if (t.empty()) return {};
    // Each step explains a list by an earlier one or by tests it uses up; meeting the same list
    // again with no test used since explains nothing.
    std::vector<std::pair<bool, std::int64_t>> key{
        {false, static_cast<std::int64_t>(used_.size())}};
    for (const auto& v : t) key.emplace_back(v.is_const, v.is_const ? v.value : v.node);
    if (!in_progress_.insert(key).second)
      unsupported(0, "cannot tell which earlier list this list is computed from");
    struct Done {
      std::set<std::vector<std::pair<bool, std::int64_t>>>& set;
      std::vector<std::pair<bool, std::int64_t>> key;
      ~Done() { set.erase(key); }
    } done{in_progress_, key};
    if (auto scan = as_scan(t)) return *scan;
    // A list equal to an input is that input, unless tests on its elements remain to explain
    // (a FILTER that kept all, a ZIPWITH choosing from this list).
    std::set<int> members;
    for (const auto& v : t)
      if (!v.is_const) members.insert(v.node);
    bool tested = false;
    for (const auto& b : run_.branches) {
      if (used_.count(b.seq) != 0) continue;
      for (int id : sources(b.node)) tested = tested || members.count(id) != 0;
    }
    for (int list = 0; list < static_cast<int>(run_.input.size()) && !tested; ++list) {
      if (t.size() != run_.input[static_cast<std::size_t>(list)].size()) continue;
      bool same = true;
      for (std::size_t j = 0; j < t.size() && same; ++j) {
        same = !t[j].is_const && node(t[j].node).op == "in" && node(t[j].node).list == list &&
               node(t[j].node).position == static_cast<int>(j);
      }
      if (same) {
        Stage s;
        s.kind = Stage::Kind::kInput;
        s.list = list;
        return s;
      }
    }
    std::map<std::pair<int, int>, int> leaf_at;  // (list, position) -> node
    for (const auto& [id, n] : run_.nodes)
      if (n.op == "in") leaf_at[{n.list, n.position}] = id;
    std::vector<std::set<int>> from(t.size());
    bool single = true, pairs = true, constants = false;
    for (std::size_t j = 0; j < t.size(); ++j) {
      if (t[j].is_const) {
        constants = true;
        continue;
      }
      from[j] = sources(t[j].node);
      // A selection between the two lists' elements (max(xs[i], ys[i])) is one of them, and
      // the test that chose it reads both.
      if (from[j].size() == 1 && node(*from[j].begin()).op == "in") {
        const Node& leaf = node(*from[j].begin());
        auto other = leaf_at.find({1 - leaf.list, leaf.position});
        if (other != leaf_at.end()) {
          const std::set<int> both{leaf.id, other->second};
          for (const auto& b : run_.branches)
            if (used_.count(b.seq) == 0 && sources(b.node) == both) from[j] = both;
        }
      }
      single = single && from[j].size() == 1;
      if (from[j].size() != 2) {
        pairs = false;
        continue;
      }
      const Node& x = node(*from[j].begin());
      const Node& y = node(*from[j].rbegin());
      pairs = pairs && x.op == "in" && y.op == "in" && x.list == 0 && y.list == 1 &&
              x.position == static_cast<int>(j) && y.position == static_cast<int>(j);
    }
    if (constants && !single) {
      for (const auto& v : t)
        if (v.is_const)
          unsupported(0, "the list holds a constant (" + std::to_string(v.value) +
                             ") that is "
                             "not computed from the input");
    }
    if (single) return pipeline(t, from, mod_k);
    if (pairs) return zip(t, from, mod_k);
    for (std::size_t j = 0; j < t.size(); ++j) {
      if (from[j].size() != 1)
        unsupported(node(t[j].node).line,
                    "element " + std::to_string(j) + " of a list is computed from " +
                        std::to_string(from[j].size()) +
                        " elements; only one element (MAP, "
                        "FILTER) or one of each list at the same position (ZIPWITH) is supported");
    }
    unsupported(0, "the list mixes elements of different origins");
  }

  /// The sequence the elements `sources` come from, in order (an input list or an
  /// accumulator's values).
  struct Source {
    std::vector<Ref> values;
    std::vector<int> available;  ///< the seq from which each value exists (an accumulator's hit)
  };
  /// Every element of input list `list`, in order.
  Source input_source(int list) const {
    Source all;
    for (const auto& [id, n] : run_.nodes) {
      if (n.op == "in" && n.list == list) {
        all.values.push_back({false, 0, id});
        all.available.push_back(0);
      }
    }
    return all;
  }

  Source source_sequence(const std::vector<int>& sources, int line) const {
    const Node& first = node(sources.front());
    // Elements of one input list in its order come from it; the same element again and again
    // (the running max keeps one) comes from an accumulator that holds it.
    bool input_order = true;
    for (std::size_t j = 0; j < sources.size() && input_order; ++j) {
      const Node& n = node(sources[j]);
      input_order = n.op == "in" && n.list == first.list &&
                    (j == 0 || n.position > node(sources[j - 1]).position);
    }
    if (input_order) return input_source(first.list);
    const Chain* best = nullptr;
    for (const auto& c : chains_) {
      if (c.inner) continue;
      bool all = true;
      for (int u : sources)
        all =
            all && std::find(c.values.begin(), c.values.end(), Ref{false, 0, u}) != c.values.end();
      if (all && (best == nullptr || c.values.size() > best->values.size())) best = &c;
    }
    if (best == nullptr) {
      bool all_inputs = true;
      for (int u : sources) all_inputs = all_inputs && node(u).op == "in";
      if (all_inputs)
        unsupported(line,
                    "the list's elements are not in the order of the input elements they come "
                    "from (a sort, a reversal or a repetition is outside MAP and FILTER)");
      unsupported(line,
                  "elements come from a value that is neither an input element nor an "
                  "accumulator");
    }
    const std::size_t skip = best->values.front().is_const ? 1 : 0;
    Source chain;
    chain.values.assign(best->values.begin() + static_cast<long>(skip), best->values.end());
    // Value i is computed in iteration i (after hit i-1); a generator yields it before hit i.
    for (std::size_t i = skip; i < best->values.size(); ++i)
      chain.available.push_back(i == 0 ? 0 : best->seqs[i - 1]);
    return chain;
  }

  /// An element of a pipeline's source on its way through the stages: whether it reaches the
  /// output (and as what), the tests that belong to it, the value each test looks at, and the
  /// values it takes at each stage.
  struct PipelineElement {
    int u = 0;
    bool included = false;
    Ref out;
    std::vector<const Branch*> guards;
    std::vector<int> subjects;
    std::vector<int> checkpoints;
  };

  /// The source sequence the pipeline's output `t` comes from (`from`: each output element's
  /// source; none for a constant), each source element's position in `t` (-1: filtered out) and
  /// the output's line. False when `t` holds only constants and no single input list fits.
  bool pipeline_source(const std::vector<Ref>& t, const std::vector<std::set<int>>& from,
                       Source& source, std::vector<int>& output_at, int& line) {
    std::vector<int> us(t.size(), -1), known;
    for (std::size_t j = 0; j < t.size(); ++j) {
      if (t[j].is_const) continue;
      us[j] = *from[j].begin();
      known.push_back(us[j]);
      if (line == 0) line = node(t[j].node).line;
    }
    if (known.empty()) {  // only constants: a MAP over the one input list, if as long
      if (run_.input.size() != 1 || run_.input[0].size() != t.size()) return false;
      source = input_source(0);
    } else {
      source = source_sequence(known, line);
    }
    const std::vector<Ref>& u_seq = source.values;
    // Each output element's occurrence in the source (an accumulator may repeat a value).
    output_at.assign(u_seq.size(), -1);
    if (known.size() != t.size()) {  // constants: a MAP that writes them for some elements
      if (u_seq.size() != t.size())
        unsupported(line, "the list holds constants and is not as long as the list it comes from");
      for (std::size_t j = 0; j < t.size(); ++j) {
        if (us[j] >= 0 && u_seq[j].node != us[j])
          unsupported(line, "the list holds constants and does not follow its source's order");
        output_at[j] = static_cast<int>(j);
      }
    } else {
      std::size_t i = 0;
      for (std::size_t j = 0; j < t.size(); ++j) {
        while (i < u_seq.size() && u_seq[i].node != us[j]) ++i;
        if (i == u_seq.size())
          unsupported(line,
                      "the list's elements are not in the order of the elements they come "
                      "from (a sort, a reversal or a duplicate is outside MAP and FILTER)");
        output_at[i++] = static_cast<int>(j);
      }
    }
    return true;
  }

  /// The source's elements, each with the tests that belong to it.
  std::vector<PipelineElement> pipeline_elements(const std::vector<Ref>& t, const Source& source,
                                                 const std::vector<int>& output_at) {
    const std::vector<Ref>& u_seq = source.values;
    std::vector<PipelineElement> elements;
    std::multimap<int, std::size_t> occurrences;  // node -> positions in the source
    for (std::size_t i = 0; i < u_seq.size(); ++i) {
      PipelineElement e;
      e.u = u_seq[i].node;
      if (output_at[i] >= 0) {
        e.included = true;
        e.out = t[static_cast<std::size_t>(output_at[i])];
      }
      occurrences.emplace(e.u, i);
      elements.push_back(std::move(e));
    }
    // A test belongs to the latest occurrence of its element that existed when it ran.
    for (const auto& b : run_.branches) {
      if (used_.count(b.seq) != 0) continue;
      const auto s = sources(b.node);
      if (s.size() != 1) continue;
      std::optional<std::size_t> at;
      auto [lo, hi] = occurrences.equal_range(*s.begin());
      for (auto it = lo; it != hi; ++it)
        if (source.available[it->second] < b.seq &&
            (!at || source.available[it->second] >= source.available[*at]))
          at = it->second;
      if (at) elements[*at].guards.push_back(&b);
    }
    return elements;
  }

  /// The argument indices from `root` down to `target` through the recorded operations (empty
  /// when `target` is not below `root`).
  std::vector<std::size_t> path_to(int root, int target) {
    std::vector<std::size_t> path;
    std::function<bool(int)> walk = [&](int id) {
      if (id == target) return true;
      if (id != root && stops_.count(id) != 0) return false;
      const auto& args = node(id).args;
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i].is_const) continue;
        path.push_back(i);
        if (walk(args[i].node)) return true;
        path.pop_back();
      }
      return false;
    };
    walk(root);
    return path;
  }

  /// The node `path` (path_to's) leads to from `root`, if it leads anywhere.
  std::optional<int> follow(int root, const std::vector<std::size_t>& path) {
    int id = root;
    for (std::size_t i : path) {
      const auto& args = node(id).args;
      if (i >= args.size() || args[i].is_const) return std::nullopt;
      id = args[i].node;
    }
    return id;
  }

  /// Each test's subject: the latest value of its element's computation it reads (for an element
  /// filtered out, the value at the place the included elements' tests read).
  void assign_subjects(std::vector<PipelineElement>& elements) {
    // What each test looks at: the latest value of the element's computation it reads.
    std::map<int, std::vector<std::size_t>> subject_path;  // by line: argument indices
    for (auto& e : elements) {
      if (!e.included) continue;
      std::set<int> value_nodes{e.u};
      if (!e.out.is_const) {
        const auto d = dag(e.out.node);
        value_nodes.insert(d.begin(), d.end());
      }
      for (const Branch* g : e.guards) {
        int subject = e.u;
        for (int id : dag(g->node))
          if (value_nodes.count(id) != 0 && id > subject) subject = id;
        e.subjects.push_back(subject);
        subject_path[g->line] = path_to(g->node, subject);
      }
    }
    for (auto& e : elements) {
      if (e.included) continue;
      for (const Branch* g : e.guards) {
        int subject = e.u;
        if (auto it = subject_path.find(g->line); it != subject_path.end()) {
          auto s = follow(g->node, it->second);
          if (s && sources(*s) == std::set<int>{e.u}) subject = *s;
        }
        e.subjects.push_back(subject);
      }
    }
  }

  /// Each element's checkpoints (its source value, its tests' subjects, the materialised values
  /// of its computation, its output); returns the number of stages.
  std::size_t assign_checkpoints(std::vector<PipelineElement>& elements, int line) {
    std::set<int> materialised;
    for (const auto& list : run_.lists)
      for (const auto& r : list)
        if (!r.is_const) materialised.insert(r.node);

    std::size_t stages = 0;
    for (auto& e : elements) {
      std::set<int> cps{e.u};
      cps.insert(e.subjects.begin(), e.subjects.end());
      if (e.included && !e.out.is_const) {
        cps.insert(e.out.node);
        for (int id : dag(e.out.node))
          if (materialised.count(id) != 0 && sources(id) == std::set<int>{e.u}) cps.insert(id);
      }
      e.checkpoints.assign(cps.begin(), cps.end());
      if (e.included) {
        if (stages != 0 && stages != e.checkpoints.size())
          unsupported(line, "the list's elements go through different numbers of steps");
        stages = e.checkpoints.size();
      }
    }
    for (const auto& e : elements) stages = std::max(stages, e.checkpoints.size());
    return stages;
  }

  /// One element computation per stage, from every element's paths through its checkpoints.
  std::vector<Template> stage_functions(const std::vector<PipelineElement>& elements,
                                        std::size_t stages, int line) {
    std::vector<Template> fns;
    for (std::size_t k = 0; k < stages; ++k) fns.emplace_back(1, at_line(line));
    for (const auto& e : elements) {
      for (std::size_t k = 0; k < e.checkpoints.size(); ++k) {
        const int cp = e.checkpoints[k];
        const std::map<int, int> params{{cp, 0}};
        Path p;
        for (std::size_t g = 0; g < e.guards.size(); ++g) {
          if (e.subjects[g] != cp) continue;
          p.guards.push_back(
              {build_or_fail({false, 0, e.guards[g]->node}, params, e.guards[g]->line,
                             "a test depends on more than its element"),
               e.guards[g]->outcome});
          used_.insert(e.guards[g]->seq);
        }
        const bool last_cp = k + 1 == e.checkpoints.size();
        if (last_cp && !e.included) {
          p.included = false;
        } else if (last_cp) {
          p.value = e.out.is_const ? Expr::constant(e.out.value) : Expr::parameter(0);
        } else {
          const int next = e.checkpoints[k + 1];
          p.value = build_or_fail({false, 0, next}, params, node(next).line,
                                  "a value depends on more than its element");
        }
        fns[k].add(p);
      }
    }
    return fns;
  }

  /// The stages as FILTER and MAP over the source sequence `u_seq`.
  Stage compose_stages(const std::vector<Ref>& u_seq, const std::vector<Template>& fns,
                       std::size_t stages, bool mod_k) {
    Stage s = sequence(u_seq, false);
    for (std::size_t k = 0; k < stages; ++k) {
      const Template& fn = fns[k];
      if (!fn.always_included()) {
        Stage f;
        f.kind = Stage::Kind::kFilter;
        f.fn = fn;
        f.where = fn.where();
        f.inputs.push_back(std::move(s));
        s = std::move(f);
      }
      if (!fn.identity(0)) {
        Stage m;
        m.kind = Stage::Kind::kMap;
        m.fn = fn;
        m.where = fn.where();
        m.inputs.push_back(std::move(s));
        s = std::move(m);
      }
    }
    // A % K after the accumulation these elements feed reduces them as well, where the last
    // stage computes them (no test reads them unreduced afterwards).
    if (mod_k && s.kind == Stage::Kind::kMap) s.reduce_mod_k = true;
    return s;
  }

  /// MAP and FILTER stages from the elements `from` (one source each; none for constants
  /// written instead of an element) to `t`.
  Stage pipeline(const std::vector<Ref>& t, const std::vector<std::set<int>>& from, bool mod_k) {
    Source source;
    std::vector<int> output_at;
    int line = 0;
    if (!pipeline_source(t, from, source, output_at, line)) return {};
    std::vector<PipelineElement> elements = pipeline_elements(t, source, output_at);
    assign_subjects(elements);
    const std::size_t stages = assign_checkpoints(elements, line);
    return compose_stages(source.values, stage_functions(elements, stages, line), stages, mod_k);
  }

  Stage zip(const std::vector<Ref>& t, const std::vector<std::set<int>>& from, bool mod_k) {
    Template fn(2, at_line(node(t.front().node).line));
    std::vector<Ref> xs_side, ys_side;
    for (std::size_t j = 0; j < t.size(); ++j) {
      const int lx = *from[j].begin(), ly = *from[j].rbegin();
      const int out = t[j].node;
      const int line = node(out).line;
      std::vector<const Branch*> guards;
      for (const auto& b : run_.branches) {
        if (used_.count(b.seq) != 0) continue;
        const auto s = sources(b.node);
        if (s == std::set<int>{lx, ly}) {
          guards.push_back(&b);
        } else if (s == std::set<int>{lx} || s == std::set<int>{ly}) {
          unsupported(b.line,
                      "a test of one list's elements before they are zipped (a FILTER "
                      "before ZIPWITH would misalign the lists)");
        }
      }
      // What each side computed alone before the two meet.
      std::set<int> x_parts, y_parts;
      auto collect = [&](int root) {
        for (int id : free_of(root, ly))
          if (sources(id) == std::set<int>{lx}) x_parts.insert(id);
        for (int id : free_of(root, lx))
          if (sources(id) == std::set<int>{ly}) y_parts.insert(id);
      };
      collect(out);
      for (const Branch* g : guards) collect(g->node);
      auto mx = common_part(x_parts);
      auto my = common_part(y_parts);
      if (!mx || !my) unsupported(line, "the zipped value does not combine one value of each list");
      const std::map<int, int> params{{*mx, 0}, {*my, 1}};
      Path p;
      for (const Branch* g : guards) {
        p.guards.push_back({build_or_fail({false, 0, g->node}, params, g->line,
                                          "a test of the zipped elements depends on more than "
                                          "one of each"),
                            g->outcome});
        used_.insert(g->seq);
      }
      p.value = build_or_fail(t[j], params, line,
                              "the zipped value depends on more than one "
                              "element of each list");
      fn.add(p);
      xs_side.push_back({false, 0, *mx});
      ys_side.push_back({false, 0, *my});
    }
    Stage s;
    s.kind = Stage::Kind::kZipWith;
    s.fn = fn;
    s.where = fn.where();
    s.reduce_mod_k = mod_k && reducible(fn);
    // A combination reduced % K of + - * lets each side be reduced before ((x + 2 * y) % K).
    const bool side_mod = reduces(fn);
    s.inputs.push_back(sequence(xs_side, side_mod));
    s.inputs.push_back(sequence(ys_side, side_mod));
    return s;
  }

  const Run& run_;
  int k_;
  std::set<int> stops_;
  std::vector<Chain> chains_;
  std::set<int> used_;
  std::set<const Chain*> consumed_;
  std::set<std::vector<std::pair<bool, std::int64_t>>> in_progress_;
};

}  // namespace

std::string stage_kind_name(Stage::Kind kind) {
  switch (kind) {
    case Stage::Kind::kUnknown:
      return "?";
    case Stage::Kind::kInput:
      return "input";
    case Stage::Kind::kMap:
      return "map";
    case Stage::Kind::kFilter:
      return "filter";
    case Stage::Kind::kFold:
      return "fold";
    case Stage::Kind::kScan:
      return "scan";
    case Stage::Kind::kZipWith:
      return "zipwith";
  }
  return "?";
}

namespace {

/// Whether a run may not show this stage: a FILTER that kept every element, a MAP whose
/// elements all took a path that returns them, an accumulation from the first element over a
/// one-element list.
bool may_hide(const Stage& s) {
  return s.inputs.size() == 1 &&
         (s.kind == Stage::Kind::kFilter || s.kind == Stage::Kind::kMap ||
          ((s.kind == Stage::Kind::kScan || s.kind == Stage::Kind::kFold) && s.identity_init));
}

Stage merge(Stage a, const Stage& b);

std::optional<Stage> merge_hidden(const Stage& outer, const Stage& other) {
  if (!may_hide(outer)) return std::nullopt;
  try {
    Stage s = outer;
    s.inputs[0] = merge(outer.inputs[0], other);
    return s;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

Stage merge(Stage a, const Stage& b) {
  if (b.kind == Stage::Kind::kUnknown) return a;
  if (a.kind == Stage::Kind::kUnknown) return b;
  if (a.kind != b.kind) {
    if (auto s = merge_hidden(a, b)) return *s;
    if (auto s = merge_hidden(b, a)) return *s;
  }
  if (a.kind != b.kind || a.list != b.list || a.inputs.size() != b.inputs.size() ||
      a.identity_init != b.identity_init || (!a.identity_init && a.init != b.init) ||
      a.reduce_mod_k != b.reduce_mod_k) {
    throw InputError("the sample inputs give different programs (" + a.shape() + " and " +
                     b.shape() + (a.init != b.init ? ", or another initial value" : "") +
                     "): the function does not follow one pattern");
  }
  a.fn.merge(b.fn);
  for (std::size_t i = 0; i < a.inputs.size(); ++i) a.inputs[i] = merge(a.inputs[i], b.inputs[i]);
  return a;
}

}  // namespace

std::string Stage::shape() const {
  if (kind == Kind::kInput) return list == 0 ? "xs" : "ys";
  std::string s = stage_kind_name(kind);
  if (kind == Kind::kUnknown) return s;
  s += "(";
  for (std::size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].shape();
  return s + ")";
}

Stage recognize(const Trace& trace) {
  Stage program;
  for (const auto& run : trace.runs) {
    try {
      program = merge(program, RunRecognizer(run, trace.k).recognize());
    } catch (const InputError& e) {
      std::string input;
      for (std::size_t l = 0; l < run.input.size(); ++l)
        input += (l == 0 ? "xs=" : "; ys=") + datasets::format_value_list(run.input[l]);
      throw InputError(std::string(e.what()) + " (sample input " + input + ")");
    }
  }
  if (program.kind == Stage::Kind::kUnknown)
    throw InputError(
        "no sample input shows a high-order program: every result is empty, a "
        "constant, or computed from one element without a loop over the list");
  return program;
}

}  // namespace engram::synth
