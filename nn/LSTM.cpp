#include "nn/LSTM.h"

#include "nn/detail/FunctionSupport.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;
using memory::SavedKind;
using torch::Tensor;

constexpr int kWeightsPerLayer = 4;  // w_ih, w_hh, b_ih, b_hh

// exp(x) with Cephes' range reduction and polynomial (within 2 ulp over the clamped range),
// without branches or library calls so that the loops below vectorize.
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);  // keeps 2^n a normal float; NaN passes through
  float n = x * 1.44269504088896341f;
  n = (n + 12582912.0f) - 12582912.0f;  // round to nearest integer (1.5 * 2^23 trick)
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }
inline float tanh_approx(float x) { return 2.0f / (1.0f + exp_approx(-2.0f * x)) - 1.0f; }

// One row of cell_forward: gate pre-activations in, activations out.
void cell_forward_row(int64_t hidden, float* __restrict gi, float* __restrict gf,
                      float* __restrict gg, float* __restrict go, const float* __restrict c_prev,
                      float* __restrict c, float* __restrict tanh_c, float* __restrict h) {
  for (int64_t j = 0; j < hidden; ++j) {
    const float i = sigmoid(gi[j]);
    const float f = sigmoid(gf[j]);
    const float g = tanh_approx(gg[j]);
    const float o = sigmoid(go[j]);
    const float cell = f * c_prev[j] + i * g;
    const float t = tanh_approx(cell);
    gi[j] = i;
    gf[j] = f;
    gg[j] = g;
    go[j] = o;
    c[j] = cell;
    tanh_c[j] = t;
    h[j] = o * t;
  }
}

// One LSTM step for `rows` rows. `gates` [rows, 4H] holds the pre-activations (i, f, g, o) and
// receives the activations; row r's previous cell is c_prev + r * c_prev_stride (stride 0 and a
// zero row: the zero state). Writes the cell, its tanh and the output [rows, H].
void cell_forward(int64_t rows, int64_t hidden, float* gates, const float* c_prev,
                  int64_t c_prev_stride, float* cells, float* tanh_cells, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    float* g = gates + r * 4 * hidden;
    cell_forward_row(hidden, g, g + hidden, g + 2 * hidden, g + 3 * hidden,
                     c_prev + r * c_prev_stride, cells + r * hidden, tanh_cells + r * hidden,
                     out + r * hidden);
  }
}

// One row of cell_backward.
void cell_backward_row(int64_t hidden, const float* __restrict gi, const float* __restrict gf,
                       const float* __restrict gg, const float* __restrict go,
                       const float* __restrict c_prev, const float* __restrict tanh_c,
                       const float* __restrict dh, float* __restrict dc_next, float* __restrict di,
                       float* __restrict df, float* __restrict dg, float* __restrict d_o) {
  for (int64_t j = 0; j < hidden; ++j) {
    const float i = gi[j], f = gf[j], g = gg[j], o = go[j], t = tanh_c[j];
    const float dc = dc_next[j] + dh[j] * o * (1.0f - t * t);
    d_o[j] = dh[j] * t * o * (1.0f - o);
    di[j] = dc * g * i * (1.0f - i);
    dg[j] = dc * i * (1.0f - g * g);
    df[j] = dc * c_prev[j] * f * (1.0f - f);
    dc_next[j] = dc * f;
  }
}

// The backward of cell_forward for one step's `rows` rows. `d_out` [rows, H] is the gradient of
// the outputs (recurrent part included); `carry` [rows, H] holds in its first `carry_rows` rows
// the cell gradient coming back from the next step (the other rows' sequences end here) and
// receives the cell gradient for the previous step. Writes the pre-activation gradients.
void cell_backward(int64_t rows, int64_t carry_rows, int64_t hidden, const float* gates,
                   const float* c_prev, int64_t c_prev_stride, const float* tanh_cells,
                   const float* d_out, float* carry, float* d_gates) {
  if (carry_rows < rows) {
    std::fill(carry + carry_rows * hidden, carry + rows * hidden, 0.0f);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gates + r * 4 * hidden;
    float* d = d_gates + r * 4 * hidden;
    cell_backward_row(hidden, g, g + hidden, g + 2 * hidden, g + 3 * hidden,
                      c_prev + r * c_prev_stride, tanh_cells + r * hidden, d_out + r * hidden,
                      carry + r * hidden, d, d + hidden, d + 2 * hidden, d + 3 * hidden);
  }
}

