#include "nn/ReLU.h"

#include "nn/detail/FunctionSupport.h"

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;

struct ReLUFunction : public torch::autograd::Function<ReLUFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, bool inplace) {
    detail::capture_runtime(ctx);
    at::Tensor y;
    if (inplace) {
      ctx->mark_dirty({x});
      y = at::relu_(x);
    } else {
      y = at::relu(x);
    }
    // In place, autograd bumps the tensor's version once more after forward (mark_dirty), so
    // relu() saves it then instead.
    if (!inplace) detail::save(ctx, "y", y, memory::SavedKind::relu_output);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor y = detail::load(ctx, "y");
    return {at::threshold_backward(grad_outputs[0], y, 0), at::Tensor()};
  }
};

}  // namespace

at::Tensor relu(const at::Tensor& x, bool inplace) {
  detail::SavingScope saving({x});
  at::Tensor y = ReLUFunction::apply(x, inplace);
  if (inplace) {
    if (auto node =
            std::dynamic_pointer_cast<torch::autograd::CppNode<ReLUFunction>>(y.grad_fn())) {
      detail::save(&node->ctx_, "y", y, memory::SavedKind::relu_output);
    }
  }
  return y;
}

at::Tensor ReLUImpl::forward(const at::Tensor& x) { return nn::relu(x, options.inplace()); }

}  // namespace engram::nn
