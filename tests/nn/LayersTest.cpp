// Tests of the nn module: every layer against finite differences and against the plain torch
// module it replaces; activation stores; gradient schedulers.
#include "memory/CompressingStore.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/MemoryTracker.h"
#include "nn/BatchNorm2d.h"
#include "nn/Conv2d.h"
#include "nn/Embedding.h"
#include "nn/LSTM.h"
#include "nn/LSTMCell.h"
#include "nn/Linear.h"
#include "nn/ReLU.h"
#include "nn/Runtime.h"
#include "nn/StreamScheduler.h"

#include <c10/core/StorageImpl.h>
#include "tests/support/CountingStore.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace engram::nn {
namespace {

using Inputs = std::vector<at::Tensor>;

class LayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(0);
  }
};

// The gradient of sum(f(inputs) * probe) with respect to every tensor in `wrt` (leaves that
// require gradients), by backward and by central differences; expects them equal.
void expect_gradients_match_finite_differences(const std::function<at::Tensor()>& f,
                                               const Inputs& wrt, double eps, double atol,
                                               double rtol) {
  at::Tensor probe;
  {
    torch::NoGradGuard no_grad;
    probe = torch::randn_like(f());
  }
  for (const auto& t : wrt) const_cast<at::Tensor&>(t).mutable_grad() = at::Tensor();
  (f() * probe).sum().backward();
  current_runtime().scheduler->finish();
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    const at::Tensor& t = wrt[k];
    ASSERT_TRUE(t.grad().defined()) << "input " << k << " got no gradient";
    const at::Tensor analytic = t.grad().clone();
    at::Tensor numeric = torch::zeros_like(t);
    torch::NoGradGuard no_grad;
    auto flat = t.view(-1);
    auto out = numeric.view(-1);
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double original = flat[i].item<double>();
      flat[i] = original + eps;
      const double plus = (f() * probe).sum().item<double>();
      flat[i] = original - eps;
      const double minus = (f() * probe).sum().item<double>();
      flat[i] = original;
      out[i] = (plus - minus) / (2 * eps);
    }
    EXPECT_TRUE(torch::allclose(analytic, numeric, rtol, atol))
        << "input " << k << ": max difference " << (analytic - numeric).abs().max().item<double>();
  }
}

at::Tensor leaf(at::Tensor t) { return t.set_requires_grad(true); }

// ---------------------------------------------------------------------------------------------
// Finite differences, in double precision.

TEST_F(LayersTest, LinearMatchesFiniteDifferences) {
  for (bool with_bias : {true, false}) {
    Linear fc(LinearOptions(5, 4).bias(with_bias));
    fc->to(torch::kDouble);
    const at::Tensor x = leaf(torch::randn({3, 2, 5}, torch::kDouble));
    Inputs wrt{x, fc->weight};
    if (with_bias) wrt.push_back(fc->bias);
    expect_gradients_match_finite_differences([&] { return fc(x); }, wrt, 1e-6, 1e-7, 1e-6);
  }
}

TEST_F(LayersTest, ReLUMatchesFiniteDifferencesInPlaceOrNot) {
  // Values kept away from the kink at 0, where the finite difference is not the derivative.
  at::Tensor x0 = torch::randn({4, 6}, torch::kDouble);
  x0 = leaf((x0 + x0.sign() * 0.1).detach());
  for (bool inplace : {false, true}) {
    ReLU relu(ReLUOptions().inplace(inplace));
    expect_gradients_match_finite_differences([&] { return relu(x0 * 1.0); }, {x0}, 1e-6, 1e-7,
                                              1e-6);
  }
}

TEST_F(LayersTest, Conv2dMatchesFiniteDifferences) {
  Conv2d conv(Conv2dOptions(3, 4, 3).stride(2).padding(1));
  conv->to(torch::kDouble);
  const at::Tensor x = leaf(torch::randn({2, 3, 5, 5}, torch::kDouble));
  expect_gradients_match_finite_differences([&] { return conv(x); }, {x, conv->weight, conv->bias},
                                            1e-6, 1e-7, 1e-6);
}

// Every algorithm (nn/Algorithms.h) of every geometry the ResNet has, and odd ones.
TEST_F(LayersTest, Conv2dAlgorithmsMatchFiniteDifferences) {
  struct Geometry {
    int64_t in, out, k, stride, padding, h, w;
    bool bias;
  };
  for (const Geometry g :
       {Geometry{3, 4, 3, 2, 1, 5, 5, true}, Geometry{2, 3, 1, 2, 0, 5, 6, false},
        Geometry{2, 2, 3, 1, 0, 5, 4, true}, Geometry{2, 3, 3, 1, 1, 4, 4, false},
        Geometry{2, 2, 2, 3, 2, 7, 5, true}}) {
    for (const std::string algorithm : {"default", "im2col", "direct"}) {
      Conv2d conv(Conv2dOptions(g.in, g.out, g.k).stride(g.stride).padding(g.padding).bias(g.bias));
      conv->to(torch::kDouble);
      conv->set_algorithm(algorithm);
      EXPECT_EQ(conv->algorithm(), algorithm);
      const at::Tensor x = leaf(torch::randn({2, g.in, g.h, g.w}, torch::kDouble));
      Inputs wrt{x, conv->weight};
      if (g.bias) wrt.push_back(conv->bias);
      SCOPED_TRACE(algorithm + ", kernel " + std::to_string(g.k) + ", stride " +
                   std::to_string(g.stride) + ", padding " + std::to_string(g.padding));
      expect_gradients_match_finite_differences([&] { return conv(x); }, wrt, 1e-6, 1e-7, 1e-6);
    }
  }
}