// cell_forward in tensor operations, for any device: `gates` [rows, 4H] (a view into the
// layer's gates) holds the pre-activations and receives the activations; `c_prev` [rows, H] is
// the previous cell (undefined: the zero state); writes `cells`, `tanh_cells` and `out` (views).
void cell_forward_ops(const Tensor& gates, const Tensor& c_prev, Tensor cells, Tensor tanh_cells,
                      Tensor out) {
  const auto g = gates.chunk(4, 1);
  g[0].sigmoid_();
  g[1].sigmoid_();
  g[2].tanh_();
  g[3].sigmoid_();
  at::mul_out(cells, g[0], g[2]);
  if (c_prev.defined()) cells.addcmul_(g[1], c_prev);
  at::tanh_out(tanh_cells, cells);
  at::mul_out(out, g[3], tanh_cells);
}

// cell_backward in tensor operations, for any device, on one step's views: `carry` [rows, H]
// holds in its first `carry_rows` rows the cell gradient from the next step and receives the
// cell gradient for the previous one; writes `d_gates` [rows, 4H].
void cell_backward_ops(int64_t carry_rows, const Tensor& gates, const Tensor& c_prev,
                       const Tensor& tanh_c, const Tensor& d_out, Tensor carry, Tensor d_gates) {
  const int64_t rows = gates.size(0);
  if (carry_rows < rows) carry.narrow(0, carry_rows, rows - carry_rows).zero_();
  const auto g = gates.chunk(4, 1);
  const auto d = d_gates.chunk(4, 1);
  const Tensor &i = g[0], &f = g[1], &cand = g[2], &o = g[3];
  const Tensor dc = carry + d_out * o * (1 - tanh_c * tanh_c);
  d[3].copy_(d_out * tanh_c * o * (1 - o));
  d[0].copy_(dc * cand * i * (1 - i));
  d[2].copy_(dc * i * (1 - cand * cand));
  if (c_prev.defined()) {
    d[1].copy_(dc * c_prev * f * (1 - f));
  } else {
    d[1].zero_();
  }
  carry.copy_(dc * f);
}

// Checked batch sizes and the packed row offset of each time step.
struct PackedLayout {
  std::vector<int64_t> sizes;    // [T]
  std::vector<int64_t> offsets;  // [T], offsets[t] = sizes[0] + ... + sizes[t - 1]
};

PackedLayout packed_layout(const Tensor& batch_sizes, int64_t rows) {
  TORCH_CHECK(batch_sizes.dim() == 1 && batch_sizes.scalar_type() == torch::kLong &&
                  batch_sizes.device().is_cpu(),
              "nn::LSTM: batch_sizes must be a 1-D int64 CPU tensor");
  const Tensor sizes = batch_sizes.contiguous();
  const int64_t* s = sizes.data_ptr<int64_t>();
  PackedLayout layout;
  int64_t total = 0;
  for (int64_t t = 0; t < sizes.numel(); ++t) {
    TORCH_CHECK(s[t] > 0 && (t == 0 || s[t] <= s[t - 1]),
                "nn::LSTM: batch_sizes must be positive and non-increasing");
    layout.sizes.push_back(s[t]);
    layout.offsets.push_back(total);
    total += s[t];
  }
  TORCH_CHECK(total == rows, "nn::LSTM: batch_sizes sum to ", total, " but the data has ", rows,
              " rows");
  return layout;
}

// What backward needs of one layer's forward.
struct LayerActivations {
  Tensor gates;       // [N, 4H] activations i, f, g, o
  Tensor cells;       // [N, H]
  Tensor tanh_cells;  // [N, H]
  Tensor out;         // [N, H]
};

