#pragma once
/// \file
/// A multi-layer LSTM over packed sequences as one autograd Function of nn/: a few large matrix
/// products (the input-to-gates product of every row at once, one recurrent product per time
/// step) plus fused element-wise loops over raw float buffers, without
/// the per-time-step autograd nodes of torch::nn::LSTM or of a loop over nn/LSTMCell.h. Saved
/// tensors go through the activation store and the weight gradients (four per layer, one task per
/// layer) through the gradient scheduler (nn/Runtime.h).
///
/// \code
///   engram::nn::LSTM lstm(engram::nn::LSTMOptions(192, 256).num_layers(2));
///   // data [N, 192] packed time-major, batch_sizes [T] non-increasing (as PackedSequence).
///   at::Tensor out = lstm->forward_packed(data, batch_sizes);   // [N, 256], differentiable
///   // Inference, B independent states: h and c [2, B, 256] are replaced by the new state.
///   at::Tensor top = lstm->step(x, h, c);                        // [B, 256]
/// \endcode
///
/// Same parameters as torch::nn::LSTM (weight_ih_l<k> [4H, in], weight_hh_l<k> [4H, H],
/// bias_ih_l<k> and bias_hh_l<k> [4H], gates in the order i, f, g, o), registered under the same
/// names, in the same order and initialized from the same random draws, so a module built after
/// torch::manual_seed(s) holds the weights torch::nn::LSTM would hold, and checkpoints and
/// state dicts are interchangeable.
///
/// How the training path works, per layer:
///   forward   G = X W_ih^T + b_ih + b_hh for all N rows (one matmul); per time step t > 0,
///             G_t += H_{t-1} W_hh^T for the sequences still running (t = 0 starts from the zero
///             state, so it has no recurrent product); then one fused loop computes the gates, the
///             cell and the output of the step's rows.
///   backward  per time step, from the last: one fused loop turns dH_t (and the cell gradient
///             carried from t + 1) into the pre-activation gradients dG_t, then dH_{t-1} +=
///             dG_t W_hh. After the loop dX = dG W_ih; the layer's task computes the weight
///             gradients, one matmul each over all rows: dW_ih = dG^T X, dW_hh = dG^T H_{t-1},
///             db = column sums of dG.
///
/// Devices: the fused loops read host memory, so they serve CPU tensors only; on any other device
/// (CUDA) the same autograd Function computes each step's cells with tensor operations (sigmoid,
/// tanh and products on the step's rows, on the current stream) in place of the loops, and
/// backward splits as on the CPU: the input-gradient chain now, each layer's weight gradients a
/// task of the scheduler. step() off the CPU runs the same formulas as differentiable torch
/// operations. On the CPU the numbers are the fused loops' as before.
///
/// float32 only, no dropout, no projection, unidirectional, zero initial state in training.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

namespace engram::nn {

struct LSTMOptions {
  LSTMOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  /// Width of the input rows.
  TORCH_ARG(int64_t, input_size);
  /// Width of the state (H).
  TORCH_ARG(int64_t, hidden_size);
  /// Stacked layers; layer k > 0 reads layer k - 1's output.
  TORCH_ARG(int64_t, num_layers) = 1;
};

class LSTMImpl : public torch::nn::Cloneable<LSTMImpl> {
 public:
  explicit LSTMImpl(LSTMOptions options);
  void reset() override;

  /// Training and evaluation over a packed batch: `data` [N, input_size] in packed order
  /// (time-major, sequences sorted by decreasing length), `batch_sizes` [T] (int64, CPU) the
  /// number of sequences running at each step; every sequence starts from the zero state.
  /// Returns the top layer's output [N, hidden_size] in the same order. Differentiable with
  /// respect to `data` and every parameter. CPU data runs the fused autograd Function; data on
  /// any other device runs forward_packed_generic.
  at::Tensor forward_packed(const at::Tensor& data, const at::Tensor& batch_sizes);

  /// forward_packed with the cells in tensor operations whatever the device of `data` (the
  /// module's parameters must be on the same one, float32; `batch_sizes` stays on the CPU): what
  /// forward_packed runs off the CPU, with the same split backward through the store and the
  /// scheduler. Same results as the fused CPU loops up to rounding (their exp is a polynomial).
  /// Public so that tests can run it on CPU tensors against them.
  at::Tensor forward_packed_generic(const at::Tensor& data, const at::Tensor& batch_sizes);

  /// One step for B independent states: `x` [B, input_size], `h` and `c` [num_layers, B, H] are
  /// replaced by the new state; returns the top layer's output [B, H]. With gradient mode off (or
  /// no parameter requiring gradients) it runs the training path's fused cell, so its numbers
  /// match forward_packed; otherwise, and always off the CPU, differentiable torch operations with
  /// the same formulas.
  at::Tensor step(const at::Tensor& x, at::Tensor& h, at::Tensor& c);

  const LSTMOptions& options() const { return options_; }

  /// The parameters in torch::nn::LSTM's order: per layer w_ih, w_hh, b_ih, b_hh. The very
  /// tensors registered as parameters (Module::to moves them in place), read by both paths.
  const std::vector<at::Tensor>& flat_weights() const { return flat_weights_; }

 private:
  /// The packed forward's autograd Function, with the fused loops or (`ops`) tensor operations.
  at::Tensor apply_packed(const at::Tensor& data, const at::Tensor& batch_sizes, bool ops);

  LSTMOptions options_;
  std::vector<at::Tensor> flat_weights_;
};
TORCH_MODULE(LSTM);

}  // namespace engram::nn