// In float the algorithms sum in other orders: equal to the default's results within float
// rounding, which is what the memory planner reports as max_rel_diff.
TEST_F(LayersTest, Conv2dAlgorithmsAgreeWithTheDefaultInFloat) {
  // The direct algorithm's chunks: one sample each (a chunk is at most an eighth of the batch),
  // several (a batch of 24: chunks of 3), and one sample above its chunk size; an input in
  // channels-last layout; stride 2 and 1.
  struct Case {
    std::vector<int64_t> input;
    int64_t stride;
    bool channels_last;
  };
  for (const Case& c : {Case{{3, 8, 9, 9}, 2, false}, Case{{24, 8, 9, 9}, 1, false},
                        Case{{24, 8, 10, 7}, 2, true}, Case{{3, 16, 100, 96}, 1, false}}) {
    at::Tensor x = torch::randn(c.input);
    if (c.channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = torch::randn({6, c.input[1], 3, 3}), b = torch::randn({6});
    const at::Tensor y = conv2d_forward(ConvAlgorithm::kDefault, x, w, b, c.stride, 1);
    const at::Tensor g = torch::randn_like(y);
    const auto reference =
        conv2d_backward(ConvAlgorithm::kDefault, g, x, w, true, c.stride, 1, {true, true, true});
    const auto close = [](const at::Tensor& a, const at::Tensor& r) {
      return (a - r).abs().max().item<double>() <= 1e-5 * r.abs().max().item<double>();
    };
    for (const auto a : {ConvAlgorithm::kIm2col, ConvAlgorithm::kDirect}) {
      SCOPED_TRACE(std::string(conv_algorithm_name(a)) + ", batch " + std::to_string(c.input[0]) +
                   ", width " + std::to_string(c.input[3]));
      EXPECT_TRUE(close(conv2d_forward(a, x, w, b, c.stride, 1), y));
      const auto grads = conv2d_backward(a, g, x, w, true, c.stride, 1, {true, true, true});
      EXPECT_TRUE(close(std::get<0>(grads), std::get<0>(reference)));
      EXPECT_TRUE(close(std::get<1>(grads), std::get<1>(reference)));
      EXPECT_TRUE(close(std::get<2>(grads), std::get<2>(reference)));
      // Only what the mask asks for.
      const auto dx_only = conv2d_backward(a, g, x, w, true, c.stride, 1, {true, false, false});
      EXPECT_TRUE(std::get<0>(dx_only).defined());
      EXPECT_FALSE(std::get<1>(dx_only).defined());
      EXPECT_FALSE(std::get<2>(dx_only).defined());
    }
  }
  EXPECT_THROW(parse_conv_algorithm("winograd"), std::invalid_argument);
  Conv2d conv(Conv2dOptions(2, 2, 3));
  EXPECT_THROW(conv->set_algorithm("winograd"), std::invalid_argument);
  EXPECT_EQ(conv->algorithm(), "default");
}

// The algorithms take one kernel size from the weight, k of [O, C, k, k]: a weight of another
// shape is refused by each with one message, not convolved as though it were k x k (cuDNN's
// descriptors would read past a 3x2 kernel's data).
TEST_F(LayersTest, Conv2dRefusesANonSquareKernel) {
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  const at::Tensor w = torch::randn({4, 3, 3, 2}, torch::requires_grad());
  for (const auto a : {ConvAlgorithm::kDefault, ConvAlgorithm::kIm2col, ConvAlgorithm::kDirect}) {
    SCOPED_TRACE(conv_algorithm_name(a));
    try {
      conv2d(x, w, at::Tensor(), 1, 1, a);
      ADD_FAILURE() << "a 3x2 kernel was convolved";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("[4, 3, 3, 2]"), std::string::npos) << e.what();
    }
    EXPECT_THROW(conv2d_forward(a, x, w, at::Tensor(), 1, 1), c10::Error);
    EXPECT_THROW(conv2d_backward(a, torch::randn({2, 4, 8, 9}), x, w, false, 1, 1,
                                 {true, true, false}),
                 c10::Error);
  }
}

// Workspace is measured, not assumed: im2col holds the whole batch's columns, direct one chunk's
// window (here one sample's: a chunk is at most an eighth of the batch), its product and one
// offset's weights.
TEST_F(LayersTest, Conv2dMeasuresTheWorkspaceOfItsAlgorithms) {
  memory::MemoryTracker::install();
  Conv2d conv(Conv2dOptions(8, 8, 3).padding(1).bias(false));
  EXPECT_THROW(conv->measure_algorithms(1), std::logic_error);
  {
    torch::NoGradGuard no_grad;
    conv(torch::randn({4, 8, 12, 12}));
  }
  const auto costs = conv->measure_algorithms(1);
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[0].algorithm, "default");
  EXPECT_EQ(costs[0].max_abs_diff, 0);
  const auto& im2col = costs[1];
  const auto& direct = costs[2];
  EXPECT_EQ(im2col.algorithm, "im2col");
  EXPECT_EQ(direct.algorithm, "direct");
  const int64_t columns = 4 * 8 * 9 * 12 * 12 * 4;  // N * C*k*k * H*W floats
  EXPECT_GE(im2col.workspace_bytes, columns);
  const int64_t window = 8 * 12 * 12 * 4;  // one sample's C * H*W floats
  EXPECT_GT(direct.workspace_bytes, 0);
  EXPECT_LE(direct.workspace_bytes, 3 * window);
  for (const auto& c : costs) {
    EXPECT_LT(c.max_rel_diff, 1e-5) << c.algorithm;
    EXPECT_GT(c.forward_ms, 0) << c.algorithm;
    EXPECT_GT(c.backward_ms, 0) << c.algorithm;
  }
  // Measuring changes nothing: the layer still runs its algorithm.
  EXPECT_EQ(conv->algorithm(), "default");
}

// cuDNN's algorithms per pass are named "cudnn:F,BD,BF"; on CPU tensors they refuse to run
// rather than run another algorithm.
TEST_F(LayersTest, Conv2dCudnnAlgorithmsAreNamedPerPassAndRunOnCudaOnly) {
  CudnnAlgorithms a;
  EXPECT_TRUE(parse_cudnn_algorithm_name("cudnn:1,0,3", &a));
  EXPECT_EQ(a, (CudnnAlgorithms{1, 0, 3}));
  EXPECT_EQ(cudnn_algorithm_name(a), "cudnn:1,0,3");
  for (const std::string bad : {"cudnn", "cudnn:", "cudnn:1,0", "cudnn:1,0,3,", "cudnn:1,,3",
                                "cudnn:100,0,0", "cudnn:1,0,x", "default", "cudnn:-1,0,0",
                                "cudnn:07,0,0"})
    EXPECT_FALSE(parse_cudnn_algorithm_name(bad, nullptr)) << bad;
  Conv2d conv(Conv2dOptions(2, 3, 3).padding(1));
  conv->set_algorithm("cudnn:1,0,3");
  EXPECT_EQ(conv->algorithm(), "cudnn:1,0,3");
  EXPECT_THROW(conv->set_algorithm("cudnn"), std::invalid_argument);
  EXPECT_THROW(conv->set_algorithm("cudnn:1"), std::invalid_argument);
  EXPECT_EQ(conv->algorithm(), "cudnn:1,0,3");  // a refused name changes nothing
  try {
    conv(torch::randn({1, 2, 5, 5}));
    ADD_FAILURE() << "a cudnn algorithm ran on CPU tensors";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cudnn"), std::string::npos) << e.what();
  }
  conv->set_algorithm("im2col");
  EXPECT_EQ(conv->algorithm(), "im2col");
  EXPECT_EQ(conv->algorithms(), (std::vector<std::string>{"default", "im2col", "direct"}));
}

