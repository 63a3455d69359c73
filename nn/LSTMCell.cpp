#include "nn/LSTMCell.h"

#include "nn/detail/FunctionSupport.h"

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;
using memory::SavedKind;

struct LSTMCellPointwiseFunction : public torch::autograd::Function<LSTMCellPointwiseFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& gates, const at::Tensor& c) {
    TORCH_CHECK(gates.dim() == 2 && c.dim() == 2 && gates.size(0) == c.size(0) &&
                    gates.size(1) == 4 * c.size(1),
                "nn::lstm_cell_pointwise: gates [B, 4H] and c [B, H] expected, got ", gates.sizes(),
                " and ", c.sizes());
    detail::capture_runtime(ctx);
    const auto chunks = gates.chunk(4, 1);
    const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(),
                     o = chunks[3].sigmoid();
    const at::Tensor c_next = f * c + i * g;
    const at::Tensor tanh_c = c_next.tanh();
    const at::Tensor h_next = o * tanh_c;
    detail::save(ctx, "activations", at::cat({i, f, g, o}, 1), SavedKind::activation);
    detail::save(ctx, "c", c, SavedKind::activation);
    detail::save(ctx, "tanh_c", tanh_c, SavedKind::activation);
    return {h_next, c_next};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor act = detail::load(ctx, "activations");
    const at::Tensor c = detail::load(ctx, "c");
    const at::Tensor tanh_c = detail::load(ctx, "tanh_c");
    const auto a = act.chunk(4, 1);
    const at::Tensor &i = a[0], &f = a[1], &g = a[2], &o = a[3];
    const at::Tensor dh = grad_outputs[0].defined() ? grad_outputs[0] : at::zeros_like(c);
    at::Tensor dc = dh * o * (1 - tanh_c * tanh_c);
    if (grad_outputs[1].defined()) dc = dc + grad_outputs[1];
    const at::Tensor d_gates = at::cat({dc * g * i * (1 - i), dc * c * f * (1 - f),
                                        dc * i * (1 - g * g), dh * tanh_c * o * (1 - o)},
                                       1);
    return {d_gates, dc * f};
  }
};

}  // namespace

std::tuple<at::Tensor, at::Tensor> lstm_cell_pointwise(const at::Tensor& gates,
                                                       const at::Tensor& c) {
  detail::SavingScope saving({gates, c});
  auto out = LSTMCellPointwiseFunction::apply(gates, c);
  return {out[0], out[1]};
}

LSTMCellImpl::LSTMCellImpl(LSTMCellOptions options_) : options(options_) { reset(); }

void LSTMCellImpl::reset() {
  TORCH_CHECK(options.input_size() > 0 && options.hidden_size() > 0,
              "nn::LSTMCell: sizes must be positive");
  const int64_t gates = 4 * options.hidden_size();
  ih = register_module("ih", Linear(options.input_size(), gates));
  hh = register_module("hh", Linear(options.hidden_size(), gates));
  // As torch::nn::LSTMCell: every parameter from U(-1/sqrt(H), 1/sqrt(H)).
  const double bound = 1.0 / std::sqrt(static_cast<double>(options.hidden_size()));
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) p.uniform_(-bound, bound);
}

std::tuple<at::Tensor, at::Tensor> LSTMCellImpl::forward(const at::Tensor& x, const at::Tensor& h,
                                                         const at::Tensor& c) {
  return lstm_cell_pointwise(ih->forward(x) + hh->forward(h), c);
}

}  // namespace engram::nn