// `ops`: the cells in tensor operations (any device) instead of the fused loops (CPU only).
LayerActivations forward_layer(const Tensor& x, at::TensorList w, const PackedLayout& layout,
                               bool ops) {
  const Tensor& w_ih = w[0];
  const Tensor& w_hh = w[1];
  const int64_t n = x.size(0), hidden = w_hh.size(1);
  LayerActivations a;
  a.gates = at::addmm(w[2] + w[3], x, w_ih.t());
  a.cells = at::empty({n, hidden}, x.options());
  a.tanh_cells = at::empty({n, hidden}, x.options());
  a.out = at::empty({n, hidden}, x.options());
  if (ops) {
    for (std::size_t t = 0; t < layout.sizes.size(); ++t) {
      const int64_t rows = layout.sizes[t], row = layout.offsets[t];
      Tensor c_prev;
      if (t > 0) {
        const int64_t prev = layout.offsets[t - 1];
        a.gates.narrow(0, row, rows).addmm_(a.out.narrow(0, prev, rows), w_hh.t());
        c_prev = a.cells.narrow(0, prev, rows);
      }
      cell_forward_ops(a.gates.narrow(0, row, rows), c_prev, a.cells.narrow(0, row, rows),
                       a.tanh_cells.narrow(0, row, rows), a.out.narrow(0, row, rows));
    }
    return a;
  }
  const std::vector<float> zero_row(hidden, 0.0f);
  float* gates = a.gates.data_ptr<float>();
  float* cells = a.cells.data_ptr<float>();
  float* tanh_cells = a.tanh_cells.data_ptr<float>();
  float* out = a.out.data_ptr<float>();
  for (std::size_t t = 0; t < layout.sizes.size(); ++t) {
    const int64_t rows = layout.sizes[t], row = layout.offsets[t];
    const float* c_prev = zero_row.data();
    int64_t c_prev_stride = 0;
    if (t > 0) {
      const int64_t prev = layout.offsets[t - 1];
      a.gates.narrow(0, row, rows).addmm_(a.out.narrow(0, prev, rows), w_hh.t());
      c_prev = cells + prev * hidden;
      c_prev_stride = hidden;
    }
    cell_forward(rows, hidden, gates + row * 4 * hidden, c_prev, c_prev_stride,
                 cells + row * hidden, tanh_cells + row * hidden, out + row * hidden);
  }
  return a;
}

// The input and pre-activation gradients of one layer given `d_out` [N, H] (contiguous,
// overwritten: the recurrent gradients are accumulated into it).
struct LayerGradients {
  Tensor d_input;  // [N, in]
  Tensor d_gates;  // [N, 4H]
};

LayerGradients backward_layer(at::TensorList w, const LayerActivations& a,
                              const PackedLayout& layout, Tensor d_out, bool need_input,
                              bool ops) {
  const Tensor& w_ih = w[0];
  const Tensor& w_hh = w[1];
  const int64_t n = d_out.size(0), hidden = w_hh.size(1), first = layout.sizes[0];
  Tensor d_gates = at::empty({n, 4 * hidden}, d_out.options());
  Tensor carry = at::empty({first, hidden}, d_out.options());
  const auto steps = static_cast<int64_t>(layout.sizes.size());
  if (ops) {
    for (int64_t t = steps - 1; t >= 0; --t) {
      const int64_t rows = layout.sizes[t], row = layout.offsets[t];
      const int64_t carry_rows = t + 1 < steps ? layout.sizes[t + 1] : 0;
      const Tensor c_prev = t > 0 ? a.cells.narrow(0, layout.offsets[t - 1], rows) : Tensor();
      cell_backward_ops(carry_rows, a.gates.narrow(0, row, rows), c_prev,
                        a.tanh_cells.narrow(0, row, rows), d_out.narrow(0, row, rows),
                        carry.narrow(0, 0, rows), d_gates.narrow(0, row, rows));
      if (t > 0)
        d_out.narrow(0, layout.offsets[t - 1], rows).addmm_(d_gates.narrow(0, row, rows), w_hh);
    }
    LayerGradients grads;
    if (need_input) grads.d_input = d_gates.mm(w_ih);
    grads.d_gates = d_gates;
    return grads;
  }
  const std::vector<float> zero_row(hidden, 0.0f);
  const float* gates = a.gates.data_ptr<float>();
  const float* cells = a.cells.data_ptr<float>();
  const float* tanh_cells = a.tanh_cells.data_ptr<float>();
  float* dh = d_out.data_ptr<float>();
  float* dg = d_gates.data_ptr<float>();
  for (int64_t t = steps - 1; t >= 0; --t) {
    const int64_t rows = layout.sizes[t], row = layout.offsets[t];
    const int64_t carry_rows = t + 1 < steps ? layout.sizes[t + 1] : 0;
    const float* c_prev = t > 0 ? cells + layout.offsets[t - 1] * hidden : zero_row.data();
    cell_backward(rows, carry_rows, hidden, gates + row * 4 * hidden, c_prev, t > 0 ? hidden : 0,
                  tanh_cells + row * hidden, dh + row * hidden, carry.data_ptr<float>(),
                  dg + row * 4 * hidden);
    if (t > 0) {
      d_out.narrow(0, layout.offsets[t - 1], rows).addmm_(d_gates.narrow(0, row, rows), w_hh);
    }
  }
  LayerGradients grads;
  if (need_input) grads.d_input = d_gates.mm(w_ih);
  grads.d_gates = d_gates;
  return grads;
}