// On a GPU a layer offers cuDNN's fastest and least-workspace algorithms of each pass beside
// ATen's default, measured on its shape; each computes the default's convolution and gradients
// within float32 rounding (TF32 off), and an algorithm cuDNN does not have fails, never runs
// another.
TEST_F(LayersTest, OnCudaConv2dRunsTheCudnnAlgorithmsItMeasured) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: cuDNN needs one";
  memory::CudaMemoryTracker::install(0);
  if (!memory::CudaMemoryTracker::hooked())
    GTEST_SKIP() << "the CUDA allocator hook is not attached";
  // Float32 throughout, as cuDNN's choices compute (no TF32), restored however the test ends.
  struct Tf32Off {
    bool before = at::globalContext().allowTF32CuDNN();
    Tf32Off() { at::globalContext().setAllowTF32CuDNN(false); }
    ~Tf32Off() { at::globalContext().setAllowTF32CuDNN(before); }
  } tf32_off;
  torch::manual_seed(5);
  Conv2d conv(Conv2dOptions(16, 32, 3).padding(1).stride(2));
  conv->to(torch::kCUDA);
  const at::Tensor x = torch::randn({8, 16, 20, 20}, torch::kCUDA).requires_grad_(true);
  auto step = [&] {
    conv->zero_grad();
    x.mutable_grad().reset();
    const at::Tensor y = conv(x);
    y.square().sum().backward();
    return std::vector<at::Tensor>{y.detach().cpu(), x.grad().cpu(), conv->weight.grad().cpu(),
                                   conv->bias.grad().cpu()};
  };
  const auto reference = step();
  const auto costs = conv->measure_algorithms(2);
  ASSERT_GE(costs.size(), 2u);
  EXPECT_EQ(costs[0].algorithm, "default");
  for (std::size_t i = 1; i < costs.size(); ++i) {
    SCOPED_TRACE(costs[i].algorithm);
    EXPECT_EQ(costs[i].algorithm.rfind("cudnn:", 0), 0u);
    EXPECT_LT(costs[i].max_rel_diff, 1e-4);
    conv->set_algorithm(costs[i].algorithm);
    const auto got = step();
    for (std::size_t t = 0; t < got.size(); ++t) {
      const double scale = reference[t].abs().max().item<double>();
      EXPECT_LT((got[t] - reference[t]).abs().max().item<double>(), 1e-4 * scale) << t;
    }
  }
  conv->set_algorithm("cudnn:99,0,0");
  EXPECT_THROW(conv(x), std::runtime_error);
}

TEST_F(LayersTest, BatchNorm2dMatchesFiniteDifferencesInTrainingAndEvaluation) {
  BatchNorm2d bn(BatchNorm2dOptions(3));
  bn->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    bn->weight.uniform_(0.5, 1.5);
    bn->bias.uniform_(-0.5, 0.5);
  }
  const at::Tensor x = leaf(torch::randn({4, 3, 3, 2}, torch::kDouble));
  expect_gradients_match_finite_differences([&] { return bn(x); }, {x, bn->weight, bn->bias}, 1e-6,
                                            1e-7, 1e-5);
  bn->eval();
  expect_gradients_match_finite_differences([&] { return bn(x); }, {x, bn->weight, bn->bias}, 1e-6,
                                            1e-7, 1e-5);
}

/// One replica: the sum over replicas is the tensor itself (data-parallel training of one rank).
struct OneReplica : ReplicaSum {
  int calls = 0;
  void sum(at::Tensor&) override { ++calls; }
};

TEST_F(LayersTest, SynchronisedBatchNormMatchesFiniteDifferencesAndTheLocalPath) {
  // With replicas, BatchNorm2d takes its synchronised path (global statistics through
  // ReplicaSum); with one replica it must compute what the local path does.
  BatchNorm2d bn(BatchNorm2dOptions(3));
  bn->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    bn->weight.uniform_(0.5, 1.5);
    bn->bias.uniform_(-0.5, 0.5);
  }
  const at::Tensor x = leaf(torch::randn({4, 3, 3, 2}, torch::kDouble) * 2 + 1);
  const at::Tensor dy = torch::randn({4, 3, 3, 2}, torch::kDouble);
  auto run = [&](ReplicaSum* replicas) {
    RuntimeGuard use(nullptr, nullptr, replicas);
    x.mutable_grad() = at::Tensor();
    bn->weight.mutable_grad() = at::Tensor();
    bn->bias.mutable_grad() = at::Tensor();
    const at::Tensor y = bn(x);
    (y * dy).sum().backward();
    return std::vector<at::Tensor>{y.detach(),
                                   x.grad().clone(),
                                   bn->weight.grad().clone(),
                                   bn->bias.grad().clone(),
                                   bn->running_mean.clone(),
                                   bn->running_var.clone()};
  };
  auto reset_running = [&] {
    torch::NoGradGuard no_grad;
    bn->running_mean.zero_();
    bn->running_var.fill_(1);
  };
  reset_running();
  const auto local = run(nullptr);
  reset_running();
  OneReplica one;
  const auto synced = run(&one);
  EXPECT_EQ(one.calls, 3);  // two in forward (sums, squares), one in backward
  const char* names[] = {"y", "dx", "dweight", "dbias", "running_mean", "running_var"};
  for (std::size_t i = 0; i < synced.size(); ++i)
    EXPECT_TRUE(torch::allclose(synced[i], local[i], 1e-10, 1e-12)) << names[i];
  OneReplica again;
  RuntimeGuard use(nullptr, nullptr, &again);
  expect_gradients_match_finite_differences([&] { return bn(x); }, {x, bn->weight, bn->bias}, 1e-6,
                                            1e-7, 1e-5);
  EXPECT_GT(again.calls, 0);
}

