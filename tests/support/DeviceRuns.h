#pragma once
// Tests that train a model on a GPU beside the CPU: the same workload, built twice from one seed,
// trained a few steps on each device on the same batches; losses and parameters compared.
// Skips (one line saying why) where this process sees no CUDA device.
#include "trainer/Device.h"
#include "trainer/Trainer.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace engram::testing {

#define ENGRAM_SKIP_WITHOUT_CUDA()                                                           \
  do {                                                                                       \
    if (engram::trainer::cuda_device_count() == 0)                                           \
      GTEST_SKIP() << "no CUDA device: this test trains on a GPU";                           \
  } while (false)

/// What a few steps of training left: each step's loss and the parameters after the last.
struct DeviceRun {
  std::vector<double> losses;
  std::vector<at::Tensor> parameters;  ///< on the CPU
};

/// Trains `workload` for `steps` steps on `device` over the examples `batch` each step (the
/// options' learning rate and optimizer), with TF32 off so that CUDA computes in float32 as the
/// CPU does.
inline DeviceRun run_on(trainer::Workload& workload, trainer::TrainingOptions options,
                        const std::string& device, const std::vector<std::size_t>& batch,
                        int steps) {
  auto& context = at::globalContext();
  context.setAllowTF32CuDNN(false);
  context.setAllowTF32CuBLAS(false);
  options.device = device;
  options.batch = static_cast<int>(batch.size());
  DeviceRun run;
  {
    trainer::TrainingSession session(workload, options);
    for (int s = 0; s < steps; ++s) run.losses.push_back(session.step(batch).loss.item<double>());
  }
  for (const auto& p : workload.parameters()) run.parameters.push_back(p.detach().cpu().clone());
  return run;
}

/// The largest absolute differences between two runs: {loss, parameter}. Prints them (the
/// figures the GPU check reports).
inline std::pair<double, double> largest_differences(const DeviceRun& cpu, const DeviceRun& gpu,
                                                     const std::string& what) {
  double loss = 0, parameter = 0;
  EXPECT_EQ(cpu.losses.size(), gpu.losses.size());
  EXPECT_EQ(cpu.parameters.size(), gpu.parameters.size());
  for (std::size_t i = 0; i < std::min(cpu.losses.size(), gpu.losses.size()); ++i)
    loss = std::max(loss, std::abs(cpu.losses[i] - gpu.losses[i]));
  for (std::size_t i = 0; i < std::min(cpu.parameters.size(), gpu.parameters.size()); ++i)
    parameter = std::max(
        parameter, (cpu.parameters[i] - gpu.parameters[i]).abs().max().item<double>());
  std::printf("[ device   ] %s: largest loss difference %.3g, largest parameter difference %.3g\n",
              what.c_str(), loss, parameter);
  return {loss, parameter};
}

}  // namespace engram::testing
