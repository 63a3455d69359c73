#include "bench/DpBench.h"

#include "common/Errors.h"

#include "common/Subprocess.h"
#include "tests/support/Thrown.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
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
  // One GPU shared and the CPU are not counted.
  EXPECT_NO_THROW(check_ranks_have_gpus(on("cuda", 4), 4));
  EXPECT_NO_THROW(check_ranks_have_gpus(on("cuda:0", 4), 1));
  EXPECT_NO_THROW(check_ranks_have_gpus(on("cpu", 4), 0));
  // Hosts of their own still run the emulated links' job on loopback, a GPU per rank.
  DpBenchOptions hosts = on("cuda", 4);
  hosts.hosts = "netns";
  EXPECT_THROW(check_ranks_have_gpus(hosts, 1), InvalidOption);
}

DpBenchOptions with_backend(const std::string& device, int ranks, const std::string& backend,
                            const std::string& hosts = "loopback") {
  DpBenchOptions o = on(device, ranks);
  o.dist_backend = backend;
  o.hosts = hosts;
  return o;
}

TEST(DpBenchTest, RanksOnOneSharedDeviceSumOverGlooAndRefuseNccl) {
  // A GPU per rank: NCCL by default, as the trainer chooses.
  EXPECT_EQ(dp_backend(with_backend("cuda", 2, "auto")), "nccl");
  EXPECT_EQ(dp_backend(with_backend("cuda", 2, "gloo")), "gloo");
  EXPECT_EQ(dp_backend(with_backend("cpu", 2, "auto")), "gloo");
  EXPECT_EQ(dp_backend(with_backend("cuda:0", 1, "nccl")), "nccl");  // one rank shares nothing
  // One GPU for every rank: named, or GPU 0 of each rank's own host.
  EXPECT_EQ(dp_backend(with_backend("cuda:0", 2, "auto")), "gloo");
  EXPECT_EQ(dp_backend(with_backend("cuda:1", 4, "gloo")), "gloo");
  EXPECT_EQ(dp_backend(with_backend("cuda", 2, "auto", "netns")), "gloo");
  EXPECT_EQ(dp_backend(with_backend("cpu", 2, "auto", "netns")), "gloo");
  for (const auto& o :
       {with_backend("cuda:0", 2, "nccl"), with_backend("cuda", 2, "nccl", "netns")}) {
    try {
      dp_backend(o);
      FAIL() << "nccl with ranks sharing a GPU, device " << o.device << " on " << o.hosts;
    } catch (const InvalidOption& e) {
      EXPECT_EQ(e.option(), "dist.backend");
      EXPECT_NE(e.problem().find("needs a GPU per rank"), std::string::npos) << e.problem();
    }
  }
  EXPECT_THROW(dp_backend(with_backend("cpu", 2, "nccl")), InvalidOption);
  // Each emulated host's rank is on the GPU --device names: the refusal names that one.
  try {
    dp_backend(with_backend("cuda:1", 2, "nccl", "netns"));
    FAIL() << "nccl on hosts emulated on one GPU";
  } catch (const InvalidOption& e) {
    EXPECT_NE(e.problem().find("share one (GPU 1: --hosts netns"), std::string::npos)
        << e.problem();
  }
}

TEST(DpBenchTest, APeerReportIsTakenOnlyWhenThePeerRanWithEngramsSettings) {
  using engram::testing::expect_says;
  using engram::testing::message_of;
  const ScratchDir dir("dp-peer-report");
  const auto report = [&](const std::string& text) {
    const std::string path = dir.file("peer.json");
    std::ofstream(path) << text;
    return path;
  };
  const std::string rows = R"("rows": [{"link_bandwidth": 0, "step_seconds": 0.25}])";
  const nlohmann::json peer = read_ddp_peer_report(
      report("{" + rows + R"(, "bucket_cap_mb": 0.0004, "latency": 5e-07})"), 0.0004, 5e-7);
  EXPECT_EQ(peer.at("rows").size(), 1u);
  // Handed "0.000" for 0.0004 MiB, DDP ran with no bucket size; a latency of 0.5 us became 0.
  EXPECT_EQ(message_of<std::runtime_error>([&] {
              read_ddp_peer_report(
                  report("{" + rows + R"(, "bucket_cap_mb": 0.0, "latency": 5e-07})"), 0.0004,
                  5e-7);
            }),
            "the DDP peer ran with bucket_cap_mb 0, not 0.0004");
  EXPECT_EQ(message_of<std::runtime_error>([&] {
              read_ddp_peer_report(
                  report("{" + rows + R"(, "bucket_cap_mb": 25, "latency": 0})"), 25, 5e-7);
            }),
            "the DDP peer ran with latency 0, not 5e-07");
  // Not the peer's report: no rows to compare, and none taken.
  for (const char* text : {"{}", R"({"rows": {}, "bucket_cap_mb": 25, "latency": 0})", "[1"}) {
    expect_says(message_of<std::runtime_error>([&] { read_ddp_peer_report(report(text), 25, 0); }),
                "' is not one it writes: ");
  }
}

}  // namespace
}  // namespace engram::bench