TEST_F(LayersTest, EmbeddingMatchesFiniteDifferences) {
  Embedding table(EmbeddingOptions(5, 3));
  table->to(torch::kDouble);
  const at::Tensor indices = torch::tensor({{0, 2, 2}, {4, 1, 0}}, torch::kLong);
  expect_gradients_match_finite_differences([&] { return table(indices); }, {table->weight}, 1e-6,
                                            1e-7, 1e-6);
}

TEST_F(LayersTest, LSTMCellMatchesFiniteDifferences) {
  LSTMCell cell(LSTMCellOptions(3, 4));
  cell->to(torch::kDouble);
  const at::Tensor x = leaf(torch::randn({2, 3}, torch::kDouble));
  const at::Tensor h = leaf(torch::randn({2, 4}, torch::kDouble));
  const at::Tensor c = leaf(torch::randn({2, 4}, torch::kDouble));
  // Both outputs reach the loss: h' * 1 + c' * 0.5.
  expect_gradients_match_finite_differences(
      [&] {
        auto [h1, c1] = cell(x, h, c);
        return h1 + 0.5 * c1;
      },
      {x, h, c, cell->ih->weight, cell->ih->bias, cell->hh->weight, cell->hh->bias}, 1e-6, 1e-7,
      1e-6);
}

TEST_F(LayersTest, PackedLSTMMatchesFiniteDifferencesInFloat) {
  // The packed LSTM is float32 only: a larger step and looser tolerances.
  LSTM lstm(LSTMOptions(3, 4).num_layers(2));
  const at::Tensor batch_sizes = torch::tensor({3, 2, 2, 1}, torch::kLong);
  const at::Tensor data = leaf(torch::randn({8, 3}));
  Inputs wrt{data};
  for (const auto& w : lstm->flat_weights()) wrt.push_back(w);
  expect_gradients_match_finite_differences([&] { return lstm->forward_packed(data, batch_sizes); },
                                            wrt, 1e-2, 2e-3, 2e-2);
}

// ---------------------------------------------------------------------------------------------
// Equality with the plain torch modules they replace (same seed, same weights, same numbers).

// Relative difference |a - b| / |b| (0 when both are zero).
double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  const double denominator = b.norm().item<double>();
  const double numerator = (a - b).norm().item<double>();
  return denominator == 0 ? numerator : numerator / denominator;
}

// Runs `ours` and `theirs` on the same input, backward through sum(out * probe), and compares
// outputs, input gradients and the named parameters' gradients within `tolerance` (relative).
void expect_same_as_torch(torch::nn::Module& ours, torch::nn::Module& theirs,
                          const std::function<at::Tensor(const at::Tensor&)>& run_ours,
                          const std::function<at::Tensor(const at::Tensor&)>& run_theirs,
                          const at::Tensor& input, double tolerance) {
  const auto a = ours.named_parameters();
  const auto b = theirs.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& p : a) {
    ASSERT_TRUE(b.contains(p.key())) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << "initial " << p.key();
  }
  const at::Tensor x1 = leaf(input.clone()), x2 = leaf(input.clone());
  const at::Tensor y1 = run_ours(x1 * 1.0), y2 = run_theirs(x2 * 1.0);
  const at::Tensor probe = torch::randn_like(y2);
  (y1 * probe).sum().backward();
  current_runtime().scheduler->finish();
  (y2 * probe).sum().backward();
  EXPECT_LE(relative_difference(y1, y2), tolerance);
  EXPECT_LE(relative_difference(x1.grad(), x2.grad()), tolerance);
  for (const auto& p : a) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_LE(relative_difference(p.value().grad(), b[p.key()].grad()), tolerance) << p.key();
  }
}

TEST_F(LayersTest, LinearEqualsTorchLinear) {
  torch::manual_seed(3);
  Linear ours(LinearOptions(6, 5));
  torch::manual_seed(3);
  torch::nn::Linear theirs(torch::nn::LinearOptions(6, 5));
  expect_same_as_torch(
      *ours, *theirs, [&](const at::Tensor& x) { return ours(x); },
      [&](const at::Tensor& x) { return theirs(x); }, torch::randn({4, 3, 6}), 1e-6);
}

TEST_F(LayersTest, Conv2dBatchNormReLUEqualTorchModules) {
  torch::manual_seed(4);
  Conv2d conv(Conv2dOptions(3, 8, 3).padding(1).bias(false));
  BatchNorm2d bn(BatchNorm2dOptions(8));
  torch::manual_seed(4);
  torch::nn::Conv2d tconv(torch::nn::Conv2dOptions(3, 8, 3).padding(1).bias(false));
  torch::nn::BatchNorm2d tbn(torch::nn::BatchNorm2dOptions(8));
  torch::nn::Sequential ours(conv, bn, ReLU(ReLUOptions().inplace(true)));
  torch::nn::Sequential theirs(tconv, tbn, torch::nn::ReLU(torch::nn::ReLUOptions(true)));
  expect_same_as_torch(
      *ours, *theirs, [&](const at::Tensor& x) { return ours->forward(x); },
      [&](const at::Tensor& x) { return theirs->forward(x); }, torch::randn({4, 3, 6, 6}), 1e-6);
  EXPECT_TRUE(torch::allclose(bn->running_mean, tbn->running_mean, 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(bn->running_var, tbn->running_var, 1e-6, 1e-7));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), tbn->num_batches_tracked.item<int64_t>());
}

TEST_F(LayersTest, EmbeddingEqualsTorchEmbedding) {
  torch::manual_seed(5);
  Embedding ours(EmbeddingOptions(7, 4));
  torch::manual_seed(5);
  torch::nn::Embedding theirs(torch::nn::EmbeddingOptions(7, 4));
  EXPECT_TRUE(torch::equal(ours->weight, theirs->weight));
  const at::Tensor indices = torch::tensor({3, 3, 0, 6, 1}, torch::kLong);
  const at::Tensor probe = torch::randn({5, 4});
  (ours(indices) * probe).sum().backward();
  (theirs(indices) * probe).sum().backward();
  EXPECT_TRUE(torch::equal(ours->weight.grad(), theirs->weight.grad()));
}

