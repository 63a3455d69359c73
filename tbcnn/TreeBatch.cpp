#include "tbcnn/TreeBatch.h"

#include "common/Hash.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace engram::tbcnn {
namespace {

/// Coefficients of the window children `kids` of `top`, appended to `out`.
void add_window(int top, const std::vector<int>& kids, std::vector<Window>& out) {
  const int n = static_cast<int>(kids.size());
  for (int i = 0; i < n; ++i) {
    const float right = n == 1 ? 0.5f : static_cast<float>(i) / static_cast<float>(n - 1);
    out.push_back({top, kids[i], 1.0f - right, right});
  }
}

}  // namespace

std::vector<Window> tree_windows(const datasets::CodeTree& tree, int pivot, bool localized) {
  std::vector<Window> out;
  const int n = tree.size();
  if (!localized) {
    for (int p = 0; p < n; ++p) add_window(p, tree.children(p), out);
    return out;
  }
  if (pivot < 0 || pivot >= n) throw std::invalid_argument("localized windows need a pivot");
  std::vector<bool> ancestor(n, false);  // strict ancestors of the pivot
  for (int a = tree.parent[pivot]; a >= 0; a = tree.parent[a]) ancestor[a] = true;
  std::vector<Window> original;
  for (int p = 0; p < n; ++p) add_window(p, tree.children(p), original);
  std::vector<const Window*> edge_to_parent(n, nullptr);
  for (const auto& w : original) edge_to_parent[w.child] = &w;
  for (int u = 0; u < n; ++u) {
    if (tree.parent[u] >= 0) {
      const Window& e = *edge_to_parent[u];
      out.push_back({u, tree.parent[u], e.eta_left, e.eta_right, /*up=*/true});
    }
  }
  for (const auto& w : original) {
    if (!ancestor[w.child]) out.push_back(w);
  }
  return out;
}

std::vector<std::string> identifier_subtokens(const std::string& identifier) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) tokens.push_back(current);
    current.clear();
  };
  const std::size_t n = identifier.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(identifier[i]);
    if (!std::isalnum(c)) {
      flush();
      continue;
    }
    if (!current.empty()) {
      const auto prev = static_cast<unsigned char>(identifier[i - 1]);
      const bool lower_to_upper = std::islower(prev) && std::isupper(c);
      const bool acronym_end = std::isupper(prev) && std::isupper(c) && i + 1 < n &&
                               std::islower(static_cast<unsigned char>(identifier[i + 1]));
      const bool digit_change = (std::isdigit(prev) != 0) != (std::isdigit(c) != 0);
      if (lower_to_upper || acronym_end || digit_change) flush();
    }
    current += static_cast<char>(std::tolower(c));
  }
  flush();
  return tokens;
}

std::vector<int> pivot_neighbourhood(const datasets::CodeTree& tree, int pivot, int radius) {
  const int n = tree.size();
  if (pivot < 0 || pivot >= n) throw std::invalid_argument("a neighbourhood needs a pivot");
  std::vector<int> distance(n, -1);
  std::vector<int> frontier{pivot};
  distance[pivot] = 0;
  for (int d = 1; d <= radius && !frontier.empty(); ++d) {
    std::vector<int> next;
    auto visit = [&](int v) {
      if (v >= 0 && distance[v] < 0) {
        distance[v] = d;
        next.push_back(v);
      }
    };
    for (int u : frontier) {
      visit(tree.parent[u]);
      for (int c : tree.children(u)) visit(c);
    }
    frontier = std::move(next);
  }
  std::vector<int> kept;
  for (int i = 0; i < n; ++i) {
    if (distance[i] >= 0) kept.push_back(i);
  }
  return kept;
}