// The weight gradients of one layer from its pre-activation gradients, input `x` and output
// `out`, accumulated into w_ih, w_hh, b_ih, b_hh's .grad.
void accumulate_weight_grads(at::TensorList w, const Tensor& x, const Tensor& out,
                             const Tensor& d_gates, const PackedLayout& layout) {
  const int64_t n = x.size(0), hidden = w[1].size(1), first = layout.sizes[0];
  if (w[0].requires_grad()) detail::accumulate_grad(w[0], d_gates.t().mm(x));
  if (w[1].requires_grad()) {
    if (n > first) {
      // Row by row, the previous output of each row with a previous step (all rows after t = 0).
      Tensor prev_out = at::empty({n - first, hidden}, x.options());
      if (!x.device().is_cpu()) {
        for (std::size_t t = 1; t < layout.sizes.size(); ++t)
          prev_out.narrow(0, layout.offsets[t] - first, layout.sizes[t])
              .copy_(out.narrow(0, layout.offsets[t - 1], layout.sizes[t]));
      } else {
        const float* o = out.data_ptr<float>();
        float* prev = prev_out.data_ptr<float>();
        for (std::size_t t = 1; t < layout.sizes.size(); ++t) {
          std::memcpy(prev + (layout.offsets[t] - first) * hidden,
                      o + layout.offsets[t - 1] * hidden,
                      static_cast<std::size_t>(layout.sizes[t] * hidden) * sizeof(float));
        }
      }
      detail::accumulate_grad(w[1], d_gates.narrow(0, first, n - first).t().mm(prev_out));
    } else {
      detail::accumulate_grad(w[1], at::zeros_like(w[1]));
    }
  }
  if (w[2].requires_grad() || w[3].requires_grad()) {
    const Tensor db = d_gates.sum(0);
    if (w[2].requires_grad()) detail::accumulate_grad(w[2], db);
    if (w[3].requires_grad()) detail::accumulate_grad(w[3], w[2].requires_grad() ? db.clone() : db);
  }
}

// The fused kernels above read raw host floats: the CPU path's requirement.
void check_float_cpu(const Tensor& t, const char* what) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat && t.device().is_cpu(), "nn::LSTM: ", what,
              " must be a float32 CPU tensor");
}

// The device-generic path's requirement: float32 on `device` (any device).
void check_float_on(const Tensor& t, const char* what, const at::Device& device) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat, "nn::LSTM: ", what, " must be float32");
  TORCH_CHECK(t.device() == device, "nn::LSTM: ", what, " is on ", t.device(), " but the data on ",
              device, " (move the module with ->to())");
}

// One LSTM cell from torch operations, differentiable by autograd: `gates` [rows, 4H] the
// pre-activations (i, f, g, o), `c_prev` [rows, H] the previous cell (undefined: the zero
// state, whose f * c_prev term is dropped as the fused kernel's zero row makes it vanish).
// Returns the output h and the cell c, each [rows, H].
std::pair<Tensor, Tensor> cell_generic(const Tensor& gates, const Tensor& c_prev) {
  const auto chunks = gates.chunk(4, 1);
  const Tensor input_term = chunks[0].sigmoid() * chunks[2].tanh();
  const Tensor cell = c_prev.defined() ? chunks[1].sigmoid() * c_prev + input_term : input_term;
  return {chunks[3].sigmoid() * cell.tanh(), cell};
}

