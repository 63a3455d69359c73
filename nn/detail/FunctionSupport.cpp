#include "nn/detail/FunctionSupport.h"

#include "memory/MemoryTracker.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <stdexcept>

namespace engram::nn::detail {
namespace {

class RuntimeCapsule : public torch::CustomClassHolder {
 public:
  explicit RuntimeCapsule(Runtime runtime) : runtime(runtime) {}
  Runtime runtime;
};

thread_local bool saving = true;

bool recorded(at::TensorList inputs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const auto& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

}  // namespace

SavingScope::SavingScope(std::initializer_list<at::Tensor> inputs)
    : SavingScope(at::TensorList(inputs.begin(), inputs.size())) {}

SavingScope::SavingScope(at::TensorList inputs) : previous_(saving) { saving = recorded(inputs); }

SavingScope::~SavingScope() { saving = previous_; }

void capture_runtime(AutogradContext* ctx) {
  ctx->saved_data["runtime"] =
      c10::IValue::make_capsule(c10::make_intrusive<RuntimeCapsule>(current_runtime()));
}

Runtime captured_runtime(AutogradContext* ctx) {
  auto it = ctx->saved_data.find("runtime");
  if (it == ctx->saved_data.end()) throw std::logic_error("nn layer: no runtime captured");
  return c10::static_intrusive_pointer_cast<RuntimeCapsule>(it->second.toCapsule())->runtime;
}

void save(AutogradContext* ctx, const std::string& key, const at::Tensor& tensor,
          memory::SavedKind kind) {
  if (!saving) return;
  // Weight gradients are accumulated into .grad by the scheduler's tasks, which is only right for
  // leaves; a computed weight would need its gradient to flow back through autograd.
  TORCH_CHECK(kind != memory::SavedKind::parameter || !tensor.defined() ||
                  !tensor.requires_grad() || tensor.is_leaf(),
              "nn layers take leaf parameters as weights (", key,
              " is the result of a differentiable computation)");
  ctx->saved_data[key] = c10::IValue::make_capsule(captured_runtime(ctx).store->save(tensor, kind));
}

at::Tensor load(AutogradContext* ctx, const std::string& key) {
  auto it = ctx->saved_data.find(key);
  if (it == ctx->saved_data.end()) {
    throw std::logic_error("nn layer: nothing saved under '" + key +
                           "' (backward run twice? retain_graph is not supported)");
  }
  auto saved = c10::static_intrusive_pointer_cast<memory::SavedTensor>(it->second.toCapsule());
  at::Tensor tensor = saved->load();
  saved->release();
  ctx->saved_data.erase(it);
  return tensor;
}

void accumulate_grad(const at::Tensor& parameter, const at::Tensor& grad) {
  at::Tensor& current = const_cast<at::Tensor&>(parameter).mutable_grad();
  if (!current.defined()) {
    current = grad.detach();
    // It outlives the step as the parameter's gradient, whatever it was allocated as.
    if (auto* tracker = memory::MemoryTracker::installed()) {
      tracker->retag(current, memory::Tag::gradient);
    }
  } else {
    current.add_(grad);
  }
}

bool any_requires_grad(const std::vector<at::Tensor>& parameters) {
  for (const auto& p : parameters) {
    if (p.defined() && p.requires_grad()) return true;
  }
  return false;
}

void submit_weight_grad(AutogradContext* ctx, WeightGradTask task) {
  auto& params = task.parameters;
  params.erase(std::remove_if(params.begin(), params.end(),
                              [](const at::Tensor& p) { return !p.defined(); }),
               params.end());
  if (!any_requires_grad(params)) return;
  captured_runtime(ctx).scheduler->submit(std::move(task));
}

void gate_parameters(at::TensorList parameters) {
  ParameterGate* gate = current_runtime().gate;
  if (gate == nullptr) return;
  std::vector<at::Tensor> defined;
  for (const at::Tensor& p : parameters)
    if (p.defined()) defined.push_back(p);
  gate->before_forward(defined);
}

void gate_parameters(std::initializer_list<at::Tensor> parameters) {
  gate_parameters(at::TensorList(parameters.begin(), parameters.size()));
}

}  // namespace engram::nn::detail