TEST_F(LayersTest, LSTMCellEqualsTorchLSTMCell) {
  LSTMCell ours(LSTMCellOptions(5, 6));
  torch::nn::LSTMCell theirs(torch::nn::LSTMCellOptions(5, 6));
  {
    torch::NoGradGuard no_grad;
    theirs->weight_ih.copy_(ours->ih->weight);
    theirs->bias_ih.copy_(ours->ih->bias);
    theirs->weight_hh.copy_(ours->hh->weight);
    theirs->bias_hh.copy_(ours->hh->bias);
  }
  const at::Tensor x = torch::randn({3, 5}, torch::kFloat), h = torch::randn({3, 6}),
                   c = torch::randn({3, 6});
  auto [h1, c1] = ours(x, h, c);
  auto [h2, c2] = theirs(x, std::make_tuple(h, c));
  const at::Tensor ph = torch::randn_like(h1), pc = torch::randn_like(c1);
  ((h1 * ph).sum() + (c1 * pc).sum()).backward();
  ((h2 * ph).sum() + (c2 * pc).sum()).backward();
  EXPECT_LE(relative_difference(h1, h2), 1e-6);
  EXPECT_LE(relative_difference(c1, c2), 1e-6);
  EXPECT_LE(relative_difference(ours->ih->weight.grad(), theirs->weight_ih.grad()), 1e-6);
  EXPECT_LE(relative_difference(ours->hh->weight.grad(), theirs->weight_hh.grad()), 1e-6);
  EXPECT_LE(relative_difference(ours->ih->bias.grad(), theirs->bias_ih.grad()), 1e-6);
  EXPECT_LE(relative_difference(ours->hh->bias.grad(), theirs->bias_hh.grad()), 1e-6);
}

TEST_F(LayersTest, PackedLSTMEqualsTorchLSTM) {
  torch::manual_seed(6);
  LSTM ours(LSTMOptions(5, 8).num_layers(2));
  torch::manual_seed(6);
  torch::nn::LSTM theirs(torch::nn::LSTMOptions(5, 8).num_layers(2));
  const at::Tensor batch_sizes = torch::tensor({3, 3, 2, 1}, torch::kLong);
  expect_same_as_torch(
      *ours, *theirs, [&](const at::Tensor& x) { return ours->forward_packed(x, batch_sizes); },
      [&](const at::Tensor& x) {
        torch::nn::utils::rnn::PackedSequence packed(x, batch_sizes);
        return std::get<0>(theirs->forward_with_packed_input(packed)).data();
      },
      torch::randn({9, 5}), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// Schedulers and stores.

// A small network with every kind of layer that has weights.
struct SmallNet : torch::nn::Module {
  SmallNet() {
    conv = register_module("conv", Conv2d(Conv2dOptions(2, 4, 3).padding(1)));
    bn = register_module("bn", BatchNorm2d(BatchNorm2dOptions(4)));
    fc = register_module("fc", Linear(LinearOptions(4 * 4 * 4, 3)));
    table = register_module("table", Embedding(EmbeddingOptions(5, 3)));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& indices) {
    const at::Tensor y = nn::relu(bn(conv(x)), /*inplace=*/true);
    return fc(y.flatten(1)) + table(indices);
  }
  Conv2d conv{nullptr};
  BatchNorm2d bn{nullptr};
  Linear fc{nullptr};
  Embedding table{nullptr};
};

std::map<std::string, at::Tensor> gradients(SmallNet& net, GradScheduler* scheduler,
                                            std::size_t* pending_after_backward = nullptr,
                                            const c10::Device& device = c10::kCPU) {
  torch::manual_seed(11);
  const at::Tensor x = torch::randn({2, 2, 4, 4}).to(device);
  const at::Tensor indices = torch::tensor({1, 4}, torch::kLong).to(device);
  net.zero_grad();
  {
    RuntimeGuard use(nullptr, scheduler);
    net.forward(x, indices).pow(2).sum().backward();
  }
  if (pending_after_backward) *pending_after_backward = scheduler->pending();
  scheduler->finish();
  std::map<std::string, at::Tensor> grads;
  for (const auto& p : net.named_parameters()) grads[p.key()] = p.value().grad().clone();
  return grads;
}

TEST_F(LayersTest, ReverseOrderWeightGradientsAreIdentical) {
  SmallNet net;
  ImmediateScheduler immediate;
  DeferredScheduler reverse(DeferredScheduler::Order::reverse);
  std::vector<std::string> order;
  std::size_t parameters_ready = 0;
  reverse.on_ready([&](const WeightGradTask& task) {
    order.push_back(task.layer);
    for (const auto& p : task.parameters) {
      ASSERT_TRUE(p.grad().defined()) << "callback before the gradient exists";
      ++parameters_ready;
    }
  });
  const auto expected = gradients(net, &immediate);
  std::size_t pending = 0;
  net.zero_grad();
  const auto actual = gradients(net, &reverse, &pending);
  EXPECT_EQ(pending, 4u);  // conv, bn, fc, embedding: nothing ran during backward
  EXPECT_EQ(reverse.pending(), 0u);
  // Backward meets the layers as fc/embedding (either first), bn, conv; reversed: conv first.
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order.front(), "conv2d");
  EXPECT_EQ(order[1], "batch_norm2d");
  EXPECT_EQ(parameters_ready, net.parameters().size());
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, grad] : expected) {
    EXPECT_TRUE(torch::equal(actual.at(name), grad)) << name;
  }
}

TEST_F(LayersTest, WeightGradientsOnAWorkerThreadAreIdentical) {
  SmallNet net;
  ImmediateScheduler immediate;
  const auto expected = gradients(net, &immediate);
  std::thread::id worker;
  ThreadedScheduler threaded([&] { worker = std::this_thread::get_id(); });
  std::vector<std::thread::id> ran_on;
  threaded.on_ready([&](const WeightGradTask&) { ran_on.push_back(std::this_thread::get_id()); });
  net.zero_grad();
  const auto actual = gradients(net, &threaded);
  EXPECT_EQ(threaded.pending(), 0u);
  ASSERT_EQ(ran_on.size(), 4u);
  for (const auto& id : ran_on) EXPECT_EQ(id, worker);
  EXPECT_NE(worker, std::this_thread::get_id());
  for (const auto& [name, grad] : expected)
    EXPECT_TRUE(torch::equal(actual.at(name), grad)) << name;
  // A failing task is reported by finish(), on the submitting thread.
  threaded.submit({"failing", {}, [] { throw std::runtime_error("task failed"); }});
  EXPECT_THROW(threaded.finish(), std::runtime_error);
  threaded.finish();  // reported once
}