struct LSTMFunction : public torch::autograd::Function<LSTMFunction> {
  // `weights` holds 4 tensors per layer (w_ih, w_hh, b_ih, b_hh); backward returns a gradient
  // for `data` only: the weights' are the scheduler's tasks, one per layer. `ops`: the cells in
  // tensor operations (any device) rather than the fused loops (CPU only).
  static Tensor forward(AutogradContext* ctx, const Tensor& data, const Tensor& batch_sizes,
                        at::TensorList weights, bool ops) {
    TORCH_CHECK(!weights.empty() && weights.size() % kWeightsPerLayer == 0,
                "nn::LSTM: expected 4 weights per layer");
    TORCH_CHECK(data.dim() == 2, "nn::LSTM: data must be [N, input_size]");
    if (ops) {
      check_float_on(data, "data", data.device());
      for (const auto& w : weights) check_float_on(w, "every weight", data.device());
    } else {
      check_float_cpu(data, "data");
      for (const auto& w : weights) check_float_cpu(w, "every weight");
    }
    const PackedLayout layout = packed_layout(batch_sizes, data.size(0));
    detail::capture_runtime(ctx);
    const auto layers = static_cast<int64_t>(weights.size()) / kWeightsPerLayer;
    Tensor x = data.contiguous();
    detail::save(ctx, "x0", x, SavedKind::activation);
    for (int64_t l = 0; l < layers; ++l) {
      const std::string k = std::to_string(l);
      for (int64_t i = 0; i < kWeightsPerLayer; ++i) {
        detail::save(ctx, "w" + k + "_" + std::to_string(i), weights[l * kWeightsPerLayer + i],
                     SavedKind::parameter);
      }
      LayerActivations a =
          forward_layer(x, weights.slice(l * kWeightsPerLayer, kWeightsPerLayer), layout, ops);
      detail::save(ctx, "gates" + k, a.gates, SavedKind::activation);
      detail::save(ctx, "cells" + k, a.cells, SavedKind::activation);
      detail::save(ctx, "tanh_cells" + k, a.tanh_cells, SavedKind::activation);
      // Layer l's output is layer l + 1's input, saved once under x<l+1>.
      detail::save(ctx, "x" + std::to_string(l + 1), a.out, SavedKind::activation);
      x = a.out;
    }
    ctx->saved_data["batch_sizes"] = layout.sizes;
    ctx->saved_data["layers"] = layers;
    ctx->saved_data["ops"] = ops;
    return x;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const int64_t layers = ctx->saved_data["layers"].toInt();
    const bool ops = ctx->saved_data["ops"].toBool();
    PackedLayout layout;
    layout.sizes = ctx->saved_data["batch_sizes"].toIntVector();
    int64_t total = 0;
    for (const int64_t s : layout.sizes) {
      layout.offsets.push_back(total);
      total += s;
    }
    // Gradients in forward's argument order: data, batch_sizes (none), every weight (none), ops.
    variable_list grads(3 + static_cast<std::size_t>(layers * kWeightsPerLayer));
    Tensor d_out = grad_outputs[0].contiguous().clone();
    Tensor out = detail::load(ctx, "x" + std::to_string(layers));
    for (int64_t l = layers - 1; l >= 0; --l) {
      const std::string k = std::to_string(l);
      std::vector<Tensor> w;
      for (int64_t i = 0; i < kWeightsPerLayer; ++i) {
        w.push_back(detail::load(ctx, "w" + k + "_" + std::to_string(i)));
      }
      const Tensor x = detail::load(ctx, "x" + k);
      const LayerActivations a{detail::load(ctx, "gates" + k), detail::load(ctx, "cells" + k),
                               detail::load(ctx, "tanh_cells" + k), out};
      const bool need_input = l > 0 || ctx->needs_input_grad(0);
      LayerGradients g = backward_layer(w, a, layout, d_out, need_input, ops);
      detail::submit_weight_grad(
          ctx, WeightGradTask{"lstm", w, [w, x, out, d_gates = g.d_gates, layout] {
                                accumulate_weight_grads(w, x, out, d_gates, layout);
                              }});
      d_out = g.d_input;
      out = x;
    }
    grads[0] = d_out;
    return grads;
  }
};

}  // namespace

LSTMImpl::LSTMImpl(LSTMOptions options) : options_(std::move(options)) { reset(); }

