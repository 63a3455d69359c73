// The ResNet workload of the memory benchmark: synthetic examples that do not depend on the batch
// they are drawn in, a trainable loss, clear errors.
#include "resnet/ResNetWorkload.h"

#include "memory/CompressingStore.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/DeviceArenaReuse.h"
#include "memory/MemoryTracker.h"
#include "memory/SwapStore.h"
#include "memory/UnitPlanner.h"
#include "trainer/Device.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/Trainer.h"
#include "tests/support/DeviceRuns.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <stdexcept>

namespace engram::resnet {
namespace {

ResNet tiny_resnet() { return ResNet(ResNetOptions().widths({4, 8})); }

SyntheticImages tiny_images() {
  SyntheticImages images;
  images.num_examples = 5;
  images.image_size = 6;
  return images;
}

TEST(ResNetWorkloadTest, AnExampleIsTheSameInEveryBatch) {
  torch::manual_seed(0);
  ResNetWorkload workload(tiny_resnet(), tiny_images());
  EXPECT_EQ(workload.num_examples(), 5u);
  const auto [images, labels] = workload.batch({0, 3, 4});
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{3, 3, 6, 6}));
  EXPECT_EQ(labels.sizes(), (std::vector<int64_t>{3}));
  EXPECT_TRUE(labels.ge(0).all().item<bool>() && labels.lt(10).all().item<bool>());
  const auto [again, again_labels] = workload.batch({4, 3});
  EXPECT_TRUE(torch::equal(again[0], images[2]));
  EXPECT_TRUE(torch::equal(again[1], images[1]));
  EXPECT_EQ(again_labels[0].item<int64_t>(), labels[2].item<int64_t>());
  EXPECT_FALSE(torch::equal(images[0], images[1]));
  // Standard normal pixels.
  const auto [all, all_labels] = workload.batch({0, 1, 2, 3, 4});
  EXPECT_NEAR(all.mean().item<double>(), 0.0, 0.15);
  EXPECT_NEAR(all.std().item<double>(), 1.0, 0.15);
  // Another seed, other images.
  SyntheticImages other = tiny_images();
  other.seed = 2;
  ResNetWorkload reseeded(tiny_resnet(), other);
  EXPECT_FALSE(torch::equal(reseeded.batch({0}).first[0], images[0]));
}

TEST(ResNetWorkloadTest, ForwardGivesATrainableLoss) {
  torch::manual_seed(0);
  ResNetWorkload workload(tiny_resnet(), tiny_images());
  const trainer::StepOutput out = workload.forward(*workload.make_batch({0, 1, 2}));
  ASSERT_EQ(out.loss.dim(), 0);
  EXPECT_TRUE(std::isfinite(out.loss.item<double>()));
  EXPECT_EQ(out.metrics.count("accuracy"), 1u);
  out.loss.backward();
  for (const auto& p : workload.parameters()) EXPECT_TRUE(p.grad().defined());
}

// Every convolution can change algorithm (lower-memory replacement), and a plan that fails leaves
// each one on its default: the session has no workload of its own to plan on here.
TEST(ResNetWorkloadTest, AFailedAlgorithmPlanLeavesEveryLayerOnItsDefault) {
  memory::MemoryTracker::install();
  torch::manual_seed(0);
  ResNetWorkload workload(tiny_resnet(), tiny_images());
  const auto layers = workload.algorithm_layers();
  ASSERT_FALSE(layers.empty());
  EXPECT_EQ(layers.front().name, "stem.conv");
  trainer::TrainingOptions options;
  options.batch = 5;
  options.threads = 1;
  options.memory.techniques = {"algo"};
  options.memory.budget_bytes = 1;  // below anything: every replacement is tried, then it throws
  EXPECT_THROW(trainer::TrainingSession(workload, options), memory::InfeasibleBudget);
  for (const auto& l : layers) EXPECT_EQ(l.layer->algorithm(), "default") << l.name;
}

