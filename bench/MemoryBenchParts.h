#pragma once
/// \file
/// What `bench memory` on the CPU (bench/MemoryBench.cpp) and on a device
/// (bench/DeviceMemoryBench.cpp) share: the ResNet workload of a row, its Python peer, and the
/// report's small helpers. Internal to bench/ (torch and JSON included).

#include "bench/MemoryBench.h"
#include "memory/ArenaReuse.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/MemoryTracker.h"
#include "trainer/TrainingOptions.h"
#include "trainer/Workload.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engram::bench::detail {

/// A workload ready to train on one fixed batch, and what describes it in the report.
struct PreparedWorkload {
  std::shared_ptr<const void> data;  ///< what `workload` refers to; outlives it
  std::unique_ptr<trainer::Workload> workload;
  std::vector<std::size_t> batch;  ///< the examples every step trains on
  nlohmann::json config;
};

/// ResNet-18 (CIFAR layout) on `batch` synthetic images, built on the CPU from the options' seed
/// under the parameter tag.
PreparedWorkload make_resnet(const MemoryBenchOptions& o, long batch);
/// The ResNet workloads: "resnet" (the CIFAR ResNet-18) and "resnet50" (ImageNet's ResNet-50).
bool is_resnet(const std::string& workload);

/// Runs a ResNet peer script (bench/peers/) on the network `config` describes and `batch`, the
/// script's own arguments (`extra`) after the shared ones; checks that it built the same network
/// (std::runtime_error otherwise) and records where its figures come from (`source`) and how long
/// it took. Returns its JSON.
nlohmann::json run_resnet_peer(const MemoryBenchOptions& o, long batch,
                               const nlohmann::json& config, const std::string& script,
                               const std::string& source,
                               const std::vector<std::string>& extra = {});

/// The techniques of one row: "relu" or, composed, "reuse+relu".
std::vector<std::string> row_techniques(const std::string& row);

/// The learning rate of every memory bench row and of the peers.
constexpr double kRowLearningRate = 1e-3;

/// A row's training options, as every memory bench row and its peers train: Adam at 1e-3, no
/// clipping, `batch` examples, the options' threads and seed, the row's techniques (none for
/// "none"). The caller sets the device and what else its row needs.
trainer::TrainingOptions row_training_options(const MemoryBenchOptions& o,
                                              const std::string& technique, long batch);

/// With reuse in a row, every row warms up this long (the same steps for all, so gradients
/// compare): the first step records, the second allocates no gradients or optimizer state and
/// replans, the third is served as every later one.
constexpr int kReuseWarmupSteps = 3;
/// The warm-up steps of every row: kReuseWarmupSteps when any row reuses, else one.
int warmup_steps(const std::vector<std::string>& rows);

/// A reuse row's figures, noted after each of its steps (the Stepper's last_reuse(), nullptr
/// for a row without reuse): the measured steps' own, the longest planning and the replans of
/// every step, warm-up included.
struct ReuseNotes {
  std::vector<memory::ReuseStep> measured;
  double plan_seconds = 0;
  long replans = 0;

  void note(const memory::ReuseStep* step, bool is_measured);
  /// The report's "reuse": hits, misses and conflicts over the measured steps, the last step's
  /// plan (arena, lower bound, strategy). Only with measured steps.
  nlohmann::json to_json() const;
};

/// A row's "device_arena_plan": fixed-structure reuse on the device planned, not served.
/// memory/ArenaPlanner's arena (512-byte alignment, the caching allocator's rounding) for the
/// allocations the window's step makes and releases, and what a step served from it would hold:
/// what was live at the step's start, what the step keeps (outliving it: gradients, state) and
/// the arena, beside the caching allocator's reserved peak for the same step.
nlohmann::json device_arena_plan(const memory::DeviceMemoryWindow& window);

/// {tag name: bytes} for every tag.
nlohmann::json bytes_by_tag(const std::array<std::int64_t, memory::kNumTags>& bytes);

}  // namespace engram::bench::detail
