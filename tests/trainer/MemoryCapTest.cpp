#include "trainer/MemoryCap.h"

#include "common/Errors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::trainer {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

TEST(MemoryCapTest, BytesUnitsAndFractionsOfTheDevice) {
  const std::int64_t device = 80 * kGiB;
  EXPECT_EQ(resolve_memory_cap("8589934592", device), 8 * kGiB);
  EXPECT_EQ(resolve_memory_cap("8GiB", device), 8 * kGiB);
  EXPECT_EQ(resolve_memory_cap("8G", device), 8 * kGiB);
  EXPECT_EQ(resolve_memory_cap("512MiB", device), 512 * (std::int64_t{1} << 20));
  EXPECT_EQ(resolve_memory_cap("64K", device), 64 * 1024);
  EXPECT_EQ(resolve_memory_cap("7.5GiB", device), 15 * kGiB / 2);
  EXPECT_EQ(resolve_memory_cap("1e9", device), 1000000000);
  EXPECT_EQ(resolve_memory_cap("0.1", device), 8 * kGiB);
  EXPECT_EQ(resolve_memory_cap("1.0", device), device);
}

/// What the caching allocator's setMemoryFraction keeps as its limit: the product's floor.
std::int64_t limit_set_by(double fraction, std::int64_t device) {
  return static_cast<std::int64_t>(fraction * static_cast<double>(device));
}

TEST(MemoryCapTest, TheAllocatorsFractionLimitsItToTheCapToTheByte) {
  const std::int64_t h200 = 150754820096;  // an H200's total global memory
  // bytes / device is a byte short here: floor(9 GiB / h200 x h200) = 9 GiB - 1.
  EXPECT_EQ(limit_set_by(9.0 * kGiB / h200, h200), 9 * kGiB - 1);
  EXPECT_EQ(limit_set_by(allocator_fraction(9 * kGiB, h200), h200), 9 * kGiB);
  EXPECT_EQ(allocator_fraction(0, h200), 1.0);
  EXPECT_EQ(allocator_fraction(h200, h200), 1.0);
  std::mt19937_64 random(7);
  for (const std::int64_t device : {h200, 80 * kGiB, std::int64_t{85045542912}, 24 * kGiB}) {
    std::uniform_int_distribution<std::int64_t> bytes(1, device - 1);
    for (int i = 0; i < 20000; ++i) {
      const std::int64_t cap = bytes(random);
      const double fraction = allocator_fraction(cap, device);
      ASSERT_LE(fraction, 1.0);
      ASSERT_EQ(limit_set_by(fraction, device), cap) << cap << " of " << device;
      // The limit reads back from what getMemoryFraction reports: limit / device.
      ASSERT_EQ(allocator_limit_bytes(static_cast<double>(cap) / static_cast<double>(device),
                                      device),
                cap)
          << cap << " of " << device;
    }
  }
  EXPECT_EQ(allocator_limit_bytes(1.0, h200), 0) << "no limit";
  EXPECT_THROW(allocator_fraction(-1, h200), std::invalid_argument);
  EXPECT_THROW(allocator_fraction(h200 + 1, h200), std::invalid_argument);
}

TEST(MemoryCapTest, AMalformedOrImpossibleCapIsAUsageErrorNamingTheField) {
  for (const std::string bad : {"", "G", "-1", "0", "0.0", "8X", "8 GiB", "1.5", "abc", "8GB"}) {
    try {
      resolve_memory_cap(bad, 80 * kGiB, "memory.cap");
      ADD_FAILURE() << "'" << bad << "' passed";
    } catch (const InvalidOption& e) {
      EXPECT_EQ(e.option(), "memory.cap") << bad;
    }
    EXPECT_THROW(check_memory_cap(bad), InvalidOption) << bad;
  }
  // More than the device has; a fraction without the device's size.
  EXPECT_THROW(resolve_memory_cap("81GiB", 80 * kGiB), InvalidOption);
  EXPECT_THROW(resolve_memory_cap("0.5", 0), InvalidOption);
  EXPECT_NO_THROW(check_memory_cap("0.5"));
  EXPECT_NO_THROW(check_memory_cap("81GiB"));  // the syntax alone
}

TEST(MemoryCapTest, TheStepStateIsCountedInTheAllocatorsBlocks) {
  EXPECT_EQ(allocator_block_bytes(0), 0);
  EXPECT_EQ(allocator_block_bytes(1), 512);
  EXPECT_EQ(allocator_block_bytes(512), 512);
  EXPECT_EQ(allocator_block_bytes(513), 1024);
  const std::vector<std::int64_t> params{4, 4096, 1000};  // blocks 512, 4096, 1024
  const StepState adam = step_state_bytes(params, "adam", 0.9);
  EXPECT_EQ(adam.parameters, 5632);
  EXPECT_EQ(adam.gradients, 5632);
  EXPECT_EQ(adam.optimizer_state, 2 * 5632 + 3 * 512);  // two moments and a step count each
  EXPECT_EQ(adam.total(), 4 * 5632 + 3 * 512);
  EXPECT_EQ(step_state_bytes(params, "sgd", 0.9).optimizer_state, 5632);
  EXPECT_EQ(step_state_bytes(params, "sgd", 0).optimizer_state, 0);
  EXPECT_THROW(step_state_bytes(params, "lamb", 0), std::invalid_argument);
}

TEST(MemoryCapTest, TheActivationBudgetIsWhatTheCapLeavesOrAUsageError) {
  StepState s;
  s.parameters = s.gradients = 100;
  s.optimizer_state = 200;
  EXPECT_EQ(activation_budget_under_cap(1000, s), 600);
  try {
    activation_budget_under_cap(400, s);
    ADD_FAILURE() << "a cap below the state passed";
  } catch (const InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer state alone"), std::string::npos) << e.what();
  }
}

TEST(MemoryCapTest, APlanFitsTheCapInReservedBytesAsWellAsInLiveOnes) {
  StepState s;
  s.parameters = s.gradients = 100;
  s.optimizer_state = 200;
  // A cap of 1000: activations may take 600 live bytes; a planning step, which runs before the
  // optimizer state exists, may have the allocator reserve 800 at its live peak (the
  // parameters' segments, gradients, activations and the allocator's tails and cache).
  const std::int64_t budget = activation_budget_under_cap(1000, s);
  const std::int64_t reserved_budget = reserved_budget_while_planning(1000, s);
  EXPECT_EQ(reserved_budget, 800);
  // Reserved bytes within their budget: the live activation peak decides.
  EXPECT_EQ(peak_against_cap(550, 750, reserved_budget, budget), 550);
  EXPECT_EQ(peak_against_cap(600, 800, reserved_budget, budget), 600);
  // Live bytes fit, but the allocator would reserve 850 at the peak, and with the optimizer's
  // 200 beside it the step would need 1050: the plan counts as 50 above the budget, though its
  // live peak is 40 below it.
  EXPECT_EQ(peak_against_cap(560, 850, reserved_budget, budget), 650);
  EXPECT_GT(peak_against_cap(560, 850, reserved_budget, budget), budget);
  // Live bytes over the budget stay over it, whatever the reserved bytes.
  EXPECT_EQ(peak_against_cap(620, 0, reserved_budget, budget), 620);
}

}  // namespace
}  // namespace engram::trainer