TEST(ResNetWorkloadTest, DataThatDoesNotFitIsRejected) {
  SyntheticImages images = tiny_images();
  images.num_classes = 7;
  EXPECT_THROW(ResNetWorkload(tiny_resnet(), images), std::invalid_argument);
  images = tiny_images();
  images.num_examples = 0;
  EXPECT_THROW(ResNetWorkload(tiny_resnet(), images), std::invalid_argument);
  ResNetWorkload workload(tiny_resnet(), tiny_images());
  EXPECT_THROW(workload.batch({5}), std::out_of_range);
}

// On a GPU: three SGD steps (cuDNN's convolutions, TF32 off) land where the CPU's land, and with
// --deterministic two CUDA runs are bit for bit the same.
TEST(ResNetWorkloadTest, OnCudaAFewStepsMatchTheCpuAndDeterministicRunsRepeat) {
  ENGRAM_SKIP_WITHOUT_CUDA();
  trainer::TrainingOptions options;
  options.optimizer = "sgd";
  options.learning_rate = 0.05;
  options.momentum = 0.9;
  const std::vector<std::size_t> batch{0, 1, 2, 3};
  auto run = [&](const std::string& device, bool deterministic) {
    torch::manual_seed(0);
    ResNetWorkload workload(tiny_resnet(), tiny_images());
    options.deterministic = deterministic;
    return testing::run_on(workload, options, device, batch, 3);
  };
  const auto cpu = run("cpu", false);
  const auto gpu = run("cuda", true);
  const auto [loss, parameter] = testing::largest_differences(cpu, gpu, "resnet");
  EXPECT_LT(loss, 1e-4);
  EXPECT_LT(parameter, 1e-4);
  const auto again = run("cuda", true);
  for (std::size_t i = 0; i < gpu.parameters.size(); ++i)
    EXPECT_TRUE(torch::equal(gpu.parameters[i], again.parameters[i])) << "parameter " << i;
  EXPECT_EQ(gpu.losses, again.losses);
}

/// A few deterministic SGD steps of the tiny ResNet on the GPU (TF32 off) with `techniques`:
/// `each_step` sees every step's output and `at_end` the session after the last step, while it
/// still holds its memory techniques.
testing::DeviceRun train_tiny_on_cuda(
    const std::vector<std::string>& techniques, int steps,
    const std::function<void(const trainer::StepOutput&)>& each_step = {},
    const std::function<void(trainer::TrainingSession&)>& at_end = {}) {
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  trainer::TrainingOptions options;
  options.optimizer = "sgd";
  options.learning_rate = 0.05;
  options.deterministic = true;
  options.device = "cuda";
  const std::vector<std::size_t> batch{0, 1, 2, 3};
  options.batch = static_cast<int>(batch.size());
  options.memory.techniques = techniques;
  torch::manual_seed(0);
  ResNetWorkload workload(tiny_resnet(), tiny_images());
  testing::DeviceRun run;
  {
    trainer::TrainingSession session(workload, options);
    for (int s = 0; s < steps; ++s) {
      const trainer::StepOutput out = session.step(batch);
      run.losses.push_back(out.loss.item<double>());
      if (each_step) each_step(out);
    }
    if (at_end) at_end(session);
  }
  for (const auto& p : workload.parameters()) run.parameters.push_back(p.detach().cpu().clone());
  return run;
}

/// The same losses and parameters, bit for bit.
void expect_bit_identical(const testing::DeviceRun& expected, const testing::DeviceRun& actual) {
  ASSERT_EQ(expected.parameters.size(), actual.parameters.size());
  for (std::size_t i = 0; i < expected.parameters.size(); ++i)
    EXPECT_TRUE(torch::equal(expected.parameters[i], actual.parameters[i])) << "parameter " << i;
  EXPECT_EQ(expected.losses, actual.losses);
}

