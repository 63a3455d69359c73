#include "bench/NetnsHosts.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace engram::bench {
namespace {

using Args = std::vector<std::string>;

TEST(NetnsHosts, ATbfAtTheRateInBitsWithABucketThatPassesAnOffloadPacket) {
  // 100 Mb/s: 1 ms of it is 12.5 KB, below the 128 KiB floor (an offload packet must fit).
  const auto slow = shaper_commands("eth0", {12.5e6, 0});
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0], (Args{"qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100000000bit",
                           "burst", "131072", "latency", "100ms"}));
  // 10 Gb/s: 1 ms of it, 1.25 MB.
  const auto fast = shaper_commands("eth0", {1.25e9, 0});
  ASSERT_EQ(fast.size(), 1u);
  EXPECT_EQ(fast[0][7], "10000000000bit");
  EXPECT_EQ(fast[0][9], "1250000");
}

TEST(NetnsHosts, ADelayIsANetemRootWithTheTbfUnderIt) {
  const auto both = shaper_commands("eth0", {1.25e8, 0.0015});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], (Args{"qdisc", "add", "dev", "eth0", "root", "handle", "1:", "netem", "delay",
                           "1500us"}));
  EXPECT_EQ(both[1], (Args{"qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", "tbf",
                           "rate", "1000000000bit", "burst", "131072", "latency", "100ms"}));
  const auto delay_only = shaper_commands("eth0", {0, 0.002});
  ASSERT_EQ(delay_only.size(), 1u);
  EXPECT_EQ(delay_only[0].back(), "2000us");
}

TEST(NetnsHosts, AnUnshapedLinkNeedsNoCommandAndBadShapesAreRefused) {
  EXPECT_TRUE(shaper_commands("eth0", {0, 0}).empty());
  EXPECT_THROW(shaper_commands("eth0", {-1, 0}), std::invalid_argument);
  EXPECT_THROW(shaper_commands("eth0", {1e6, -0.1}), std::invalid_argument);
  EXPECT_THROW(shaper_commands("eth0", {1.0 / 0.0, 0}), std::invalid_argument);
}

bool only_42_alive(pid_t pid) { return pid == 42; }

TEST(NetnsHosts, StaleNamespacesAreThoseOfOwnersNoLongerAlive) {
  const std::string listed =
      "egdp42-0-h0 (id: 3)\n"
      "egdp42-0-sw (id: 4)\n"
      "egdp77-1-h1 (id: 1)\n"
      "egdp77-1-sw\n"
      "egdp77-1-other (id: 9)\n"  // not a name this class makes
      "eg77h0 (id: 0)\n"          // another tool's
      "blue\n";
  EXPECT_EQ(stale_namespaces(listed, &only_42_alive), (Args{"egdp77-1-h1", "egdp77-1-sw"}));
  EXPECT_TRUE(stale_namespaces("", &only_42_alive).empty());
}

}  // namespace
}  // namespace engram::bench
