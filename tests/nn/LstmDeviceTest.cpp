// Tests of nn::LSTM's device-generic path (torch operations differentiated by autograd, what runs
// off the CPU): on the CPU against the fused CPU kernel, and on a CUDA device (skipped without
// one) against the same kernel. Outputs and the gradients of the input and every parameter.
#include "nn/LSTM.h"
#include "nn/Runtime.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace engram::nn {
namespace {

class LstmDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(0);
  }
};

// The packed batch of every test: 4 sequences of lengths 5, 3, 3, 1.
const std::vector<int64_t> kLengths{5, 3, 3, 1};

at::Tensor batch_sizes_of(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> sizes;
  for (int64_t t = 0; t < lengths.front(); ++t) {
    sizes.push_back(
        std::count_if(lengths.begin(), lengths.end(), [t](int64_t length) { return length > t; }));
  }
  return torch::tensor(sizes, torch::kLong);
}

// The packed row of each sequence's last step: its final output h.
at::Tensor last_rows_of(const std::vector<int64_t>& lengths) {
  const at::Tensor sizes = batch_sizes_of(lengths);
  std::vector<int64_t> offsets{0}, rows;
  for (int64_t t = 0; t + 1 < sizes.numel(); ++t)
    offsets.push_back(offsets.back() + sizes[t].item<int64_t>());
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    rows.push_back(offsets[lengths[b] - 1] + static_cast<int64_t>(b));
  }
  return torch::tensor(rows, torch::kLong);
}

// One forward and backward pass: the output and the gradients of the input, then of every
// parameter in flat_weights() order, all copied to the CPU.
struct Pass {
  at::Tensor out;
  std::vector<at::Tensor> grads;
};

// Runs `forward` on a fresh leaf copy of `data` (moved to `device`) and differentiates
// sum(out * probe) + sum(h_final * probe_h), h_final the output rows of each sequence's last step.
// The final cells are not returned by forward_packed, so they have no term of their own.
Pass run_pass(LSTM& lstm, const at::Tensor& data, const at::Tensor& probe,
              const at::Tensor& probe_h, const at::Device& device,
              const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& forward) {
  for (const auto& w : lstm->flat_weights())
    const_cast<at::Tensor&>(w).mutable_grad() = at::Tensor();
  const at::Tensor x = data.to(device).clone().set_requires_grad(true);  // a new leaf each pass
  const at::Tensor batch_sizes = batch_sizes_of(kLengths);               // stays on the CPU
  const at::Tensor out = forward(x, batch_sizes);
  EXPECT_EQ(out.device(), device);
  const at::Tensor h_final = out.index_select(0, last_rows_of(kLengths).to(device));
  ((out * probe.to(device)).sum() + (h_final * probe_h.to(device)).sum()).backward();
  current_runtime().scheduler->finish();
  Pass r{out.detach().cpu(), {x.grad().cpu()}};
  for (const auto& w : lstm->flat_weights()) {
    EXPECT_TRUE(w.grad().defined());
    r.grads.push_back(w.grad().defined() ? w.grad().cpu() : torch::full_like(w.cpu(), NAN));
  }
  return r;
}

// The largest absolute difference between two passes (output and every gradient), each checked
// against `atol`; prints it.
double expect_passes_match(const Pass& a, const Pass& b, double atol, const char* what) {
  const std::vector<std::string> names{"w_ih", "w_hh", "b_ih", "b_hh"};
  double largest = (a.out - b.out).abs().max().item<double>();
  EXPECT_LE(largest, atol) << what << ": output";
  for (std::size_t k = 0; k < a.grads.size(); ++k) {
    const double d = (a.grads[k] - b.grads[k]).abs().max().item<double>();
    const std::string name =
        k == 0 ? "input" : names[(k - 1) % 4] + "_l" + std::to_string((k - 1) / 4);
    EXPECT_LE(d, atol) << what << ": gradient of " << name;
    largest = std::max(largest, d);
  }
  std::printf("[ %s ] largest absolute difference %.3g (tolerance %.0e)\n", what, largest, atol);
  return largest;
}

LSTM small_lstm() { return LSTM(LSTMOptions(5, 7).num_layers(2)); }