// ReLU compression, recompute and swap on device memory: the ReLU outputs kept as bitmap plus
// values on the GPU (memory/cuda/'s kernels) and decompressed there for backward, every unit
// rerun with the device's generator replayed and batch norm's statistics left alone, every
// unit's saved tensors copied to pinned host memory and back (memory/PinnedCopy.h); lossless, so
// three deterministic CUDA steps land bit for bit where the plain store's land. Each technique
// must also have acted: ReLU outputs compressed, units planned for recompute, bytes swapped out
// and back in.
TEST(ResNetWorkloadTest, OnCudaReluCompressionRecomputeAndSwapTrainBitForBitAsNone) {
  ENGRAM_SKIP_WITHOUT_CUDA();
  struct Acted {
    bool relu = false, recompute = false, swap = false;
    std::int64_t compressed_tensors = 0, recomputed_units = 0;
    std::int64_t swapped_out_bytes = 0, swapped_in_bytes = 0;
  };
  const auto what_acted = [](Acted& a) {
    return [&a](trainer::TrainingSession& session) {
      trainer::MemoryTechniques& memory = session.memory();
      if (const memory::CompressingStore* store = memory.compressing()) {
        a.relu = true;
        a.compressed_tensors = store->stats().compressed_tensors;
      }
      a.recompute = memory.recompute();
      if (const nn::UnitRunner* runner = memory.runner())
        for (const nn::UnitTreatment& t : runner->plan()) a.recomputed_units += t.recompute;
      a.swap = memory.swap();
      if (const memory::SwapStore* store = memory.swap_store()) {
        a.swapped_out_bytes = store->stats().swapped_out_bytes;
        a.swapped_in_bytes = store->stats().swapped_in_bytes;
      }
    };
  };
  Acted plain;
  const testing::DeviceRun none = train_tiny_on_cuda({}, 3, {}, what_acted(plain));
  EXPECT_FALSE(plain.relu || plain.recompute || plain.swap);
  for (const std::vector<std::string> techniques :
       {std::vector<std::string>{"relu"}, {"recompute"}, {"relu", "recompute"}, {"swap"},
        {"relu", "swap"}, {"all"}}) {
    std::string name;
    for (const auto& t : techniques) name += (name.empty() ? "" : "+") + t;
    SCOPED_TRACE(name);
    Acted acted;
    expect_bit_identical(none, train_tiny_on_cuda(techniques, 3, {}, what_acted(acted)));
    const auto has = [&](const std::string& t) {
      return name == "all" || std::find(techniques.begin(), techniques.end(), t) !=
                                  techniques.end();
    };
    EXPECT_EQ(acted.relu, has("relu"));
    EXPECT_EQ(acted.recompute, has("recompute"));
    EXPECT_EQ(acted.swap, has("swap"));
    if (acted.relu) EXPECT_GT(acted.compressed_tensors, 0) << "no ReLU output was compressed";
    if (acted.recompute) EXPECT_GT(acted.recomputed_units, 0) << "no unit was rerun";
    if (acted.swap) {
      EXPECT_GT(acted.swapped_out_bytes, 0) << "nothing was swapped out";
      EXPECT_GT(acted.swapped_in_bytes, 0) << "nothing came back";
    }
  }
}