/// The device's side of StreamScheduler, written down: what waits for what, and on which
/// stream each task and its callbacks run.
class RecordedStreams : public StreamScheduler::Streams {
 public:
  explicit RecordedStreams(std::vector<std::string>& log) : log_(log) {}
  void side_waits_for_compute() override { log_.push_back("side waits"); }
  void on_side(const std::function<void()>& fn) override {
    log_.push_back("side begins");
    fn();
    log_.push_back("side ends");
  }
  void compute_waits_for_side() override { log_.push_back("compute waits"); }
  std::size_t record_on_side() override {
    log_.push_back("side records " + std::to_string(++recorded_));
    return recorded_;
  }
  bool side_passed(std::size_t number) override { return number <= passed; }
  std::size_t passed = 0;  ///< the side stream has passed the events up to this one

 private:
  std::vector<std::string>& log_;
  std::size_t recorded_ = 0;
};

TEST_F(LayersTest, WeightGradientsOnASecondStreamWaitForTheChainAndAreWaitedFor) {
  std::vector<std::string> log;
  auto recorded = std::make_unique<RecordedStreams>(log);
  RecordedStreams& device = *recorded;
  StreamScheduler streams(std::move(recorded));
  // What a task captured (a saved activation) stays alive until the side stream has passed the
  // event after the task, or the compute stream has waited for the side stream: only then may
  // the allocator give its block to another stream's work.
  auto captured_a = std::make_shared<int>(0), captured_b = std::make_shared<int>(0);
  std::weak_ptr<int> a_alive = captured_a, b_alive = captured_b;
  streams.on_ready([&](const WeightGradTask& task) { log.push_back("ready " + task.layer); });
  streams.submit({"a", {}, [&, keep = captured_a] { log.push_back("compute a"); }});
  captured_a.reset();
  streams.submit({"b", {}, [&, keep = captured_b] { log.push_back("compute b"); }});
  captured_b.reset();
  EXPECT_EQ(streams.held(), 2u);
  EXPECT_FALSE(a_alive.expired()) << "a task's captures went before the side stream read them";
  device.passed = 1;  // the side stream is past task a, not past b
  streams.submit({"c", {}, [&] { log.push_back("compute c"); }});
  EXPECT_TRUE(a_alive.expired());
  EXPECT_FALSE(b_alive.expired());
  EXPECT_EQ(streams.held(), 2u);
  streams.finish();
  EXPECT_EQ(streams.held(), 0u);
  EXPECT_TRUE(b_alive.expired());
  const std::vector<std::string> expected{
      "side waits", "side begins", "compute a", "ready a", "side ends", "side records 1",
      "side waits", "side begins", "compute b", "ready b", "side ends", "side records 2",
      "side waits", "side begins", "compute c", "ready c", "side ends", "side records 3",
      "compute waits"};
  EXPECT_EQ(log, expected);
}

TEST_F(LayersTest, ATaskThatThrowsOnTheSideStreamIsKeptUntilTheComputeStreamWaits) {
  // A task can fail after some of its kernels are enqueued on the side stream: what it
  // captured must outlive them as a finished task's does, or its blocks could go to the
  // compute stream's next allocation while the side stream still reads them.
  std::vector<std::string> log;
  auto streams = std::make_unique<StreamScheduler>(std::make_unique<RecordedStreams>(log));
  auto captured = std::make_shared<int>(0);
  std::weak_ptr<int> alive = captured;
  EXPECT_THROW(streams->submit({"a", {}, [&, keep = captured] {
                                  log.push_back("compute a");
                                  throw std::runtime_error("a kernel launch failed");
                                }}),
               std::runtime_error);
  captured.reset();
  EXPECT_EQ(streams->held(), 1u);
  EXPECT_FALSE(alive.expired()) << "the failed task's captures went with kernels in flight";
  streams.reset();  // the backward that threw unwinds: the compute stream waits, then they go
  EXPECT_TRUE(alive.expired());
  const std::vector<std::string> expected{"side waits", "side begins", "compute a",
                                          "side records 1", "compute waits"};
  EXPECT_EQ(log, expected);
}

/// A stand-in CUDA event: passed once its stream has passed its number; counts its queries.
struct StreamEvent {
  const std::size_t* stream_passed = nullptr;
  std::size_t number = 0;
  int* queries = nullptr;
  bool query() const {
    ++*queries;
    return *stream_passed >= number;
  }
};

TEST(PassedEventsTest, EventsAreNumberedInOrderAndForgottenOnceSeenPassed) {
  std::size_t stream_passed = 0;
  int queries = 0;
  PassedEvents<StreamEvent> events;
  for (std::size_t n = 1; n <= 3; ++n)
    EXPECT_EQ(events.add(StreamEvent{&stream_passed, n, &queries}), n);
  EXPECT_FALSE(events.passed(1));
  stream_passed = 2;
  EXPECT_TRUE(events.passed(2));
  EXPECT_EQ(events.kept(), 1u) << "events 1 and 2 are forgotten";
  queries = 0;
  EXPECT_TRUE(events.passed(1)) << "an event forgotten was passed";
  EXPECT_EQ(queries, 0) << "and is not asked again";
  EXPECT_FALSE(events.passed(3));
  EXPECT_FALSE(events.passed(4)) << "an event not added yet";
  stream_passed = 3;
  EXPECT_FALSE(events.passed(4)) << "an event not added yet, with every added one passed";
  EXPECT_EQ(events.kept(), 0u);
  EXPECT_TRUE(events.passed(3));
  EXPECT_EQ(events.add(StreamEvent{&stream_passed, 4, &queries}), 4u) << "numbers go on";
  EXPECT_FALSE(events.passed(4));
  stream_passed = 4;
  EXPECT_TRUE(events.passed(4));
}

TEST_F(LayersTest, WeightGradientsOnASecondCudaStreamAreIdentical) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device; this process sees none";
  // cuBLAS is bit-reproducible across streams only with a fixed workspace, read at its first
  // product in this process (ctest runs each test in a process of its own).
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  // cuDNN's deterministic algorithms: an atomics-based weight gradient would differ run to run.
  auto& context = at::globalContext();
  const bool deterministic = context.deterministicCuDNN(), benchmark = context.benchmarkCuDNN();
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
  SmallNet net;
  net.to(torch::kCUDA);
  ImmediateScheduler immediate;
  const auto expected = gradients(net, &immediate, nullptr, torch::kCUDA);
  StreamScheduler streams;
  net.zero_grad();
  const auto actual = gradients(net, &streams, nullptr, torch::kCUDA);
  context.setDeterministicCuDNN(deterministic);
  context.setBenchmarkCuDNN(benchmark);
  for (const auto& [name, grad] : expected)
    EXPECT_TRUE(torch::equal(actual.at(name), grad)) << name;
}

