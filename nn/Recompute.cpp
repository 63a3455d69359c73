#include "nn/Recompute.h"

#include "memory/MemoryTracker.h"
#include "nn/detail/FunctionSupport.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;

thread_local bool recomputing = false;

class RecomputeGuard {
 public:
  RecomputeGuard() : previous_(recomputing) { recomputing = true; }
  ~RecomputeGuard() { recomputing = previous_; }
  RecomputeGuard(const RecomputeGuard&) = delete;
  RecomputeGuard& operator=(const RecomputeGuard&) = delete;

 private:
  bool previous_;
};

using Unit = std::function<at::Tensor(const at::Tensor&)>;

/// The generators a unit may draw from, as they were before its first run: the CPU's, and the
/// CUDA device's when the unit computes there (dropout on a GPU draws from the device's).
struct RngStates {
  at::Tensor cpu;
  at::Tensor cuda;
  c10::DeviceIndex cuda_device = -1;

  static RngStates of(const at::Tensor& input) {
    RngStates s;
    s.cpu = cpu_rng_state();
    if (input.is_cuda()) {
      s.cuda_device = input.device().index();
      auto generator = at::cuda::detail::getDefaultCUDAGenerator(s.cuda_device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      s.cuda = generator.get_state();
    }
    return s;
  }
  void restore() const {
    set_cpu_rng_state(cpu);
    if (cuda.defined()) {
      auto generator = at::cuda::detail::getDefaultCUDAGenerator(cuda_device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(cuda);
    }
  }
};

class UnitCapsule : public torch::CustomClassHolder {
 public:
  UnitCapsule(Unit unit, RngStates rng) : unit(std::move(unit)), rng(std::move(rng)) {}
  Unit unit;
  RngStates rng;  // before the first run
};

struct RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
  // `parameters` are inputs only so that the output requires a gradient when they do; their
  // gradients reach .grad through the rerun's own backward.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            at::TensorList parameters, const Unit& unit, int64_t input_kind) {
    detail::capture_runtime(ctx);
    ctx->saved_data["num_parameters"] = static_cast<int64_t>(parameters.size());
    RngStates rng = RngStates::of(input);
    at::Tensor output;
    {
      memory::SpanGuard span("recompute_unit", "forward");
      output = unit(input);  // gradient mode is off here: nothing inside is saved
    }
    detail::save(ctx, "input", input, static_cast<memory::SavedKind>(input_kind));
    ctx->saved_data["unit"] =
        c10::IValue::make_capsule(c10::make_intrusive<UnitCapsule>(unit, std::move(rng)));
    // The output must not share storage with the input (an identity unit would otherwise make
    // autograd treat the input as modified).
    return output.is_same(input) ? output.clone() : output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor input = detail::load(ctx, "input");
    const auto capsule =
        c10::static_intrusive_pointer_cast<UnitCapsule>(ctx->saved_data["unit"].toCapsule());
    ctx->saved_data.erase("unit");
    const Runtime runtime = detail::captured_runtime(ctx);
    const auto num_inputs = static_cast<std::size_t>(1 + ctx->saved_data["num_parameters"].toInt());
    at::Tensor x = input.detach();
    x.set_requires_grad(ctx->needs_input_grad(0));
    at::Tensor output;
    {
      memory::SpanGuard span("recompute_unit", "recompute");
      const RngStates current = RngStates::of(input);
      capsule->rng.restore();
      RecomputeGuard recompute;
      // All of the first run's runtime, replicas and gate too: on CUDA this backward runs on the
      // autograd engine's device thread, whose own runtime is the default one.
      RuntimeGuard use(runtime.store, runtime.scheduler, runtime.replicas, runtime.gate);
      at::AutoGradMode grad(true);
      output = capsule->unit(x);
      current.restore();
    }
    {
      // Backward through the rerun from its output's gradient edge, so that nothing here holds
      // the rerun's output: it is freed as soon as the layers that saved it are done with it.
      RuntimeGuard use(runtime.store, runtime.scheduler, runtime.replicas, runtime.gate);
      torch::autograd::edge_list roots{torch::autograd::impl::gradient_edge(output)};
      output.reset();
      torch::autograd::Engine::get_default_engine().execute(roots, {grad_outputs[0]},
                                                            /*keep_graph=*/false,
                                                            /*create_graph=*/false,
                                                            /*accumulate_grad=*/true);
    }
    variable_list grads(num_inputs + 2);  // input, each parameter, the unit, the input's kind
    if (x.requires_grad()) grads[0] = x.grad();
    return grads;
  }
};

}  // namespace

at::Tensor recompute(const std::function<at::Tensor(const at::Tensor&)>& unit,
                     const at::Tensor& input, const std::vector<at::Tensor>& parameters,
                     memory::SavedKind input_kind) {
  if (!at::GradMode::is_enabled()) return unit(input);
  std::vector<at::Tensor> trainable;
  for (const auto& p : parameters) {
    if (p.defined() && p.requires_grad()) trainable.push_back(p);
  }
  std::vector<at::Tensor> inputs(trainable);
  inputs.push_back(input);
  detail::SavingScope saving{at::TensorList(inputs)};
  return RecomputeFunction::apply(input, at::TensorList(trainable), unit,
                                  static_cast<int64_t>(input_kind));
}

bool is_recomputing() { return recomputing; }

at::Tensor cpu_rng_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace engram::nn
