// A network cut into units (nn/Units.h) under every plan: recompute, swap, recompute+swap, with
// and without ReLU compression, gradients and BatchNorm statistics bit-identical to the plain
// network; the swap store's triggers fire; the memory of a step really drops.
#include "memory/CompressingStore.h"
#include "memory/MemoryTracker.h"
#include "memory/SwapStore.h"
#include "nn/Runtime.h"
#include "nn/Units.h"
#include "resnet/ResNet.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>

namespace engram::nn {
namespace {

using memory::UnitChoice;
using resnet::ResNet;
using resnet::ResNetOptions;
using resnet::resnet_units;

class UnitsTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

ResNet small_resnet() {
  torch::manual_seed(11);
  return ResNet(ResNetOptions().widths({4, 8}).num_classes(3));
}

/// Two training steps' gradients (the last step's) and the buffers after them, each unit run
/// under `plan` (empty: the plain network) with `store` as the activation store.
struct StepResult {
  std::vector<at::Tensor> grads, buffers;
  UnitTimings timings;
};

StepResult run(const UnitPlan& plan, memory::ActivationStore* store, memory::SwapStore* swap) {
  ResNet net = small_resnet();
  StepResult r;
  for (int step = 0; step < 2; ++step) {
    net->zero_grad();
    torch::manual_seed(12 + step);
    const at::Tensor images = torch::randn({4, 3, 8, 8});
    const at::Tensor labels = torch::tensor({0, 2, 1, 2}, torch::kLong);
    std::unique_ptr<UnitRunner> runner;
    {
      RuntimeGuard use(store, nullptr);
      at::Tensor logits;
      if (plan.empty()) {
        logits = net(images);
      } else {
        runner = std::make_unique<UnitRunner>(plan, swap);
        logits = net->head(runner->forward(resnet_units(net), images));
      }
      // Every write done before backward (else a tensor loaded before its write began stays in
      // memory, which is right but leaves nothing to check).
      if (swap != nullptr) swap->wait_for_transfers();
      torch::nn::functional::cross_entropy(logits, labels).backward();
    }
    if (runner) r.timings = runner->timings();
  }
  for (const auto& p : net->parameters()) r.grads.push_back(p.grad().clone());
  for (const auto& b : net->buffers()) r.buffers.push_back(b.clone());
  return r;
}

void expect_identical(const StepResult& a, const StepResult& b, const std::string& what) {
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (std::size_t i = 0; i < a.grads.size(); ++i) {
    EXPECT_TRUE(torch::equal(a.grads[i], b.grads[i])) << what << ": gradient " << i;
  }
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (std::size_t i = 0; i < a.buffers.size(); ++i) {
    EXPECT_TRUE(torch::equal(a.buffers[i], b.buffers[i])) << what << ": buffer " << i;
  }
}

TEST_F(UnitsTest, EveryPlanGivesTheSameGradientsAndStatistics) {
  const StepResult plain = run({}, nullptr, nullptr);
  const std::size_t n = resnet_units(small_resnet()).size();
  ASSERT_EQ(n, 5u);  // stem and two blocks per stage
  const std::vector<std::pair<std::string, UnitPlan>> plans{
      {"keep", UnitPlan(n)},
      {"recompute", UnitPlan(n, UnitChoice{true, false})},
      {"swap", UnitPlan(n, UnitChoice{false, true})},
      {"recompute+swap", UnitPlan(n, UnitChoice{true, true})},
      {"mixed", UnitPlan{{true, false}, {false, true}, {}, {true, true}, {false, true}}}};
  for (const auto& [name, plan] : plans) {
    memory::SwapStore swap;
    expect_identical(run(plan, &swap, &swap), plain, name);
    if (name != "keep" && name != "recompute") {
      EXPECT_GT(swap.stats().swapped_out_bytes, 0) << name;
      EXPECT_EQ(swap.stats().swapped_out_bytes, swap.stats().swapped_in_bytes) << name;
    }
  }
  // ReLU compression under the swap store: the compressed buffers move.
  memory::CompressingStore compressing(memory::CompressingStoreOptions{true});
  memory::SwapStore swap(memory::SwapStoreOptions{&compressing, "", 0});
  expect_identical(run(UnitPlan(n, UnitChoice{true, true}), &swap, &swap), plain, "all");
  EXPECT_GT(compressing.stats().compressed_tensors, 0);
  EXPECT_GT(swap.stats().swapped_out_bytes, 0);
}

TEST_F(UnitsTest, BackwardBeginsFiresForEveryUnitInReverseOrder) {
  memory::SwapStore swap;
  const std::size_t n = 5;
  // Every unit's tensors come back when the next unit's backward begins (the last unit's at the
  // end of forward): a schedule, so nothing needs reading on demand.
  std::vector<std::vector<int>> prefetch(n + 1);
  for (std::size_t u = 0; u < n; ++u) prefetch[u + 1].push_back(static_cast<int>(u));
  swap.set_prefetch_schedule(prefetch);
  const StepResult r = run(UnitPlan(n, UnitChoice{false, true}), &swap, &swap);
  for (std::size_t u = 0; u + 1 < n; ++u) {
    EXPECT_GT(r.timings.backward_begin_ns[u], r.timings.backward_begin_ns[u + 1]) << u;
  }
  EXPECT_GT(r.timings.backward_begin_ns[n - 1], r.timings.forward_end_ns);
  EXPECT_GT(swap.stats().prefetched, 0);
  EXPECT_EQ(swap.stats().swapped_out_bytes, swap.stats().swapped_in_bytes);
}

TEST_F(UnitsTest, RecomputedAndSwappedUnitsHoldLessAtTheEndOfForward) {
  auto& tracker = memory::MemoryTracker::install();
  const auto end_of_forward_bytes = [&](const UnitPlan& plan) {
    ResNet net = small_resnet();
    memory::SwapStore swap;
    const at::Tensor images = torch::randn({8, 3, 16, 16});
    UnitRunner runner(plan, &swap);
    RuntimeGuard use(&swap, nullptr);
    const std::int64_t before = tracker.live_bytes();
    at::Tensor out = runner.forward(resnet_units(net), images);
    swap.wait_for_transfers();
    const std::int64_t held = tracker.live_bytes() - before;
    out.sum().backward();
    return held;
  };
  const std::size_t n = 5;
  const std::int64_t kept = end_of_forward_bytes(UnitPlan(n));
  const std::int64_t recomputed = end_of_forward_bytes(UnitPlan(n, UnitChoice{true, false}));
  const std::int64_t swapped = end_of_forward_bytes(UnitPlan(n, UnitChoice{false, true}));
  const std::int64_t both = end_of_forward_bytes(UnitPlan(n, UnitChoice{true, true}));
  EXPECT_LT(recomputed, kept / 2);
  EXPECT_LT(swapped, kept / 4);  // only the last unit's output (the head's input) stays
  EXPECT_LT(both, recomputed);
}

TEST_F(UnitsTest, PlansMustFitTheUnits) {
  ResNet net = small_resnet();
  EXPECT_THROW(UnitRunner(UnitPlan(5, UnitChoice{false, true}), nullptr), std::invalid_argument);
  UnitRunner runner(UnitPlan(3), nullptr);
  EXPECT_THROW(runner.forward(resnet_units(net), torch::randn({1, 3, 8, 8})),
               std::invalid_argument);
  // Outside gradient mode the units just run.
  torch::NoGradGuard no_grad;
  UnitRunner all(UnitPlan(5, UnitChoice{true, false}), nullptr);
  EXPECT_TRUE(torch::equal(net->head(all.forward(resnet_units(net), torch::ones({1, 3, 8, 8}))),
                           net(torch::ones({1, 3, 8, 8}))));
}

}  // namespace
}  // namespace engram::nn