TEST_F(LayersTest, ASecondStreamWithoutAGpuIsRefusedSayingSo) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this process sees a CUDA device";
  try {
    StreamScheduler streams;
    FAIL() << "made a CUDA stream without a device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("sees none"), std::string::npos) << e.what();
  }
}

TEST_F(LayersTest, WeightGradientsWaitForTheDeferredScheduler) {
  Linear fc(LinearOptions(3, 2));
  DeferredScheduler deferred;
  {
    RuntimeGuard use(nullptr, &deferred);
    fc(torch::randn({4, 3})).sum().backward();
  }
  EXPECT_FALSE(fc->weight.grad().defined());
  EXPECT_EQ(deferred.pending(), 1u);
  deferred.finish();
  EXPECT_TRUE(fc->weight.grad().defined());
  EXPECT_TRUE(fc->bias.grad().defined());
  EXPECT_TRUE(torch::allclose(fc->bias.grad(), torch::full({2}, 4.0f)));
}

TEST_F(LayersTest, ReversedLayersKeepTheOrderOfEachLayersOwnTasks) {
  // A layer used three times submits three tasks; deferred and reversed (out-of-order backprop),
  // the layers come input-first but each layer's tasks keep their order, so its gradient adds
  // up as without deferring: bit for bit (float addition does not associate).
  torch::manual_seed(3);
  Linear shared(LinearOptions(6, 6)), head(LinearOptions(6, 2));
  const at::Tensor x = torch::randn({5, 6});
  auto grads = [&](GradScheduler* scheduler) {
    shared->weight.mutable_grad() = at::Tensor();
    shared->bias.mutable_grad() = at::Tensor();
    head->weight.mutable_grad() = at::Tensor();
    {
      RuntimeGuard use(nullptr, scheduler);
      head(torch::tanh(shared(torch::tanh(shared(torch::tanh(shared(x)))))))
          .pow(2)
          .sum()
          .backward();
    }
    scheduler->finish();
    return std::vector<at::Tensor>{shared->weight.grad().clone(), shared->bias.grad().clone(),
                                   head->weight.grad().clone()};
  };
  ImmediateScheduler immediate;
  DeferredScheduler reverse(DeferredScheduler::Order::reverse);
  std::vector<std::string> order;
  reverse.on_ready([&](const WeightGradTask& t) {
    order.push_back(t.parameters.front().is_same(head->weight) ? "head" : "shared");
  });
  const auto expected = grads(&immediate);
  const auto actual = grads(&reverse);
  EXPECT_EQ(order, (std::vector<std::string>{"shared", "shared", "shared", "head"}));
  for (std::size_t k = 0; k < expected.size(); ++k)
    EXPECT_TRUE(torch::equal(actual[k], expected[k])) << k;
}

TEST_F(LayersTest, TheSelectorDefersSomeTasksAndTheGateSeesEveryLayerBeforeItsForward) {
  // Out-of-order backprop: the selected layers' weight gradients wait for finish(), the others
  // run during backward; the gate is called with each layer's parameters before its forward.
  struct Gate : ParameterGate {
    std::vector<std::size_t> sizes;
    void before_forward(const std::vector<at::Tensor>& parameters) override {
      sizes.push_back(parameters.size());
    }
  } gate;
  Linear first(LinearOptions(3, 4)), second(LinearOptions(4, 2).bias(false));
  DeferredScheduler scheduler(DeferredScheduler::Order::reverse, [&](const WeightGradTask& t) {
    return t.parameters.front().is_same(first->weight);
  });
  {
    RuntimeGuard use(nullptr, &scheduler, nullptr, &gate);
    second(first(torch::randn({5, 3}))).sum().backward();
  }
  EXPECT_EQ(gate.sizes, (std::vector<std::size_t>{2, 1}));  // weight and bias; weight alone
  // A recurrent layer's step reads its weights too.
  LSTM lstm(LSTMOptions(3, 4));
  at::Tensor h = torch::zeros({1, 2, 4}), c = torch::zeros({1, 2, 4});
  {
    RuntimeGuard use(nullptr, nullptr, nullptr, &gate);
    lstm->step(torch::randn({2, 3}), h, c);
  }
  EXPECT_EQ(gate.sizes.back(), 4u);  // w_ih, w_hh, b_ih, b_hh
  EXPECT_EQ(scheduler.pending(), 1u);
  EXPECT_TRUE(second->weight.grad().defined());  // not selected: ran during backward
  EXPECT_FALSE(first->weight.grad().defined());
  scheduler.finish();
  EXPECT_TRUE(first->weight.grad().defined());
  EXPECT_TRUE(first->bias.grad().defined());
}

using engram::testing::CountingStore;

TEST_F(LayersTest, LayersSaveThroughTheStoreOfTheirForwardPass) {
  CountingStore store;
  DeferredScheduler deferred;
  Linear fc(LinearOptions(3, 2));
  at::Tensor loss;
  {
    RuntimeGuard use(&store, &deferred);
    loss = nn::relu(fc(torch::randn({4, 3})), /*inplace=*/true).sum();
  }
  EXPECT_EQ(store.saved[memory::SavedKind::activation], 1);   // linear input
  EXPECT_EQ(store.saved[memory::SavedKind::relu_output], 1);  // relu output
  EXPECT_EQ(store.saved[memory::SavedKind::parameter], 2);    // weight, bias
  loss.backward();  // outside the guard: the forward's runtime still applies
  EXPECT_EQ(deferred.pending(), 1u);
  deferred.finish();
  EXPECT_TRUE(fc->weight.grad().defined());
}

/// The message of what `call` throws (a c10::Error's without the backtrace torch appends).
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST_F(LayersTest, ModifyingASavedActivationInPlaceIsAnError) {
  Linear fc(LinearOptions(3, 2));
  const at::Tensor x = torch::randn({4, 3});
  const at::Tensor loss = fc(x).sum();
  x.add_(1.0);
  const std::string error = error_of([&] { loss.backward(); });
  EXPECT_NE(error.find("a tensor saved for backward was modified in place"), std::string::npos)
      << error;
}

