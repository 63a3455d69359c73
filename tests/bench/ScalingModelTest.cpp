// `engram bench scale` on a profile written here: the one-GPU check, the exchange's cost by the
// ring formula, and the schedules' order (ooo no slower than overlap, overlap than after).
#include "bench/ScalingModel.h"

#include "common/Errors.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace engram::bench {
namespace {

using json = nlohmann::json;

/// A `bench streams` run: three tasks of 40 MB, 8 MB and 4 MB of gradients (backward order).
json streams_run() {
  return {{"benchmark", "streams"},
          {"workload", "resnet"},
          {"batch", 256},
          {"device", "cuda:0 (test)"},
          {"one_stream_step_ms", 30.0},
          {"profile",
           {{"step_ms", 32.0},
            {"forward_ms", 9.0},
            {"backward_ms", 20.0},
            {"tail_chain_ms", 2.0},
            {"segments_ms", {{4.0, 5.0, 40000000}, {3.0, 2.0, 8000000}, {3.0, 1.0, 4000000}}}}}};
}

class ScalingModelTest : public ::testing::Test {
 protected:
  json run(const json& input) {
    const std::string from = dir_.file("in.json"), to = dir_.file("out.json");
    std::ofstream(from) << input.dump();
    std::ostringstream out;
    run_scaling_model({from, to}, out);
    std::ifstream in(to);
    return json::parse(in);
  }
  testing::TempDir dir_;
};

TEST_F(ScalingModelTest, OneGpuIsTheProfiledStepAndMoreGpusPayTheRing) {
  const json r = run({{"runs", {streams_run()}}});
  const json& check = r.at("one_gpu_check").at(0);
  // No exchange: forward, the chains and the tasks, and what the step spends outside them.
  EXPECT_NEAR(check.at("predicted_step_ms").get<double>(), 32.0, 1e-9);
  EXPECT_NEAR(check.at("error").get<double>(), 2.0 / 30.0, 1e-12);
  ASSERT_EQ(r.at("predictions").size(), 5u);  // NVLink x 8; 100 and 400 Gb/s x 64, 512
  for (const json& p : r.at("predictions")) {
    const int gpus = p.at("gpus").get<int>();
    const double bandwidth = p.at("link") == "100 Gb/s"  ? 12.5e9
                             : p.at("link") == "400 Gb/s" ? 50e9
                                                          : 450e9;
    const double hop = p.at("link") == "100 Gb/s" || p.at("link") == "400 Gb/s" ? 5e-6 : 1e-6;
    // 52 MB in 2 buckets of 25 MiB: the ring's bytes and two collectives' latency.
    const double exchange = 2.0 * (gpus - 1) / gpus * 52e6 / bandwidth + 2 * 2.0 * (gpus - 1) * hop;
    EXPECT_NEAR(p.at("exchange_ms").get<double>(), exchange * 1e3, 1e-6) << p.dump();
    EXPECT_NEAR(p.at("after_step_ms").get<double>(), 32.0 + exchange * 1e3, 1e-6);
    // Overlap by hand: backward runs the tasks last-first (4 + 5 ms, then 3 + 2, then 3 + 1, then
    // the 2 ms tail), each task's gradients sent when it is done and the link is free; the step
    // waits for the last of them, then the 9 ms forward and the 3 ms outside backward and forward.
    const auto ring = [&](double bytes) {
      return 2.0 * (gpus - 1) / gpus * bytes / bandwidth +
             2 * 2.0 * (gpus - 1) * hop * bytes / 52e6;
    };
    double link = 9e-3 + ring(40e6);
    link = std::max(link, 14e-3) + ring(8e6);
    link = std::max(link, 18e-3) + ring(4e6);
    const double overlap = std::max(20e-3, link) + 9e-3 + 3e-3;
    EXPECT_NEAR(p.at("overlap_step_ms").get<double>(), overlap * 1e3, 1e-6) << p.dump();
    EXPECT_LE(p.at("overlap_step_ms").get<double>(), p.at("after_step_ms").get<double>());
    EXPECT_LE(p.at("ooo_step_ms").get<double>(), p.at("overlap_step_ms").get<double>());
    EXPECT_GE(p.at("overlap_step_ms").get<double>(), 32.0);
  }
}

TEST_F(ScalingModelTest, AnInputThatIsNoStreamsProfileIsAFormatError) {
  json other = streams_run();
  other["benchmark"] = "memory";
  EXPECT_THROW(run(other), FormatError);
  other = streams_run();
  other["profile"].erase("segments_ms");
  EXPECT_THROW(run(other), FormatError);
  // Values no measurement gives: a zero step (the one-GPU check divided by it), a negative
  // time, a negative byte count (it wrapped to an enormous one).
  other = streams_run();
  other["one_stream_step_ms"] = 0.0;
  EXPECT_THROW(run(other), FormatError);
  other = streams_run();
  other["profile"]["forward_ms"] = -1.0;
  EXPECT_THROW(run(other), FormatError);
  other = streams_run();
  other["profile"]["segments_ms"][1][2] = -8000000;
  EXPECT_THROW(run(other), FormatError);
  // An input that is not there is a runtime failure (exit 1), not a usage error.
  try {
    std::ostringstream out;
    run_scaling_model({dir_.file("missing.json"), dir_.file("out.json")}, out);
    ADD_FAILURE() << "a missing --from was read";
  } catch (const UsageError& e) {
    ADD_FAILURE() << "a usage error: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read '" + dir_.file("missing.json") + "'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace engram::bench
