// Tests of the optimizers' device path (Optimizer::Kernel::fused: PyTorch's fused multi-tensor
// kernels at::_fused_adam_ and at::_fused_sgd_) against Engram's loop: on the CPU, where the fused
// kernels have CPU implementations, and on a CUDA device when there is one (skipped otherwise).
#include "trainer/FusedAdam.h"
#include "trainer/FusedSgd.h"
#include "trainer/Optimizer.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace engram::trainer {
namespace {

using Kernel = Optimizer::Kernel;

class OptimizerDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(0);
  }
};

/// One optimizer and its settings, made over parameters with a given kernel.
struct Config {
  std::string name;
  std::function<std::unique_ptr<Optimizer>(std::vector<torch::Tensor>, Kernel)> make;
};

std::vector<Config> configs() {
  return {
      {"adam",
       [](std::vector<torch::Tensor> p, Kernel k) {
         return std::make_unique<FusedAdam>(std::move(p), 1e-2, 0.9, 0.999, 1e-8, k);
       }},
      {"sgd momentum 0.9",
       [](std::vector<torch::Tensor> p, Kernel k) {
         return std::make_unique<FusedSgd>(std::move(p), 0.05, 0.9, k);
       }},
      {"sgd momentum 0",
       [](std::vector<torch::Tensor> p, Kernel k) {
         return std::make_unique<FusedSgd>(std::move(p), 0.05, 0.0, k);
       }},
  };
}

/// Parameters of several shapes: sizes that are no multiple of a vector's width (the CPU kernels'
/// scalar tails), a small matrix, a single element.
std::vector<torch::Tensor> initial_parameters() {
  return {torch::randn({63, 33}), torch::randn({257}), torch::randn({5, 3}), torch::randn({1})};
}

/// Step `step`'s gradients on the CPU, undefined where a parameter has none: parameter 2 on odd
/// steps, parameter 3 on the first two (its state starts later than the others').
std::vector<torch::Tensor> gradients(const std::vector<torch::Tensor>& params, int step) {
  std::vector<torch::Tensor> grads;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const bool none = (k == 2 && step % 2 == 1) || (k == 3 && step < 2);
    grads.push_back(none ? torch::Tensor() : torch::randn(params[k].sizes()));
  }
  return grads;
}

/// An optimizer over its own copy of the parameters on `device`.
struct Trial {
  Trial(const Config& config, const std::vector<torch::Tensor>& initial, Kernel kernel,
        torch::Device device = torch::kCPU) {
    for (const auto& p : initial) params.push_back(p.clone().to(device));
    optimizer = config.make(params, kernel);
  }
  void set_gradients(const std::vector<torch::Tensor>& grads) {
    for (std::size_t k = 0; k < params.size(); ++k)
      params[k].mutable_grad() =
          grads[k].defined() ? grads[k].clone().to(params[k].device()) : torch::Tensor();
  }
  /// The state as CPU copies, by name (what a checkpoint would keep).
  std::map<std::string, torch::Tensor> saved_state() const {
    std::map<std::string, torch::Tensor> saved;
    for (const auto& [name, t] : optimizer->state_tensors()) saved[name] = t.detach().cpu().clone();
    return saved;
  }
  std::vector<torch::Tensor> params;
  std::unique_ptr<Optimizer> optimizer;
};

/// The largest differences seen between tensors and their references, for the report line.
struct Largest {
  double abs = 0;        ///< largest |x - reference|
  double tolerance = 0;  ///< largest |x - reference| / (atol + rtol |reference|): 1 at the bound

  /// Whether every element of `x` is within atol + rtol |reference| of `reference`.
  bool close(const torch::Tensor& x, const torch::Tensor& reference, double rtol, double atol) {
    const auto a = x.detach().cpu().to(torch::kDouble);
    const auto b = reference.detach().cpu().to(torch::kDouble);
    if (a.sizes() != b.sizes()) return false;
    if (a.numel() == 0) return true;
    const auto diff = (a - b).abs();
    abs = std::max(abs, diff.max().item<double>());
    const auto bound = atol + rtol * b.abs();
    if (atol > 0) tolerance = std::max(tolerance, (diff / bound).max().item<double>());
    return (diff <= bound).all().item<bool>();
  }
};

constexpr double kRtol = 1e-6, kAtol = 1e-7;

/// Parameters and every state tensor of `run` within tolerance of `reference`'s; the step counts
/// ("adam.steps") equal.
void expect_close(const Trial& run, const Trial& reference, Largest& largest, double rtol = kRtol,
                  double atol = kAtol) {
  for (std::size_t k = 0; k < run.params.size(); ++k)
    EXPECT_TRUE(largest.close(run.params[k], reference.params[k], rtol, atol)) << "parameter " << k;
  const auto ours = run.optimizer->state_tensors();
  const auto theirs = reference.optimizer->state_tensors();
  ASSERT_EQ(ours.size(), theirs.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(ours[i].first, theirs[i].first);
    if (ours[i].first == "adam.steps")
      EXPECT_TRUE(torch::equal(ours[i].second.cpu(), theirs[i].second.cpu()));
    else
      EXPECT_TRUE(largest.close(ours[i].second, theirs[i].second, rtol, atol)) << ours[i].first;
  }
}