TEST_F(LayersTest, ASavedTensorCannotBeLoadedAfterRelease) {
  memory::PlainStore store;
  auto saved = store.save(torch::ones({3}), memory::SavedKind::activation);
  EXPECT_EQ(saved->stored_bytes(), 12);
  EXPECT_TRUE(torch::equal(saved->load(), torch::ones({3})));
  saved->release();
  EXPECT_EQ(saved->stored_bytes(), 0);
  EXPECT_THROW(saved->load(), std::logic_error);
}

// ---------------------------------------------------------------------------------------------
// The compressing store (memory/CompressingStore.h) under the layers.

// conv -> in-place relu -> conv: the relu output is saved by the ReLU and by the second conv.
struct ConvReluConv {
  Conv2d first{Conv2dOptions(3, 8, 3).padding(1)};
  Conv2d second{Conv2dOptions(8, 4, 3).padding(1)};
  at::Tensor x = torch::randn({2, 3, 12, 12});

  /// The loss of a forward pass under `store`; `relu_output` receives a weak reference to the
  /// ReLU output's storage, `relu_bytes` its size.
  at::Tensor forward(memory::ActivationStore* store,
                     c10::weak_intrusive_ptr<c10::StorageImpl>* relu_output = nullptr,
                     std::int64_t* relu_bytes = nullptr) {
    RuntimeGuard use(store, nullptr);
    const at::Tensor h = nn::relu(first(x), /*inplace=*/true);
    if (relu_output) *relu_output = h.storage().getWeakStorageImpl();
    if (relu_bytes) *relu_bytes = static_cast<std::int64_t>(h.nbytes());
    return second(h).sum();
  }
};

TEST_F(LayersTest, TheDenseReluOutputDiesWithTheForwardPassUnderTheCompressingStore) {
  auto& tracker = memory::MemoryTracker::install();
  ConvReluConv net;
  memory::PlainStore plain;
  memory::CompressingStore compressing;
  for (memory::ActivationStore* store :
       std::vector<memory::ActivationStore*>{&plain, &compressing}) {
    SCOPED_TRACE(store->name());
    const bool compressed = store == &compressing;
    c10::weak_intrusive_ptr<c10::StorageImpl> dense(c10::intrusive_ptr<c10::StorageImpl>{});
    std::int64_t dense_bytes = 0;
    const std::int64_t before = tracker.live_bytes();
    at::Tensor loss = net.forward(store, &dense, &dense_bytes);
    // What forward leaves alive for backward: the ReLU output, dense or compressed (the input and
    // the weights existed before), and the loss.
    const std::int64_t held =
        tracker.live_bytes() - before - static_cast<std::int64_t>(loss.nbytes());
    if (compressed) {
      EXPECT_TRUE(dense.expired()) << "the dense ReLU output outlived the forward pass";
      EXPECT_EQ(compressing.live_handles(), 1);
      EXPECT_EQ(held, compressing.stats().compressed_bytes);
      EXPECT_LT(held, dense_bytes * 6 / 10);  // about half the elements are zero
    } else {
      EXPECT_FALSE(dense.expired());
      EXPECT_EQ(held, dense_bytes);
    }
    loss.backward();
    EXPECT_EQ(compressing.live_handles(), 0);
  }
  EXPECT_EQ(compressing.stats().compressed_tensors, 1);
  EXPECT_EQ(compressing.stats().shared_saves, 1);  // the second conv's input
}

TEST_F(LayersTest, GradientsAreBitIdenticalUnderTheCompressingStore) {
  ConvReluConv net;
  const auto run = [&net](memory::ActivationStore* store) {
    for (auto* conv : {&net.first, &net.second}) (*conv)->zero_grad();
    net.forward(store).backward();
    std::vector<at::Tensor> grads;
    for (auto* conv : {&net.first, &net.second}) {
      for (const auto& p : (*conv)->parameters()) grads.push_back(p.grad().clone());
    }
    return grads;
  };
  memory::PlainStore plain;
  const auto expected = run(&plain);
  for (const bool cache : {false, true}) {
    memory::CompressingStore compressing(memory::CompressingStoreOptions{cache});
    const auto actual = run(&compressing);
    ASSERT_EQ(actual.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(torch::equal(actual[i], expected[i])) << "parameter " << i;
    }
    EXPECT_EQ(compressing.stats().decompressions, cache ? 1 : 2);
  }
}

TEST_F(LayersTest, ModifyingACompressedReluOutputInPlaceIsAnError) {
  ConvReluConv net;
  memory::CompressingStore compressing;
  at::Tensor loss, h;
  {
    RuntimeGuard use(&compressing, nullptr);
    h = nn::relu(net.first(net.x), /*inplace=*/true);
    loss = net.second(h).sum();
  }
  h.mul_(2.0);
  try {
    loss.backward();
    FAIL() << "backward used a modified ReLU output";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place"), std::string::npos) << e.what();
  }
}

TEST_F(LayersTest, AComputedWeightIsRejected) {
  const at::Tensor w = leaf(torch::randn({2, 3}));
  EXPECT_THROW(nn::linear(torch::randn({4, 3}), w * 2.0), c10::Error);
  // Without gradients a computed weight is fine.
  torch::NoGradGuard no_grad;
  EXPECT_EQ(nn::linear(torch::randn({4, 3}), w * 2.0).sizes(), (std::vector<int64_t>{4, 2}));
}

TEST_F(LayersTest, ShapeErrorsAreClear) {
  // Each names the shape it expected and the one it got.
  Linear fc(LinearOptions(3, 2));
  const std::string linear = error_of([&] { fc(torch::randn({4, 5})); });
  EXPECT_NE(linear.find("nn::linear: input rows of width 3 expected, got shape [4, 5]"),
            std::string::npos)
      << linear;
  Conv2d conv(Conv2dOptions(3, 2, 3));
  const std::string conv2d = error_of([&] { conv(torch::randn({1, 2, 5, 5})); });
  EXPECT_NE(conv2d.find("nn::conv2d: input [N, 3, H, W] expected, got [1, 2, 5, 5]"),
            std::string::npos)
      << conv2d;
  const std::string sizes = error_of([] { Linear(LinearOptions(0, 2)); });
  EXPECT_NE(sizes.find("nn::Linear: sizes must be positive"), std::string::npos) << sizes;
}

}  // namespace
}  // namespace engram::nn