namespace engram::nn {
namespace {

TEST_F(UnitsTest, AProbeGivesTheLiveBytesAndIsWaitedForAtEveryClockReading) {
  // A device workload's runner reads live bytes from the device's tracker and synchronizes the
  // device before each clock reading (trainer/MemoryTechniques.cpp's probe on CUDA): here a
  // counter for the bytes, and a count of the synchronizations.
  ResNet net = small_resnet();
  const auto units = resnet_units(net);
  std::int64_t bytes = 1000;
  int waits = 0;
  UnitProbe probe{[&bytes] { return bytes += 10; }, [&waits] { ++waits; }};
  UnitRunner runner(UnitPlan(units.size()), nullptr, probe);
  const at::Tensor logits = net->head(runner.forward(units, torch::randn({2, 3, 8, 8})));
  const std::size_t n = units.size();
  UnitTimings t = runner.timings();
  EXPECT_EQ(t.live_bytes_before, 1010);
  for (std::size_t u = 0; u < n; ++u)
    EXPECT_EQ(t.live_bytes_after[u], 1010 + 10 * static_cast<std::int64_t>(u + 1)) << u;
  EXPECT_EQ(waits, static_cast<int>(2 * n + 1));  // each unit's start and end, forward's end
  logits.sum().backward();
  EXPECT_EQ(waits, static_cast<int>(3 * n + 1));  // and each unit's backward begins
  t = runner.timings();
  for (std::size_t u = 0; u < n; ++u) EXPECT_GE(t.backward_begin_ns[u], 0) << u;
}

}  // namespace
}  // namespace engram::nn
