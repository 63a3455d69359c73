#pragma once
/// \file
/// Trees batched as flat node tensors plus window (edge) tensors, so a tree-convolution layer is a
/// few matrix products, gathers and one index_add, with no loop over nodes.
///
/// A convolution window is a node (its top) and the nodes below it. Each window child c of the
/// top p, the i-th of n (1-based, in order), carries the continuous-binary-tree coefficients of Mou
/// et al. (2016) for a window of depth 2:
///   top:      eta_t = 1, eta_l = eta_r = 0
///   child i:  eta_t = 0, eta_r = (i - 1) / (n - 1)  (1/2 when n = 1),  eta_l = 1 - eta_r
/// so a layer computes, for every node p,
///   y_p = f( W_t x_p + sum_{c in window(p)} (eta_l(c) W_l + eta_r(c) W_r) x_c + b ).
///
/// Whole-tree windows are a node and its children. Localized windows (a pivot given) follow the
/// localized TBCNN: each layer updates
///   the pivot          from itself, its parent and its children,
///   any other node     from itself, its parent and its children that are not ancestors of the
///                      pivot,
/// so along the path from the root to the pivot information flows only down, toward the pivot,
/// and everywhere else both ways. A layer then reads
///   y_p = f( W_t x_p + sum_{c in down(p)} (eta_l(c) W_l + eta_r(c) W_r) x_c
///                    + [p has a parent q in its window] (eta_l(p) U_l + eta_r(p) U_r) x_q + b ),
/// with a second pair of matrices (U_l, U_r) for the parent, so a node tells its parent from its
/// children; the parent term is weighted by p's own place among its siblings, so the pivot knows
/// whether it is the first statement or the last. (The pivot is not its own ancestor: its parent
/// reads it like any other child.)
/// Worked example (tests/tbcnn/TbcnnTest.cpp): nodes 0..4, 0 -> {1, 2}, 1 -> {3, 4}, pivot 3,
/// whose ancestors are 1 and 0:
///   3 <- up 1 (1, 0)                       3 is 1's first child
///   1 <- up 0 (1, 0);  down 3 (1, 0), 4 (0, 1)
///   0 <- down 2 (0, 1)                     not 1, an ancestor of the pivot
///   2 <- up 0 (0, 1);  4 <- up 1 (0, 1)
/// After two layers the pivot holds 1, 0, 3 and 4 (through 1); 2 reaches it at the third.
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
  torch::Tensor edge_child;  ///< [E] int64, a child of the top in its window
  torch::Tensor eta_left;    ///< [E] float
  torch::Tensor eta_right;   ///< [E] float
  /// Localized windows only: the top's parent in its window ([U] rows, the top's coefficients).
  torch::Tensor up_top, up_parent, up_eta_left, up_eta_right;
  torch::Tensor pivot;     ///< [B] int64, global node index of each tree's pivot (-1: none)
  torch::Tensor is_pivot;  ///< [N] int64, 1 at pivots
  /// Identifier sub-tokens (hashed into `buckets`): token ids and the node each belongs to.
  torch::Tensor token_ids;     ///< [T] int64
  torch::Tensor token_node;    ///< [T] int64
  torch::Tensor token_weight;  ///< [T] float, 1 / sub-tokens of its node (so nodes average them)

  /// The same batch with every tensor on `device` (itself, unchanged, when they are there).
  TreeBatch to(const c10::Device& device) const;
};

/// The windows of one tree as (top, child, eta_left, eta_right) rows, children in order; `up`
/// rows (localized only) have the top's parent as `child` and the top's own coefficients.
struct Window {
  int top, child;
  float eta_left, eta_right;
  bool up = false;
};
std::vector<Window> tree_windows(const datasets::CodeTree& tree, int pivot, bool localized);

/// Splits an identifier into lower-case sub-tokens: snake_case, camelCase, digits
/// ("parseHTTPResponse_v2" -> parse, http, response, v, 2).
std::vector<std::string> identifier_subtokens(const std::string& identifier);

/// The nodes within `radius` edges of `pivot` (parent and child links), in pre-order.
std::vector<int> pivot_neighbourhood(const datasets::CodeTree& tree, int pivot, int radius);

/// Batches trees; `localized` uses the localized windows (every input needs a pivot); `buckets` > 0
/// hashes identifier sub-tokens into that many ids (0: no identifier tensors).
///
/// `radius` >= 0 (localized only) batches only each tree's pivot_neighbourhood, with the windows
/// and coefficients of the whole tree. After L layers the pivot holds nodes at most L edges away,
/// and a node d edges away matters only through its first L - d layers, which read nodes at most
/// d + 1 <= L edges away, all kept: so with radius = layers the pivot's vector is the whole tree's
/// (TbcnnModel.NeighbourhoodBatchGivesThePivotVectorOfTheWholeTree) and a layer costs the
/// neighbourhood, not the file. Positions and max_nodes then count the kept nodes.
TreeBatch make_tree_batch(const std::vector<TreeInput>& inputs, bool localized, int buckets,
                          int radius = -1);

}  // namespace engram::tbcnn
