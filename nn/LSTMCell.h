#pragma once
/// \file
/// One LSTM step as layers of nn/: the gate pre-activations are two Linear layers
/// (G = ih(x) + hh(h), gates in the order i, f, g, o, as torch), then an element-wise autograd
/// Function computes the new cell and output. Use it for a step at a time; nn/LSTM.h runs whole
/// packed sequences much faster.
///
/// \code
///   engram::nn::LSTMCell cell(engram::nn::LSTMCellOptions(32, 64));
///   auto [h1, c1] = cell(x, h0, c0);               // x [B, 32], h0 and c0 [B, 64]
/// \endcode
///
///   i = sigmoid(G_i)  f = sigmoid(G_f)  g = tanh(G_g)  o = sigmoid(G_o)
///   c' = f * c + i * g        h' = o * tanh(c')
/// The element-wise Function saves the four activated gates, c and tanh(c').

#include "nn/Linear.h"

#include <tuple>

namespace engram::nn {

struct LSTMCellOptions {
  LSTMCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
};

/// The element-wise part: `gates` [B, 4H] pre-activations, `c` [B, H]; returns (h', c').
std::tuple<at::Tensor, at::Tensor> lstm_cell_pointwise(const at::Tensor& gates,
                                                       const at::Tensor& c);

class LSTMCellImpl : public torch::nn::Cloneable<LSTMCellImpl> {
 public:
  explicit LSTMCellImpl(LSTMCellOptions options);
  void reset() override;
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& h,
                                             const at::Tensor& c);

  LSTMCellOptions options;
  Linear ih{nullptr};  ///< input to gates: weight [4H, input], bias [4H]
  Linear hh{nullptr};  ///< state to gates: weight [4H, H], bias [4H]
};
TORCH_MODULE(LSTMCell);

}  // namespace engram::nn
