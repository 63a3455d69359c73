#pragma once
/// \file
/// Trees batched as flat node tensors plus window (edge) tensors, so a tree-convolution layer is a
/// few matrix products, gathers and one index_add, with no loop over nodes (DESIGN.md section 3).
///
/// A convolution window is a node (its top) and the nodes below it. Each window child c of the
/// top p, the i-th of n (1-based, in order), carries the continuous-binary-tree coefficients of Mou
/// et al. (2016) for a window of depth 2:
///   top:      eta_t = 1, eta_l = eta_r = 0
///   child i:  eta_t = 0, eta_r = (i - 1) / (n - 1)  (1/2 when n = 1),  eta_l = 1 - eta_r
/// so a layer computes, for every node p,
///   y_p = f( W_t x_p + sum_{c in window(p)} (eta_l(c) W_l + eta_r(c) W_r) x_c + b ).
///
/// Whole-tree windows are a node and its children. Localized windows (a pivot given) are those of
/// the tree re-rooted at the pivot: a node's window children are its neighbours (parent and
/// children) except the one on its path to the pivot. In the original tree that is:
///   the pivot:                   its parent and its children
///   an ancestor of the pivot:    its parent and its children but the one toward the pivot
///   any other node:              its children
/// Every edge keeps the coefficients of the original tree (those of the child's place among its
/// siblings), whichever way it is used: without that, re-rooting would lose where the pivot sits
/// among its siblings (first statement or last), which the whole-tree model sees.
/// Worked example (tests/tbcnn/TbcnnTest.cpp): nodes 0..4, 0 -> {1, 2}, 1 -> {3, 4}, pivot 3.
/// Re-rooted at 3: 3 -> {1}, 1 -> {0, 4}, 0 -> {2}; the leaves 2 and 4 have empty windows.
/// Coefficients (eta_l, eta_r): 3 <- 1 (1, 0) as 3 is 1's first child; 1 <- 0 (1, 0) as 1 is 0's
/// first child; 1 <- 4 (0, 1); 0 <- 2 (0, 1).
///
/// \code
///   std::vector<engram::tbcnn::TreeInput> inputs{{&tree_a}, {&tree_b, /*pivot=*/7}};
///   auto batch = engram::tbcnn::make_tree_batch(inputs, /*localized=*/false, /*buckets=*/0);
///   // batch.types [N], batch.tree_of [N], batch.edge_top/edge_child/eta_left/eta_right [E]
/// \endcode

#include "datasets/CodeTree.h"

#include <torch/torch.h>

#include <vector>

namespace engram::tbcnn {

/// One tree of a batch: the tree (types index the model's vocabulary) and an optional pivot.
struct TreeInput {
  const datasets::CodeTree* tree = nullptr;
  int pivot = -1;  ///< node index; -1: none
};

struct TreeBatch {
  long num_trees = 0;
  torch::Tensor types;       ///< [N] int64
  torch::Tensor tree_of;     ///< [N] int64, the tree each node belongs to
  torch::Tensor position;    ///< [N] int64, the node's index within its tree
  long max_nodes = 0;        ///< nodes of the largest tree
  torch::Tensor edge_top;    ///< [E] int64, the window's top node
  torch::Tensor edge_child;  ///< [E] int64, a node of that window below the top
  torch::Tensor eta_left;    ///< [E] float
  torch::Tensor eta_right;   ///< [E] float
  torch::Tensor pivot;       ///< [B] int64, global node index of each tree's pivot (-1: none)
  torch::Tensor is_pivot;    ///< [N] int64, 1 at pivots
  /// Identifier sub-tokens (hashed into `buckets`): token ids and the node each belongs to.
  torch::Tensor token_ids;     ///< [T] int64
  torch::Tensor token_node;    ///< [T] int64
  torch::Tensor token_weight;  ///< [T] float, 1 / sub-tokens of its node (so nodes average them)
};

/// The windows of one tree as (top, child, eta_left, eta_right) rows, children in order.
struct Window {
  int top, child;
  float eta_left, eta_right;
};
std::vector<Window> tree_windows(const datasets::CodeTree& tree, int pivot, bool localized);

/// Splits an identifier into lower-case sub-tokens: snake_case, camelCase, digits
/// ("parseHTTPResponse_v2" -> parse, http, response, v, 2).
std::vector<std::string> identifier_subtokens(const std::string& identifier);

/// Batches trees; `localized` uses re-rooted windows (every input needs a pivot); `buckets` > 0
/// hashes identifier sub-tokens into that many ids (0: no identifier tensors).
TreeBatch make_tree_batch(const std::vector<TreeInput>& inputs, bool localized, int buckets);

}  // namespace engram::tbcnn
