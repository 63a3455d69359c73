#pragma once
/// \file
/// Internal to nn/: what every layer's autograd Function does the same way. Forward keeps the
/// runtime (nn/Runtime.h) and its saved tensors in the autograd context through these helpers;
/// backward loads them, releases them as soon as they are loaded (a layer's backward runs once:
/// `retain_graph` is not supported), and submits its weight-gradient work.

#include "nn/Runtime.h"

#include <torch/csrc/autograd/custom_function.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace engram::nn::detail {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Set by each layer's public function around its autograd Function: whether the call will be
/// recorded for backward (gradient mode on and some input requiring a gradient). When it will
/// not (inference, the first run of a recomputed unit), save() keeps nothing.
class SavingScope {
 public:
  explicit SavingScope(std::initializer_list<at::Tensor> inputs);
  explicit SavingScope(at::TensorList inputs);
  ~SavingScope();
  SavingScope(const SavingScope&) = delete;
  SavingScope& operator=(const SavingScope&) = delete;

 private:
  bool previous_;
};

/// Keeps the calling thread's runtime in `ctx` (key "runtime").
void capture_runtime(AutogradContext* ctx);
/// The runtime captured in forward.
Runtime captured_runtime(AutogradContext* ctx);

/// Saves `tensor` through the captured runtime's store under `key` (nothing outside a recording
/// SavingScope). A parameter must be a leaf
/// (or not require a gradient): its gradient goes to .grad through the scheduler, not autograd.
void save(AutogradContext* ctx, const std::string& key, const at::Tensor& tensor,
          memory::SavedKind kind);
/// Loads and releases what save() kept under `key`.
at::Tensor load(AutogradContext* ctx, const std::string& key);

/// Adds `grad` to `parameter.grad()`, defining it if undefined (as autograd's AccumulateGrad);
/// a gradient it defines is retagged as such for the memory tracker, if one is installed.
void accumulate_grad(const at::Tensor& parameter, const at::Tensor& grad);

/// True if any of `parameters` needs a gradient.
bool any_requires_grad(const std::vector<at::Tensor>& parameters);

/// Before a layer's forward reads `parameters` (undefined ones are skipped): the calling
/// thread's parameter gate, if any, brings them up to date (nn/Runtime.h).
void gate_parameters(std::initializer_list<at::Tensor> parameters);
void gate_parameters(at::TensorList parameters);
/// Hands a weight-gradient task to the captured runtime's scheduler, unless none of its
/// parameters requires a gradient.
void submit_weight_grad(AutogradContext* ctx, WeightGradTask task);

}  // namespace engram::nn::detail
