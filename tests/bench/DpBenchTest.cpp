#include "bench/DpBench.h"

#include "common/Errors.h"

#include <gtest/gtest.h>

#include <string>

namespace engram::bench {
namespace {

DpBenchOptions on(const std::string& device, int ranks) {
  DpBenchOptions o;
  o.device = device;
  o.ranks = ranks;
  return o;
}

TEST(DpBenchTest, RanksOfACudaDeviceEachAreRefusedBeyondTheDevicesSeenBeforeAnyStarts) {
  EXPECT_NO_THROW(check_ranks_have_gpus(on("cuda", 2), 2));
  EXPECT_NO_THROW(check_ranks_have_gpus(on("cuda", 4), 8));
  try {
    check_ranks_have_gpus(on("cuda", 2), 1);
    FAIL() << "two ranks, one GPU each, on a machine with one";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "ranks");
    EXPECT_NE(e.problem().find("sees 1 CUDA device:"), std::string::npos) << e.problem();
    EXPECT_NE(e.problem().find("--device cuda:N --dist-backend gloo"), std::string::npos)
        << e.problem();
  }
  EXPECT_THROW(check_ranks_have_gpus(on("cuda", 8), 4), InvalidOption);
  // One GPU shared, the CPU, and hosts of their own (each rank LOCAL_RANK 0) are not counted.
  EXPECT_NO_THROW(check_ranks_have_gpus(on("cuda:0", 4), 1));
  EXPECT_NO_THROW(check_ranks_have_gpus(on("cpu", 4), 0));
  DpBenchOptions hosts = on("cuda", 4);
  hosts.hosts = "netns";
  EXPECT_NO_THROW(check_ranks_have_gpus(hosts, 1));
}

}  // namespace
}  // namespace engram::bench
