#include "bench/BenchSupport.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>

namespace engram::bench {
namespace {

TEST(BenchSupportTest, ExactReadsBackAsTheSameDouble) {
  // A peer parses what it is handed (Python's float(), C's strtod): it must train with the very
  // setting Engram trained with, however small or long.
  for (const double value : {5e-7, 1.5e-6, 1e-7, 2e-3, 0.0004, 0.1, 1.0 / 3, 25.0, 0.0, 1e300,
                             std::numeric_limits<double>::denorm_min(), -0.25}) {
    const std::string text = exact(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
  }
  EXPECT_EQ(exact(25.0), "25");
  EXPECT_EQ(exact(2e-3), "0.002");
  EXPECT_EQ(exact(0.0004), "0.0004");
  EXPECT_EQ(exact(5e-7), "5e-07");
  // What six fixed digits would have handed on.
  EXPECT_EQ(fixed(5e-7, 6), "0.000000");
}

TEST(BenchSupportTest, APeersFailureIsTheExceptionARankRaisedNotTorchrunsLastRule) {
  // torchrun's stderr, shortened: the ranks' tracebacks, then its own, then its summary.
  const std::string torchrun =
      "[rank1]: Traceback (most recent call last):\n"
      "[rank1]:     raise AssertionError(\"bucket_cap_mb should be set by now\")\n"
      "[rank1]: AssertionError: bucket_cap_mb should be set by now\n"
      "[rank0]: Traceback (most recent call last):\n"
      "[rank0]: AssertionError: bucket_cap_mb should be set by now\n"
      "E1130 02:21:40.648000 10515 api.py:986] failed (exitcode: 1) local_rank: 1\n"
      "Traceback (most recent call last):\n"
      "    raise ChildFailedError(\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "============================================================\n"
      "/work/bench/peers/ddp_peer.py FAILED\n"
      "------------------------------------------------------------\n"
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors\n"
      "============================================================\n";
  EXPECT_EQ(peer_failure_line(torchrun),
            "[rank0]: AssertionError: bucket_cap_mb should be set by now");
  EXPECT_EQ(peer_failure_line("Traceback (most recent call last):\n"
                              "  File \"peer.py\", line 3, in <module>\n"
                              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate\n"
                              "\n"),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate");
  EXPECT_EQ(peer_failure_line("usage: peer.py [-h]\npeer.py: error: unrecognized arguments\n---\n"),
            "peer.py: error: unrecognized arguments");
  EXPECT_EQ(peer_failure_line(""), "");
}

}  // namespace
}  // namespace engram::bench