void LSTMImpl::reset() {
  flat_weights_.clear();
  TORCH_CHECK(options_.input_size() > 0 && options_.hidden_size() > 0 && options_.num_layers() > 0,
              "nn::LSTM: sizes and num_layers must be positive");
  const int64_t hidden = options_.hidden_size(), gates = 4 * hidden;
  // As torch::nn::LSTM: registered per layer as w_ih, w_hh, b_ih, b_hh, then every parameter
  // drawn in that order from U(-1/sqrt(H), 1/sqrt(H)).
  for (int64_t l = 0; l < options_.num_layers(); ++l) {
    const std::string k = std::to_string(l);
    const int64_t in = l == 0 ? options_.input_size() : hidden;
    flat_weights_.push_back(register_parameter("weight_ih_l" + k, torch::empty({gates, in})));
    flat_weights_.push_back(register_parameter("weight_hh_l" + k, torch::empty({gates, hidden})));
    flat_weights_.push_back(register_parameter("bias_ih_l" + k, torch::empty({gates})));
    flat_weights_.push_back(register_parameter("bias_hh_l" + k, torch::empty({gates})));
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  torch::NoGradGuard no_grad;
  for (auto& p : flat_weights_) p.uniform_(-bound, bound);
}

Tensor LSTMImpl::forward_packed(const Tensor& data, const Tensor& batch_sizes) {
  return apply_packed(data, batch_sizes, /*ops=*/!data.device().is_cpu());
}

Tensor LSTMImpl::forward_packed_generic(const Tensor& data, const Tensor& batch_sizes) {
  return apply_packed(data, batch_sizes, /*ops=*/true);
}

Tensor LSTMImpl::apply_packed(const Tensor& data, const Tensor& batch_sizes, bool ops) {
  std::vector<Tensor> inputs(flat_weights_);
  inputs.push_back(data);
  detail::gate_parameters(at::TensorList(flat_weights_));
  detail::SavingScope saving{at::TensorList(inputs)};
  return LSTMFunction::apply(data, batch_sizes, at::TensorList(flat_weights_), ops);
}

Tensor LSTMImpl::step(const Tensor& x, Tensor& h, Tensor& c) {
  detail::gate_parameters(at::TensorList(flat_weights_));
  const int64_t layers = options_.num_layers(), hidden = options_.hidden_size();
  const int64_t batch = x.size(0);
  TORCH_CHECK(x.dim() == 2 && x.size(1) == options_.input_size(),
              "nn::LSTM::step: x must be [B, input_size]");
  TORCH_CHECK(h.sizes() == c.sizes() && h.dim() == 3 && h.size(0) == layers && h.size(1) == batch &&
                  h.size(2) == hidden,
              "nn::LSTM::step: h and c must be [num_layers, B, hidden_size]");
  // Off the CPU always the torch operations, even without gradients: the fused cell reads host
  // memory.
  const bool on_cpu = x.device().is_cpu();
  if (!on_cpu) check_float_on(x, "x", x.device());
  bool differentiable = !on_cpu || (torch::GradMode::is_enabled() &&
                                    (x.requires_grad() || h.requires_grad() || c.requires_grad()));
  for (const auto& w : flat_weights_)
    differentiable |= torch::GradMode::is_enabled() && w.requires_grad();
  std::vector<Tensor> hs, cs;
  Tensor in = x;
  for (int64_t l = 0; l < layers; ++l) {
    const Tensor& w_ih = flat_weights_[l * kWeightsPerLayer];
    const Tensor& w_hh = flat_weights_[l * kWeightsPerLayer + 1];
    const Tensor bias =
        flat_weights_[l * kWeightsPerLayer + 2] + flat_weights_[l * kWeightsPerLayer + 3];
    if (differentiable) {
      Tensor cell;
      std::tie(in, cell) = cell_generic(at::addmm(bias, in, w_ih.t()).addmm(h[l], w_hh.t()), c[l]);
      cs.push_back(cell);
    } else {
      check_float_cpu(in, "x");
      Tensor gates = at::addmm(bias, in.contiguous(), w_ih.t());
      gates.addmm_(h[l], w_hh.t());
      const Tensor c_prev = c[l].contiguous();
      check_float_cpu(c_prev, "c");
      Tensor cell = at::empty({batch, hidden}, gates.options());
      Tensor tanh_cell = at::empty({batch, hidden}, gates.options());
      in = at::empty({batch, hidden}, gates.options());
      cell_forward(batch, hidden, gates.data_ptr<float>(), c_prev.data_ptr<float>(), hidden,
                   cell.data_ptr<float>(), tanh_cell.data_ptr<float>(), in.data_ptr<float>());
      cs.push_back(cell);
    }
    hs.push_back(in);
  }
  h = torch::stack(hs);
  c = torch::stack(cs);
  return in;
}

}  // namespace engram::nn