TEST_F(LstmDeviceTest, TheGenericPathMatchesTheCpuKernelInOutputsAndGradients) {
  LSTM lstm = small_lstm();
  // Both paths read the registered parameters themselves.
  const auto params = lstm->parameters();
  ASSERT_EQ(params.size(), lstm->flat_weights().size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    EXPECT_TRUE(params[k].is_same(lstm->flat_weights()[k]));
  }
  const at::Tensor data = torch::randn({12, 5});
  const at::Tensor probe = torch::randn({12, 7}), probe_h = torch::randn({4, 7});
  const at::Device cpu(torch::kCPU);
  const Pass kernel = run_pass(
      lstm, data, probe, probe_h, cpu,
      [&](const at::Tensor& x, const at::Tensor& s) { return lstm->forward_packed(x, s); });
  const Pass generic = run_pass(
      lstm, data, probe, probe_h, cpu,
      [&](const at::Tensor& x, const at::Tensor& s) { return lstm->forward_packed_generic(x, s); });
  expect_passes_match(generic, kernel, 1e-5, "generic path vs CPU kernel, on the CPU");
}

// The tensor-operation path splits its backward as the CPU loops do: the input gradient now,
// each layer's weight gradients a task of the scheduler, in .grad only once it runs.
TEST_F(LstmDeviceTest, TheGenericPathHandsEachLayersWeightGradientsToTheScheduler) {
  LSTM lstm = small_lstm();
  const at::Tensor x = torch::randn({12, 5}).set_requires_grad(true);
  DeferredScheduler deferred;
  RuntimeGuard use(nullptr, &deferred);
  lstm->forward_packed_generic(x, batch_sizes_of(kLengths)).sum().backward();
  EXPECT_TRUE(x.grad().defined()) << "the input gradient comes at once";
  for (const auto& w : lstm->flat_weights()) EXPECT_FALSE(w.grad().defined());
  EXPECT_EQ(deferred.pending(), 2u) << "one task per layer";
  deferred.finish();
  for (const auto& w : lstm->flat_weights()) {
    ASSERT_TRUE(w.grad().defined());
    EXPECT_GT(w.grad().abs().sum().item<double>(), 0);
  }
}

TEST_F(LstmDeviceTest, OnACudaDeviceTheModuleMatchesTheCpuKernel) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device: torch::cuda::is_available() is false";
  }
  LSTM lstm = small_lstm();
  const at::Tensor data = torch::randn({12, 5});
  const at::Tensor probe = torch::randn({12, 7}), probe_h = torch::randn({4, 7});
  const auto forward = [&](const at::Tensor& x, const at::Tensor& s) {
    return lstm->forward_packed(x, s);
  };
  const Pass kernel = run_pass(lstm, data, probe, probe_h, at::Device(torch::kCPU), forward);
  // One state step on the CPU (the fused cell, no gradients) for the comparison below.
  const at::Tensor step_x = torch::randn({3, 5});
  const at::Tensor step_h = torch::randn({2, 3, 7}), step_c = torch::randn({2, 3, 7});
  at::Tensor h_cpu = step_h.clone(), c_cpu = step_c.clone(), top_cpu;
  {
    torch::NoGradGuard no_grad;
    top_cpu = lstm->step(step_x, h_cpu, c_cpu);
  }

  const at::Device cuda(torch::kCUDA, 0);  // tensors report their index: cuda:0, not cuda
  lstm->to(cuda);
  const auto params = lstm->parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    EXPECT_TRUE(params[k].is_same(lstm->flat_weights()[k]));
    EXPECT_EQ(lstm->flat_weights()[k].device(), cuda);
  }
  const Pass on_device = run_pass(lstm, data, probe, probe_h, cuda, forward);
  expect_passes_match(on_device, kernel, 1e-4, "CUDA vs CPU kernel");

  // step() without gradients on the device takes the torch operations.
  at::Tensor h_dev = step_h.to(cuda), c_dev = step_c.to(cuda), top_dev;
  {
    torch::NoGradGuard no_grad;
    top_dev = lstm->step(step_x.to(cuda), h_dev, c_dev);
  }
  EXPECT_EQ(top_dev.device(), cuda);
  double step_diff = (top_dev.cpu() - top_cpu).abs().max().item<double>();
  step_diff = std::max(step_diff, (h_dev.cpu() - h_cpu).abs().max().item<double>());
  step_diff = std::max(step_diff, (c_dev.cpu() - c_cpu).abs().max().item<double>());
  EXPECT_LE(step_diff, 1e-4);
  std::printf("[ step on CUDA vs CPU ] largest absolute difference %.3g (tolerance 1e-04)\n",
              step_diff);
}

}  // namespace
}  // namespace engram::nn
