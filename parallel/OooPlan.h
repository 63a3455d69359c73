#pragma once
/// \file
/// How many layers out-of-order backprop defers (parallel::GradSync::ooo, `--ooo-k auto`): a model
/// of one data-parallel step in its steady state, evaluated for every k, from each layer's measured
/// forward, input-gradient (dX) and weight-gradient (dW) times and its all-reduce time over the
/// link. Pure: no torch, no clock.
///
/// The model, with layers 0..L-1 in forward order (0 nearest the input) and k deferred:
///   backward  from layer L-1 down to 0: dX, then (j >= k) dW at once; a layer's all-reduce
///             starts when its dW is done and the link is free (collectives are serialised);
///   deferred  after the dX chain, the dW of layers 0..k-1, input first, each all-reduced alone;
///   the end   the step waits for the non-deferred all-reduces only;
///   forward   the next step's layer j (j < k) waits for its own all-reduce, then runs.
/// The period is from one backward's start to the next's, and at least the link's busy time.
/// Buckets are not modelled (each non-deferred layer is its own collective): the choice needs
/// the shape of the curve, not its last percent.
///
/// \code
///   std::vector<engram::parallel::LayerCost> layers = ...;     // measured on the first step
///   std::size_t k = engram::parallel::choose_ooo_k(layers);      // argmin of predict_ooo_step
/// \endcode

#include <cstddef>
#include <vector>

namespace engram::parallel {

/// One layer's share of a step, in seconds.
struct LayerCost {
  double forward = 0;
  double input_grad = 0;   ///< dX: on the backward's critical chain
  double weight_grad = 0;  ///< dW: reorderable
  double allreduce = 0;    ///< its gradients over the link
};

/// The model's step time (seconds) with the first `k` layers deferred (k <= layers.size()).
double predict_ooo_step(const std::vector<LayerCost>& layers, std::size_t k);

/// The smallest k in 0..layers.size() whose predicted step is within `margin` (relative) of the
/// fastest: each deferred layer is a collective of its own, whose fixed cost the model leaves
/// out, so k grows only for a predicted gain above the margin.
std::size_t choose_ooo_k(const std::vector<LayerCost>& layers, double margin = 0.01);

// ------------------------------------------------------------------ one GPU, two streams

/// One stretch of a backward pass on one stream, as measured with the device synchronised at
/// each weight-gradient task (nn::GradScheduler::time_kernels): the input-gradient chain's
/// kernels since the previous task (`chain`), then the task's own kernels (`weight_grad`).
struct BackwardSegment {
  double chain = 0;
  double weight_grad = 0;
  std::size_t bytes = 0;  ///< the gradients the task writes (what an exchange of them sends)
};

/// The backward's time when the weight-gradient tasks run on a second stream (`--ooo-streams
/// 2`): task i may start once the chain has passed segment i (its inputs are written) and the
/// side stream has finished task i-1; the chain goes on meanwhile, and the backward ends when
/// both streams have (`tail_chain`: the chain's kernels after the last task). Each kernel keeps
/// its one-stream time, as if the chain left the GPU room for the other stream's kernels: the
/// bound of what a second stream can hide. With `interference` in [0, 1] the hidden time is that
/// share less (0: the bound, 1: nothing hidden, the one-stream sum).
double predict_two_stream_backward(const std::vector<BackwardSegment>& segments,
                                   double tail_chain, double interference = 0);

}  // namespace engram::parallel