TEST_F(OptimizerDeviceTest, FusedKernelMatchesTheLoopOnTheCpu) {
  for (const auto& config : configs()) {
    SCOPED_TRACE(config.name);
    const auto initial = initial_parameters();
    Trial loop(config, initial, Kernel::loop), fused(config, initial, Kernel::fused);
    EXPECT_EQ(loop.optimizer->kernel(), Kernel::loop);
    EXPECT_EQ(fused.optimizer->kernel(), Kernel::fused);
    Largest largest;
    for (int step = 0; step < 5; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto grads = gradients(initial, step);
      loop.set_gradients(grads);
      fused.set_gradients(grads);
      loop.optimizer->step();
      fused.optimizer->step();
      expect_close(fused, loop, largest);
    }
    if (const auto* adam = dynamic_cast<const FusedAdam*>(fused.optimizer.get())) {
      const std::vector<int64_t> expected{5, 5, 3, 3};  // skipped steps do not count
      for (std::size_t k = 0; k < expected.size(); ++k)
        EXPECT_EQ(adam->state()[k].steps, expected[k]) << k;
    }
    std::cout << "fused vs loop on the CPU, 5 steps of " << config.name << ": largest difference "
              << largest.abs << " (" << largest.tolerance << " of the tolerance)\n";
  }
}

TEST_F(OptimizerDeviceTest, FusedStepOfASubsetAdvancesOnlyThatSubset) {
  for (const auto& config : configs()) {
    SCOPED_TRACE(config.name);
    const auto initial = initial_parameters();
    // `together` steps all parameters at once, `apart` two subsets; `loop` the same subsets.
    Trial together(config, initial, Kernel::fused), apart(config, initial, Kernel::fused),
        loop(config, initial, Kernel::loop);
    Largest largest;
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      std::vector<torch::Tensor> grads;
      for (const auto& p : initial) grads.push_back(torch::randn(p.sizes()));
      for (Trial* run : {&together, &apart, &loop}) run->set_gradients(grads);
      together.optimizer->step();

      std::vector<torch::Tensor> before;
      for (const auto& p : apart.params) before.push_back(p.clone());
      const auto state_before = apart.saved_state();
      apart.optimizer->step({2, 0});
      loop.optimizer->step({2, 0});
      // Parameters 1 and 3, and their state, untouched; 0 and 2 moved.
      for (std::size_t k : {1, 3}) EXPECT_TRUE(torch::equal(apart.params[k], before[k])) << k;
      for (std::size_t k : {0, 2}) EXPECT_FALSE(torch::equal(apart.params[k], before[k])) << k;
      for (const auto& [name, t] : apart.saved_state()) {
        const bool moved = name.rfind("adam.0.", 0) == 0 || name.rfind("adam.2.", 0) == 0 ||
                           name.rfind("sgd.0.", 0) == 0 || name.rfind("sgd.2.", 0) == 0;
        if (name == "adam.steps") {
          const std::vector<int64_t> expected{step + 1, step, step + 1, step};
          for (std::size_t k = 0; k < expected.size(); ++k)
            EXPECT_EQ(t[static_cast<int64_t>(k)].item<int64_t>(), expected[k]) << k;
        } else {
          EXPECT_EQ(torch::equal(t, state_before.at(name)), !moved) << name;
        }
      }
      apart.optimizer->step({3, 1});
      loop.optimizer->step({3, 1});
    }
    // Per-parameter updates: the subsets give step()'s bytes, and the loop's values.
    for (std::size_t k = 0; k < initial.size(); ++k)
      EXPECT_TRUE(torch::equal(apart.params[k], together.params[k])) << k;
    expect_close(apart, loop, largest);

    // An index past the parameters throws before anything is updated; one named twice is updated
    // twice, as the loop does.
    const auto params_before = apart.params[0].clone();
    EXPECT_THROW(apart.optimizer->step({0, 4}), std::out_of_range);
    EXPECT_TRUE(torch::equal(apart.params[0], params_before));
    apart.optimizer->step({0, 1, 0});
    loop.optimizer->step({0, 1, 0});
    expect_close(apart, loop, largest);
    std::cout << "fused vs loop on the CPU, subsets of " << config.name << ": largest difference "
              << largest.abs << " (" << largest.tolerance << " of the tolerance)\n";
  }
}