TreeBatch make_tree_batch(const std::vector<TreeInput>& inputs, bool localized, int buckets,
                          int radius) {
  if (radius >= 0 && !localized)
    throw std::invalid_argument("only localized windows can be cut to a neighbourhood");
  std::vector<int64_t> types, tree_of, position, top, child, up_top, up_parent, pivots, is_pivot,
      token_ids, token_node;
  std::vector<float> left, right, up_left, up_right, token_weight;
  int64_t offset = 0;
  long max_nodes = 0;
  for (std::size_t b = 0; b < inputs.size(); ++b) {
    const auto& tree = *inputs[b].tree;
    const int original_pivot = inputs[b].pivot;
    // The nodes batched, in pre-order, and each tree node's index among them (-1: left out).
    std::vector<int> nodes;
    if (radius >= 0) {
      nodes = pivot_neighbourhood(tree, original_pivot, radius);
    } else {
      nodes.resize(static_cast<std::size_t>(tree.size()));
      for (int i = 0; i < tree.size(); ++i) nodes[static_cast<std::size_t>(i)] = i;
    }
    std::vector<int> index_of(static_cast<std::size_t>(tree.size()), -1);
    for (std::size_t k = 0; k < nodes.size(); ++k)
      index_of[static_cast<std::size_t>(nodes[k])] = static_cast<int>(k);
    const int pivot = original_pivot >= 0 ? index_of[static_cast<std::size_t>(original_pivot)] : -1;
    const int size = static_cast<int>(nodes.size());
    for (int k = 0; k < size; ++k) {
      const int i = nodes[static_cast<std::size_t>(k)];
      types.push_back(tree.type[i]);
      tree_of.push_back(static_cast<int64_t>(b));
      position.push_back(k);
      is_pivot.push_back(k == pivot ? 1 : 0);
      if (buckets > 0 && !tree.identifier[i].empty()) {
        const auto subtokens = identifier_subtokens(tree.identifier[i]);
        for (const auto& t : subtokens) {
          token_ids.push_back(static_cast<int64_t>(fnv1a(t) % static_cast<std::uint64_t>(buckets)));
          token_node.push_back(offset + k);
          token_weight.push_back(1.0f / static_cast<float>(subtokens.size()));
        }
      }
    }
    // Windows (and their coefficients) come from the whole tree; a row is kept when both its
    // nodes are, so a node within radius - 1 of the pivot keeps all of its rows.
    for (const auto& w : tree_windows(tree, original_pivot, localized)) {
      const int top_k = index_of[static_cast<std::size_t>(w.top)];
      const int child_k = index_of[static_cast<std::size_t>(w.child)];
      if (top_k < 0 || child_k < 0) continue;
      (w.up ? up_top : top).push_back(offset + top_k);
      (w.up ? up_parent : child).push_back(offset + child_k);
      (w.up ? up_left : left).push_back(w.eta_left);
      (w.up ? up_right : right).push_back(w.eta_right);
    }
    pivots.push_back(pivot >= 0 ? offset + pivot : -1);
    offset += size;
    max_nodes = std::max<long>(max_nodes, size);
  }
  auto longs = [](const std::vector<int64_t>& v) {
    return torch::tensor(v, torch::kLong).reshape({static_cast<int64_t>(v.size())});
  };
  auto floats = [](const std::vector<float>& v) {
    return torch::tensor(v, torch::kFloat).reshape({static_cast<int64_t>(v.size())});
  };
  TreeBatch batch;
  batch.num_trees = static_cast<long>(inputs.size());
  batch.types = longs(types);
  batch.tree_of = longs(tree_of);
  batch.position = longs(position);
  batch.max_nodes = max_nodes;
  batch.edge_top = longs(top);
  batch.edge_child = longs(child);
  batch.eta_left = floats(left);
  batch.eta_right = floats(right);
  batch.up_top = longs(up_top);
  batch.up_parent = longs(up_parent);
  batch.up_eta_left = floats(up_left);
  batch.up_eta_right = floats(up_right);
  batch.pivot = longs(pivots);
  batch.is_pivot = longs(is_pivot);
  batch.token_ids = longs(token_ids);
  batch.token_node = longs(token_node);
  batch.token_weight = floats(token_weight);
  return batch;
}

TreeBatch TreeBatch::to(const c10::Device& device) const {
  TreeBatch moved = *this;
  for (torch::Tensor* t :
       {&moved.types, &moved.tree_of, &moved.position, &moved.edge_top, &moved.edge_child,
        &moved.eta_left, &moved.eta_right, &moved.up_top, &moved.up_parent, &moved.up_eta_left,
        &moved.up_eta_right, &moved.pivot, &moved.is_pivot, &moved.token_ids, &moved.token_node,
        &moved.token_weight})
    if (t->defined()) *t = t->to(device);
  return moved;
}

}  // namespace engram::tbcnn