// Fixed-structure reuse on device memory (memory/DeviceArenaReuse.h): once the first steps have
// allocated the gradients and the optimizer's state, each step's CUDA allocations are served at
// their planned offsets in one device arena, and training lands bit for bit where the caching
// allocator's does, alone and with ReLU compression (whose data-dependent buffers bypass the
// plan). The session's end gives the arena back to the caching allocator.
TEST(ResNetWorkloadTest, OnCudaReuseServesTheStepsFromADeviceArenaBitForBitAsNone) {
  ENGRAM_SKIP_WITHOUT_CUDA();
  constexpr int kSteps = 5;
  const testing::DeviceRun none = train_tiny_on_cuda({}, kSteps);
  for (const std::vector<std::string> techniques :
       {std::vector<std::string>{"reuse"}, {"relu", "reuse"}}) {
    SCOPED_TRACE(techniques.size() == 1 ? "reuse" : "relu+reuse");
    std::vector<double> hit_rates;
    std::int64_t arena_bytes = 0;  // while the session lived
    const testing::DeviceRun reused = train_tiny_on_cuda(
        techniques, kSteps,
        [&](const trainer::StepOutput& out) {
          const auto rate = out.metrics.find("reuse_hit_rate");
          hit_rates.push_back(rate == out.metrics.end() ? -1.0 : rate->second);
        },
        [&](trainer::TrainingSession&) {
          if (const auto* reuse = memory::DeviceArenaReuse::installed())
            arena_bytes = reuse->capacity_bytes();
        });
    expect_bit_identical(none, reused);
    EXPECT_GT(arena_bytes, 0) << "the session held a device arena";
    ASSERT_EQ(hit_rates.size(), static_cast<std::size_t>(kSteps));
    EXPECT_GT(hit_rates.back(), 0.5) << "the last step came mostly from the arena";
    ASSERT_NE(memory::DeviceArenaReuse::installed(), nullptr);
    EXPECT_EQ(memory::DeviceArenaReuse::installed()->capacity_bytes(), 0)
        << "the session's end gives the arena back";
  }
}

// A device-memory cap is real: the caching allocator may not hold more than it, so a cap well
// below the plain step's live peak runs it out of memory, while recompute planned under the same
// cap (the budget it leaves beside the step's state, in live and in reserved bytes) trains with
// its live peak under the cap. Activations of hundreds of MiB, so that the allocator's segment
// sizes (2 and 20 MiB) are small beside them. When the session ends the cap is lifted.
TEST(ResNetWorkloadTest, OnCudaACapBelowThePlainStepRunsOutOfMemoryAndRecomputePlannedUnderItFits) {
  ENGRAM_SKIP_WITHOUT_CUDA();
  const c10::Device cuda(c10::kCUDA, 0);
  memory::CudaMemoryTracker& tracker = memory::CudaMemoryTracker::install(0);
  ASSERT_TRUE(memory::CudaMemoryTracker::hooked()) << memory::CudaMemoryTracker::hook_status();
  SyntheticImages images;
  images.num_examples = 128;
  images.image_size = 32;
  std::vector<std::size_t> batch(128);
  std::iota(batch.begin(), batch.end(), 0);
  trainer::TrainingOptions options;
  options.batch = 128;
  options.optimizer = "sgd";
  options.momentum = 0;
  options.device = "cuda";
  // The live peak of a session's second step.
  auto peak_of = [&](const std::vector<std::string>& techniques, const std::string& cap) {
    torch::manual_seed(0);
    ResNetWorkload workload(ResNet(ResNetOptions().widths({64, 128})), images);
    options.memory.techniques = techniques;
    options.memory.cap = cap;
    trainer::TrainingSession session(workload, options);
    session.step(batch);
    trainer::synchronize(cuda);
    tracker.begin_window();
    session.step(batch);
    trainer::synchronize(cuda);
    return tracker.end_window().peak_bytes;
  };
  const std::int64_t none = peak_of({}, "");
  const std::int64_t cap = none * 7 / 10;
  EXPECT_THROW(peak_of({}, std::to_string(cap)), c10::OutOfMemoryError);
  if (tracker.window_open()) tracker.end_window();
  trainer::release_cached_device_memory(cuda);
  const std::int64_t planned = peak_of({"recompute"}, std::to_string(cap));
  EXPECT_LE(planned, cap);
  EXPECT_LT(planned, none);
  trainer::release_cached_device_memory(cuda);
  EXPECT_NO_THROW(at::empty({cap / 4 + 1024}, at::TensorOptions().device(cuda)));
}

}  // namespace
}  // namespace engram::resnet