TEST_F(OptimizerDeviceTest, StateTensorsCarryOverBetweenKernels) {
  for (const auto& config : configs()) {
    for (const auto [from, to] :
         {std::pair{Kernel::loop, Kernel::fused}, std::pair{Kernel::fused, Kernel::loop}}) {
      SCOPED_TRACE(config.name + (from == Kernel::loop ? ", loop to fused" : ", fused to loop"));
      const auto initial = initial_parameters();
      Trial source(config, initial, from);
      for (int step = 0; step < 3; ++step) {
        source.set_gradients(gradients(initial, step));
        source.optimizer->step();
      }
      // A checkpoint's copy of the parameters and state, resumed with the other kernel: it goes on
      // as the source does (Adam's bias corrections from each parameter's own count).
      Trial resumed(config, source.params, to);
      resumed.optimizer->load_state_tensors(source.saved_state());
      Largest largest;
      expect_close(resumed, source, largest, 0, 0);
      for (int step = 3; step < 5; ++step) {
        const auto grads = gradients(initial, step);
        source.set_gradients(grads);
        resumed.set_gradients(grads);
        source.optimizer->step();
        resumed.optimizer->step();
        expect_close(resumed, source, largest);
      }
      std::cout << "state carried over, " << config.name << " "
                << (from == Kernel::loop ? "loop to fused" : "fused to loop")
                << ": largest difference " << largest.abs << " (" << largest.tolerance
                << " of the tolerance)\n";
    }
  }
}

TEST_F(OptimizerDeviceTest, ParametersMustBeOnOneDevice) {
  // The meta device stands in for a GPU: its tensors have no data, but a device of their own.
  const auto meta = torch::zeros({2}, torch::TensorOptions().device(torch::kMeta));
  EXPECT_THROW(FusedAdam({torch::zeros({2}), meta}, 1e-3), std::invalid_argument);
  EXPECT_THROW(FusedSgd({meta, torch::zeros({2})}, 0.1, 0.9), std::invalid_argument);
  try {
    FusedSgd({torch::zeros({2}), meta}, 0.1);
    ADD_FAILURE() << "parameters on two devices accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("one device"), std::string::npos) << e.what();
  }
  EXPECT_THROW(FusedAdam({meta}, 1e-3, 0.9, 0.999, 1e-8, Kernel::loop), std::invalid_argument);
  EXPECT_THROW(FusedSgd({meta}, 0.1, 0.9, Kernel::loop), std::invalid_argument);
  // Not the CPU: the fused kernels, chosen by default.
  const FusedAdam on_meta({meta, meta.clone()}, 1e-3);
  EXPECT_EQ(on_meta.kernel(), Kernel::fused);
  EXPECT_EQ(on_meta.device().type(), torch::kMeta);
  EXPECT_EQ(FusedSgd({torch::zeros({2})}, 0.1).kernel(), Kernel::loop);
  EXPECT_EQ(FusedAdam({}, 1e-3).kernel(), Kernel::loop);
  // Still float32 and contiguous only.
  EXPECT_THROW(
      FusedAdam({torch::zeros({2}, torch::kDouble)}, 1e-3, 0.9, 0.999, 1e-8, Kernel::fused),
      std::invalid_argument);
  EXPECT_THROW(FusedSgd({torch::zeros({3, 2}).t()}, 0.1, 0.0, Kernel::fused),
               std::invalid_argument);
}

TEST_F(OptimizerDeviceTest, FusedKernelOnCudaMatchesTheCpuLoop) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device: the fused kernels on CUDA are compared with the loop on a GPU";
  const torch::Device cuda(torch::kCUDA, 0);
  for (const auto& config : configs()) {
    SCOPED_TRACE(config.name);
    const auto initial = initial_parameters();
    Trial loop(config, initial, Kernel::loop), gpu(config, initial, Kernel::automatic, cuda);
    EXPECT_EQ(gpu.optimizer->kernel(), Kernel::fused);
    Largest largest;
    for (int step = 0; step < 5; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto grads = gradients(initial, step);
      loop.set_gradients(grads);
      gpu.set_gradients(grads);
      if (step == 4) {  // the last step in two subsets: step(which) on the device
        loop.optimizer->step({1, 3});
        gpu.optimizer->step({1, 3});
        loop.optimizer->step({0, 2});
        gpu.optimizer->step({0, 2});
      } else {
        loop.optimizer->step();
        gpu.optimizer->step();
      }
      expect_close(gpu, loop, largest, 1e-6, 1e-6);
    }
    // A CPU loop's checkpoint resumed on the device goes on as the loop does.
    Trial resumed(config, loop.params, Kernel::automatic, cuda);
    resumed.optimizer->load_state_tensors(loop.saved_state());
    for (int step = 5; step < 7; ++step) {
      const auto grads = gradients(initial, step);
      loop.set_gradients(grads);
      resumed.set_gradients(grads);
      loop.optimizer->step();
      resumed.optimizer->step();
      expect_close(resumed, loop, largest, 1e-6, 1e-6);
    }
    std::cout << "fused on CUDA vs loop on the CPU, " << config.name << ": largest difference "
              << largest.abs << " (" << largest.tolerance << " of the tolerance)\n";
  }
}

}  // namespace
}  // namespace engram::trainer
