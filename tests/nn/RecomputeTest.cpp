// Recomputed units (nn/Recompute.h): gradients and BatchNorm statistics bit-identical to the plain
// run, the random state replayed, only the unit's input kept.
#include "nn/BatchNorm2d.h"
#include "nn/Linear.h"
#include "nn/Recompute.h"
#include "nn/Runtime.h"
#include "resnet/ResNet.h"

#include "tests/support/CountingStore.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <thread>

namespace engram::nn {
namespace {

using resnet::ResNet;
using resnet::ResNetOptions;

class RecomputeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(0);
  }
};

ResNet small_resnet() {
  torch::manual_seed(7);
  return ResNet(ResNetOptions().widths({4, 8}).num_classes(3));
}

// One training step's forward and backward, each unit plain or recomputed.
void step(ResNet& net, bool recomputed) {
  torch::manual_seed(8);
  const at::Tensor images = torch::randn({4, 3, 6, 6});
  const at::Tensor labels = torch::tensor({0, 2, 1, 2}, torch::kLong);
  at::Tensor h = images;
  for (auto& unit : net->units()) {
    if (recomputed) {
      // By value: the unit runs again during backward, after units() and this loop are gone.
      h = recompute([unit](const at::Tensor& x) mutable { return unit.forward(x); }, h,
                    unit.ptr()->parameters());
    } else {
      h = unit.forward(h);
    }
  }
  torch::nn::functional::cross_entropy(net->head(h), labels).backward();
}

TEST_F(RecomputeTest, ResNetGradientsAndRunningStatisticsAreBitIdentical) {
  ResNet plain = small_resnet(), recomputed = small_resnet();
  for (int i = 0; i < 2; ++i) {  // twice: the running statistics move twice, not four times
    plain->zero_grad();
    recomputed->zero_grad();
    step(plain, false);
    step(recomputed, true);
  }
  const auto expected = plain->named_parameters();
  for (const auto& p : recomputed->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(torch::equal(p.value().grad(), expected[p.key()].grad())) << p.key();
  }
  const auto buffers = plain->named_buffers();
  for (const auto& b : recomputed->named_buffers()) {
    EXPECT_TRUE(torch::equal(b.value(), buffers[b.key()])) << b.key();
  }
  EXPECT_EQ(recomputed->stem->bn->num_batches_tracked.item<int64_t>(), 2);
}

TEST_F(RecomputeTest, TheRerunDrawsTheSameRandomNumbers) {
  Linear fc(LinearOptions(6, 3));
  const auto unit = [&fc](const at::Tensor& x) { return fc(torch::dropout(x, 0.5, true)); };
  const at::Tensor x = torch::randn({5, 6});
  const at::Tensor probe = torch::randn({5, 3});

  torch::manual_seed(21);
  (unit(x) * probe).sum().backward();
  const at::Tensor expected = fc->weight.grad().clone();
  fc->zero_grad();

  torch::manual_seed(21);
  const at::Tensor y = recompute(unit, x, fc->parameters());
  torch::manual_seed(99);  // whatever runs between forward and backward draws other numbers
  (y * probe).sum().backward();
  EXPECT_TRUE(torch::equal(fc->weight.grad(), expected));
}

using engram::testing::CountingStore;

TEST_F(RecomputeTest, ForwardKeepsOnlyTheUnitsInput) {
  Linear a(LinearOptions(4, 4)), b(LinearOptions(4, 4));
  std::vector<at::Tensor> params = a->parameters();
  for (const auto& p : b->parameters()) params.push_back(p);
  CountingStore store;
  at::Tensor loss;
  {
    RuntimeGuard use(&store, nullptr);
    const at::Tensor y = recompute([&](const at::Tensor& x) { return b(torch::relu(a(x))); },
                                   torch::randn({3, 4}), params);
    EXPECT_EQ(store.saved[memory::SavedKind::activation], 1);
    loss = y.sum();
  }
  loss.backward();
  // The rerun saved the layers' inputs (2), under the store of the forward pass.
  EXPECT_EQ(store.saved[memory::SavedKind::activation], 3);
  EXPECT_TRUE(a->weight.grad().defined());
  EXPECT_TRUE(b->bias.grad().defined());
}

TEST_F(RecomputeTest, AnInputThatNeedsAGradientGetsIt) {
  Linear fc(LinearOptions(4, 2));
  const at::Tensor x1 = torch::randn({3, 4}).set_requires_grad(true);
  const at::Tensor x2 = x1.detach().clone().set_requires_grad(true);
  fc(x1).pow(2).sum().backward();
  recompute([&](const at::Tensor& x) { return fc(x); }, x2, fc->parameters())
      .pow(2)
      .sum()
      .backward();
  EXPECT_TRUE(torch::equal(x1.grad(), x2.grad()));
  // An identity unit returns a new tensor.
  const at::Tensor y = recompute([](const at::Tensor& x) { return x; }, x2, {});
  EXPECT_FALSE(y.is_same(x2));
}

/// Counts the sums it is asked for; one replica, so each sum is the tensor itself.
struct CountingReplicas : ReplicaSum {
  int calls = 0;
  void sum(at::Tensor&) override { ++calls; }
};

TEST_F(RecomputeTest, TheRerunKeepsTheFirstRunsReplicasOnAnotherBackwardThread) {
  // On CUDA the autograd engine runs backward on its own device thread, whose runtime is the
  // default one; the rerun must still take batch norm's synchronised path, as its first run did.
  // Here backward runs on a thread of its own on the CPU, which is the same situation.
  BatchNorm2d bn(BatchNorm2dOptions(3));
  const at::Tensor x = torch::randn({4, 3, 5, 5});
  CountingReplicas replicas;
  at::Tensor loss;
  {
    RuntimeGuard use(nullptr, nullptr, &replicas);
    loss = recompute([&](const at::Tensor& in) { return bn(in); }, x, bn->parameters()).sum();
  }
  EXPECT_EQ(replicas.calls, 2);  // the forward's sums and squares
  std::thread backward([&] { loss.backward(); });
  backward.join();
  // The rerun's sums and squares, and its backward's one sum.
  EXPECT_EQ(replicas.calls, 5);
  EXPECT_TRUE(bn->weight.grad().defined());
}

}  // namespace
}  // namespace engram::nn
