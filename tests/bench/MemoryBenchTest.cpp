// `engram bench memory` end to end through the real binary (the tracking allocator is process-wide,
// so each run gets its own process): the JSON's figures, the Chrome trace, usage errors.
#include "tests/support/RunProgram.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

namespace engram {
namespace {

using nlohmann::json;
using testing::ProgramResult;
using testing::read_file;
using testing::TempDir;

class MemoryBenchTest : public ::testing::Test {
 protected:
  /// Runs `engram bench memory` with `args`.
  ProgramResult bench(const std::vector<std::string>& args) {
    std::vector<std::string> argv{ENGRAM_BINARY, "bench", "memory"};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::run_program(argv, dir_);
  }

  /// Checks what every report holds and returns its only row.
  json expect_report(const json& j, const std::string& workload, long steps,
                     bool peer = false) {
    EXPECT_EQ(j.at("benchmark"), "memory");
    EXPECT_EQ(j.at("workload"), workload);
    EXPECT_FALSE(j.at("machine").at("cpu").get<std::string>().empty());
    EXPECT_GE(j.at("machine").at("cores").get<int>(), 1);
    EXPECT_FALSE(j.at("versions").at("libtorch").get<std::string>().empty());
    EXPECT_FALSE(j.at("versions").at("compiler").get<std::string>().empty());
    EXPECT_EQ(j.at("seed"), 1);
    EXPECT_EQ(j.at("threads"), 1);
    EXPECT_EQ(j.at("steps"), steps);
    EXPECT_GT(j.at("config").at("parameters").get<long>(), 0);
    EXPECT_EQ(j.at("peer").is_null(), !peer) << "--no-peer, or not";
    const json& results = j.at("results");
    EXPECT_EQ(results.size(), 1u);
    const json row = results.at(0);
    EXPECT_EQ(row.at("technique"), "none");
    const auto peak = row.at("peak_bytes").get<long>();
    const auto activation = row.at("activation_peak_bytes").get<long>();
    EXPECT_GT(activation, 0);
    EXPECT_LE(activation, peak);
    EXPECT_GE(row.at("activation_peak_bytes_counting_gradient_temporaries").get<long>(),
              activation);
    EXPECT_GT(row.at("step_ms").get<double>(), 0.0);
    EXPECT_EQ(row.at("activation_peak_ratio_vs_profiler").is_null(), !peer);
    // Every step makes the same allocations.
    const auto per_step = row.at("activation_peak_bytes_per_step").get<std::vector<long>>();
    EXPECT_EQ(per_step, std::vector<long>(static_cast<std::size_t>(steps), activation));
    EXPECT_EQ(row.at("peak_bytes_per_step").size(), static_cast<std::size_t>(steps));
    // Parameters, gradients and optimizer state are all there at the start of a step.
    const json& start = row.at("live_bytes_by_tag_at_step_start");
    EXPECT_GT(start.at("parameter").get<long>(), 0);
    EXPECT_GT(start.at("gradient").get<long>(), 0);
    EXPECT_EQ(start.at("optimizer_state").get<long>(), 2 * start.at("gradient").get<long>())
        << "Adam keeps two moments per gradient";
    return row;
  }

  TempDir dir_;
};

TEST_F(MemoryBenchTest, ResNetAtATinySizeWritesFiguresAndATrace) {
  const std::string json_path = dir_.file("m.json"), trace_path = dir_.file("t.json");
  const ProgramResult p =
      bench({"--workload", "resnet", "--batch", "2", "--image-size", "8", "--width", "4", "--steps",
             "2", "--no-peer", "--json", json_path, "--trace", trace_path});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("activation peak"), std::string::npos) << p.out;
  const json j = json::parse(read_file(json_path));
  const json row = expect_report(j, "resnet", 2);
  EXPECT_EQ(j.at("config").at("batch"), 2);
  EXPECT_EQ(j.at("config").at("image_size"), 8);
  EXPECT_EQ(j.at("config").at("widths"), json({4, 8, 16, 32}));
  // The activations held at the end of forward include at least the two saved conv outputs of
  // the stem (conv and ReLU output), 2 x 4 x 8 x 8 floats each.
  EXPECT_GE(row.at("activation_bytes_at_end_of_forward").get<long>(), 2 * 2 * 4 * 8 * 8 * 4);

  const json trace = json::parse(read_file(trace_path));
  std::set<std::string> phases;
  bool counter = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("cat", "") == "phase") phases.insert(e.at("name").get<std::string>());
    if (e.value("ph", "") == "C" && e.value("name", "") == "live bytes") counter = true;
  }
  // The Stepper's phases (trainer/Stepper.h), each a span of the trace.
  EXPECT_EQ(phases, (std::set<std::string>{"batch", "forward", "backward", "clip", "optimizer"}));
  EXPECT_TRUE(counter);
}

// ResNet-50's layout (bottlenecks, the ImageNet stem, 1000 classes) at a small width, beside the
// torch.profiler peer, which must build the same network (the parameter counts are compared).
TEST_F(MemoryBenchTest, ResNet50AtASmallWidthWritesFiguresBesideThePeer) {
  const std::string json_path = dir_.file("m.json");
  const ProgramResult p = bench({"--workload", "resnet50", "--batch", "2", "--image-size", "64",
                                 "--width", "4", "--steps", "1", "--json", json_path});
  ASSERT_EQ(p.code, 0) << p.err;
  const json j = json::parse(read_file(json_path));
  const json row = expect_report(j, "resnet50", 1, /*peer=*/true);
  const json& config = j.at("config");
  EXPECT_EQ(config.at("model"), "resnet50-imagenet");
  EXPECT_EQ(config.at("blocks"), json({3, 4, 6, 3}));
  EXPECT_EQ(config.at("num_classes"), 1000);
  EXPECT_EQ(config.at("image_size"), 64);
  EXPECT_EQ(j.at("peer").at("parameters"), config.at("parameters"));
  EXPECT_GT(row.at("activation_peak_ratio_vs_profiler").get<double>(), 0);
}

TEST_F(MemoryBenchTest, NpiAtATinySizeWritesFigures) {
  const std::string json_path = dir_.file("m.json");
  const ProgramResult p = bench({"--workload", "npi", "--batch", "2", "--hidden", "16", "--steps",
                                 "1", "--no-peer", "--json", json_path});
  ASSERT_EQ(p.code, 0) << p.err;
  const json j = json::parse(read_file(json_path));
  expect_report(j, "npi", 1);
  EXPECT_EQ(j.at("config").at("batch"), 2);
  EXPECT_EQ(j.at("config").at("hidden"), 16);
  EXPECT_EQ(j.at("config").at("impl"), "engram");
}

TEST_F(MemoryBenchTest, ReluCompressionIsLosslessAndSavesWhatBitmapPlusValuesPredicts) {
  const std::string json_path = dir_.file("m.json");
  const ProgramResult p =
      bench({"--workload", "resnet", "--techniques", "none,relu", "--batch", "2", "--image-size",
             "8", "--width", "4", "--steps", "2", "--no-peer", "--json", json_path});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("max |grad diff|"), std::string::npos) << p.out;
  const json j = json::parse(read_file(json_path));
  const json& rows = j.at("results");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("technique"), "none");
  EXPECT_EQ(rows[1].at("technique"), "relu");
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("max_abs_grad_diff").get<double>(), 0.0) << row.at("technique");
    EXPECT_EQ(row.at("max_abs_loss_diff").get<double>(), 0.0) << row.at("technique");
    EXPECT_EQ(row.at("loss_per_step").size(), 2u);
  }
  EXPECT_EQ(rows[0].at("activation_peak_ratio").get<double>(), 1.0);
  EXPECT_TRUE(rows[0].at("relu").is_null());
  const json& row = rows[1];
  EXPECT_LT(row.at("activation_peak_ratio").get<double>(), 1.0);
  EXPECT_GT(row.at("time_ratio").get<double>(), 0.0);
  const json& relu = row.at("relu");
  EXPECT_EQ(relu.at("compressed_tensors_per_step"), 17) << "the stem's ReLU and two per block";
  EXPECT_EQ(relu.at("shared_saves_per_step"), 19);
  const double sparsity = relu.at("sparsity").get<double>();
  EXPECT_GT(sparsity, 0.2);
  EXPECT_LT(sparsity, 0.9);
  EXPECT_GT(relu.at("compression_ratio").get<double>(), 1.0);
  EXPECT_LT(relu.at("format_overhead").get<double>(), 0.01);
  ASSERT_EQ(relu.at("saving_vs_prediction_per_step").size(), 2u);
  // At this size the step's few other allocations move the peak a little.
  EXPECT_NEAR(relu.at("saving_vs_prediction").get<double>(), 1.0, 0.25);
  const json& kernels = j.at("relu_kernels");
  ASSERT_EQ(kernels.at("results").size(), 3u);
  for (const auto& k : kernels.at("results")) {
    EXPECT_GT(k.at("compress_gbps").get<double>(), 0.0);
    EXPECT_GT(k.at("decompress_gbps").get<double>(), 0.0);
    EXPECT_GT(k.at("memcpy_gbps").get<double>(), 0.0);
  }
}

// The example technique of examples/techniques/Fp16Store.cpp, which engram links by one CMake
// line and the bench knows only through trainer/MemoryTechnique.h's list: measured beside the
// built-in rows, lossy and reported as such, with about half of none's activation bytes.
TEST_F(MemoryBenchTest, ARegisteredTechniqueIsMeasuredWithItsGradientError) {
  const std::string json_path = dir_.file("m.json");
  const ProgramResult p = bench({"--workload", "resnet", "--techniques", "none,relu,fp16",
                                 "--batch", "4", "--image-size", "16", "--width", "8", "--steps",
                                 "2", "--no-peer", "--json", json_path});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("fp16: lossy; the first step's gradients differ"), std::string::npos)
      << p.out;
  const json j = json::parse(read_file(json_path));
  const json& rows = j.at("results");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows[0].at("lossless").get<bool>());
  EXPECT_TRUE(rows[1].at("lossless").get<bool>());
  EXPECT_EQ(rows[1].at("store"), "relu");
  const json& fp16 = rows[2];
  EXPECT_EQ(fp16.at("technique"), "fp16");
  EXPECT_EQ(fp16.at("store"), "fp16");
  EXPECT_FALSE(fp16.at("lossless").get<bool>());
  // float16 keeps about 3 significant digits: a gradient error above 0, far below 1% (at a batch
  // of 2 and 1x1 maps, batch norm's variance of two samples magnifies it past 10%).
  const double error = fp16.at("first_step_grad_rel_l2_diff").get<double>();
  EXPECT_GT(error, 0.0);
  EXPECT_LT(error, 1e-2);
  EXPECT_GT(fp16.at("max_abs_grad_diff").get<double>(), 0.0);
  // Every saved activation at half its bytes; the peak also holds the float copy backward reads.
  EXPECT_LT(fp16.at("activation_peak_ratio").get<double>(), 0.8);
  EXPECT_LT(fp16.at("activation_peak_ratio").get<double>(),
            rows[1].at("activation_peak_ratio").get<double>());
}

// Recompute, swap and all on a small ResNet, planned under a budget of 0.7 of none's activation
// peak: every row lossless, within the budget, with its plan and swap figures.
TEST_F(MemoryBenchTest, RecomputeAndSwapStayWithinTheBudgetAndAreLossless) {
  const std::string json_path = dir_.file("m.json");
  const ProgramResult p =
      bench({"--workload", "resnet", "--techniques", "none,recompute,swap,all", "--budget", "0.7x",
             "--batch", "4", "--image-size", "16", "--width", "8", "--steps", "2", "--no-peer",
             "--explain", "--json", json_path});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("how the planner got there"), std::string::npos) << p.out;
  const json j = json::parse(read_file(json_path));
  const json& rows = j.at("results");
  ASSERT_EQ(rows.size(), 4u);
  const std::int64_t none_peak = rows[0].at("activation_peak_bytes").get<std::int64_t>();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const json& row = rows[i];
    const std::string technique = row.at("technique");
    EXPECT_EQ(row.at("max_abs_grad_diff").get<double>(), 0.0) << technique;
    EXPECT_EQ(row.at("max_abs_loss_diff").get<double>(), 0.0) << technique;
    const std::int64_t budget = row.at("budget_bytes").get<std::int64_t>();
    EXPECT_EQ(budget, static_cast<std::int64_t>(0.7 * static_cast<double>(none_peak)));
    EXPECT_LE(row.at("activation_peak_bytes").get<std::int64_t>(), budget) << technique;
    const json& plan = row.at("plan");
    ASSERT_EQ(plan.at("units").size(), 9u) << "the stem and eight blocks";
    EXPECT_EQ(plan.at("units")[0].at("name"), "stem");
    EXPECT_LE(plan.at("planned_activation_peak_bytes").get<std::int64_t>(), budget);
    int upgraded = 0;
    for (const auto& unit : plan.at("units")) upgraded += unit.at("choice") != "keep" ? 1 : 0;
    EXPECT_GT(upgraded, 0) << technique;
  }
  EXPECT_TRUE(rows[1].at("swap").is_null());
  // swap alone must swap to meet the budget; all may recompute instead (on tensors this small
  // the measured transfer rates make recompute the cheaper per byte).
  EXPECT_GT(rows[2].at("swap").at("swapped_out_bytes_per_step").get<std::int64_t>(), 0);
  for (const std::size_t i : {2u, 3u}) {
    const json& swap = rows[i].at("swap");
    ASSERT_FALSE(swap.is_null());
    EXPECT_EQ(swap.at("swapped_out_bytes_per_step"), swap.at("swapped_in_bytes_per_step"));
    EXPECT_TRUE(swap.at("on_demand_stall_ms").is_number()) << "reported (a time: not asserted)";
  }
  EXPECT_FALSE(rows[3].at("relu").is_null()) << "all compresses ReLU outputs too";
  // Below what any plan reaches: a usage error naming the smallest feasible budget.
  const ProgramResult low = bench({"--workload", "resnet", "--techniques", "swap", "--budget",
                                   "1000", "--batch", "2", "--image-size", "8", "--width", "4",
                                   "--steps", "1", "--no-peer", "--json", json_path + ".low"});
  EXPECT_EQ(low.code, 2) << low.err;
  EXPECT_NE(low.err.find("below the smallest feasible budget"), std::string::npos) << low.err;
  EXPECT_FALSE(std::filesystem::exists(json_path + ".low"));
}

// Lower-memory algorithm replacement: the smallest budget ReLU compression and recompute reach is
// lowered by replacing convolutions' algorithms, and a budget between the two is met only with them
// replaced; the replaced layers are listed, each with its measured workspace per algorithm.
TEST_F(MemoryBenchTest, AlgorithmReplacementMeetsABudgetNoUnitPlanReaches) {
  const std::string json_path = dir_.file("m.json");
  const std::vector<std::string> network{"--workload", "resnet", "--batch", "8",
                                         "--width",    "16",     "--steps", "1",
                                         "--no-peer",  "--json", json_path};
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), network.begin(), network.end());
    return bench(args);
  };
  const auto smallest_feasible = [](const ProgramResult& p) -> std::int64_t {
    const std::string marker = "smallest feasible budget, ";
    const auto at = p.err.find(marker);
    if (p.code != 2 || at == std::string::npos) return -1;
    return std::stoll(p.err.substr(at + marker.size()));
  };
  const std::int64_t units_only =
      smallest_feasible(with({"--techniques", "relu+recompute", "--budget", "1000"}));
  const ProgramResult replaced = with({"--techniques", "relu+recompute+algo", "--budget", "1000"});
  const std::int64_t with_algo = smallest_feasible(replaced);
  ASSERT_GT(units_only, 0);
  ASSERT_GT(with_algo, 0) << replaced.err;
  ASSERT_LT(with_algo, units_only) << "replacing algorithms lowers the smallest feasible budget";

  // Just below what ReLU compression and recompute reach alone. (Without swap: a swapped step's
  // measured peak moves a little with the I/O thread's timing; these measurements repeat.)
  const std::int64_t budget = units_only - 1;
  const ProgramResult p = with({"--techniques", "none,relu+recompute+algo", "--budget",
                                std::to_string(budget), "--explain"});
  ASSERT_EQ(p.code, 0) << p.err;
  const json row = json::parse(read_file(json_path)).at("results").at(1);
  const json& algorithms = row.at("plan").at("algorithms");
  ASSERT_FALSE(algorithms.at("planned_activation_peak_bytes").is_null())
      << "the budget was met without replacing a layer";
  EXPECT_LE(algorithms.at("planned_activation_peak_bytes").get<std::int64_t>(), budget);
  EXPECT_LE(row.at("plan").at("planned_activation_peak_bytes").get<std::int64_t>(), budget);
  EXPECT_LE(row.at("activation_peak_bytes").get<std::int64_t>(), budget);
  const auto& replaced_layers = algorithms.at("replaced_layers");
  ASSERT_FALSE(replaced_layers.empty());
  int listed = 0;
  for (const auto& layer : algorithms.at("layers")) {
    const auto& costs = layer.at("algorithms");
    ASSERT_EQ(costs.size(), 3u);
    EXPECT_EQ(costs[0].at("algorithm"), "default");
    for (const auto& c : costs) EXPECT_LT(c.at("max_rel_diff").get<double>(), 1e-5);
    if (layer.at("chosen") == "default") continue;
    ++listed;
    const auto& chosen = *std::find_if(costs.begin(), costs.end(), [&](const json& c) {
      return c.at("algorithm") == layer.at("chosen");
    });
    EXPECT_LT(chosen.at("workspace_bytes").get<std::int64_t>(),
              costs[0].at("workspace_bytes").get<std::int64_t>())
        << layer.at("name");
    EXPECT_NE(p.out.find(layer.at("name").get<std::string>() + " ("), std::string::npos) << p.out;
  }
  EXPECT_EQ(listed, static_cast<int>(replaced_layers.size()));
  EXPECT_NE(p.out.find("algorithm plan: "), std::string::npos) << p.out;
  // Not bit-identical: each layer is within float rounding of its default on the same tensors
  // (max_rel_diff above). The first step's gradient, from the same weights, is close in norm but
  // not to float rounding: this network at this batch has a ReLU input within rounding of zero,
  // so any change of summation order may flip it (a 1e-7 relative perturbation of the stem's
  // weights under the default algorithm moves the gradient by 1.6e-3 in relative L2 norm for
  // half of the random perturbations tried, by 1.6e-6 for the others). A wrong algorithm would
  // move it by order 1.
  EXPECT_LT(row.at("first_step_grad_rel_l2_diff").get<double>(), 1e-2);

  // A model without replaceable layers: a usage error.
  const ProgramResult npi = bench({"--workload", "npi", "--techniques", "algo", "--hidden", "16",
                                   "--steps", "1", "--json", dir_.file("npi.json")});
  EXPECT_EQ(npi.code, 2) << npi.err;
  EXPECT_NE(npi.err.find("this model has none"), std::string::npos) << npi.err;
}

// --trace with every technique on every unit: the step's compress, swap and recompute spans and
// the live-bytes counter are in the Chrome trace.
// On a GPU: a row without reuse reports the arena that fixed-structure reuse would plan for its
// recorded step (device_arena_plan); a reuse row reports the arena that served it
// (memory/DeviceArenaReuse.h), and trains none's bits. Every row warms up as long as reuse needs.
TEST_F(MemoryBenchTest, OnCudaRowsReportTheArenaPlannedOrServed) {
  const std::string json_path = dir_.file("m.json");
  const ProgramResult p =
      bench({"--workload", "resnet", "--device", "cuda", "--techniques", "none,reuse,relu+reuse",
             "--batch", "4", "--image-size", "16", "--width", "8", "--steps", "2", "--no-peer",
             "--json", json_path});
  if (p.code == 2 && p.err.find("--device is cuda") != std::string::npos)
    GTEST_SKIP() << "no CUDA device visible to engram: the device rows need one";
  ASSERT_EQ(p.code, 0) << p.err;
  const json j = json::parse(read_file(json_path));
  EXPECT_EQ(j.at("warmup_steps"), 3);
  const json& rows = j.at("rows");
  ASSERT_EQ(rows.size(), 3u);
  const json& plan = rows[0].at("device_arena_plan");
  EXPECT_EQ(plan.at("served"), false);
  EXPECT_GT(plan.at("arena_bytes").get<std::int64_t>(), 0);
  EXPECT_GE(plan.at("arena_bytes").get<std::int64_t>(),
            plan.at("lower_bound_bytes").get<std::int64_t>());
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const json& row = rows[i];
    const std::string technique = row.at("technique");
    EXPECT_FALSE(row.contains("device_arena_plan")) << technique;
    EXPECT_TRUE(row.at("bit_identical_to_none").get<bool>()) << technique;
    const json& reuse = row.at("reuse");
    EXPECT_GT(reuse.at("hit_rate").get<double>(), 0.5) << technique;
    EXPECT_EQ(reuse.at("misses"), 0) << technique;
    EXPECT_GE(reuse.at("arena_bytes").get<std::int64_t>(),
              reuse.at("lower_bound_bytes").get<std::int64_t>())
        << technique;
  }
  EXPECT_NE(p.out.find("arena (served)"), std::string::npos) << p.out;
}

TEST_F(MemoryBenchTest, TheTraceShowsEveryTechnique) {
  const std::string json_path = dir_.file("m.json"), trace_path = dir_.file("m.trace.json");
  const ProgramResult p = bench({"--workload", "resnet", "--techniques", "all", "--batch", "2",
                                 "--image-size", "8", "--width", "4", "--steps", "1", "--no-peer",
                                 "--json", json_path, "--trace", trace_path});
  ASSERT_EQ(p.code, 0) << p.err;
  const std::string trace = read_file(trace_path);
  for (const char* span : {"\"compress\"", "\"decompress\"", "\"swap_out\"", "\"swap_in\"",
                           "\"recompute_unit\"", "\"unit_forward\"", "\"live bytes\""}) {
    EXPECT_NE(trace.find(span), std::string::npos) << span;
  }
}

// A report that cannot be written fails at once (exit 1), before minutes of measuring.
TEST_F(MemoryBenchTest, AnUnwritableReportFailsBeforeMeasuring) {
  const ProgramResult p = bench({"--workload", "resnet", "--techniques", "none,recompute", "--json",
                                 dir_.file("missing/m.json")});
  EXPECT_EQ(p.code, 1) << p.err;
  EXPECT_NE(p.err.find("cannot write"), std::string::npos) << p.err;
  EXPECT_EQ(p.out, "");
}

TEST_F(MemoryBenchTest, UnknownTechniquesAndWorkloadsExitWithTwo) {
  const std::string json_path = dir_.file("m.json");
  // Each case with what its one line must say, so that a case refused for another reason fails.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--workload", "resnet", "--techniques", "none,compress"},
       "--techniques has an unknown technique 'compress' (valid: none, relu, recompute, swap, all, "
       "reuse, algo, fp16, or several joined by +)"},
      {{"--workload", "vgg"}, "--workload must be one of npi, resnet, resnet50, not 'vgg'"},
      {{"--workload", "resnet", "--impl", "torch"},
       "--impl torch: only the npi workload has a plain-torch implementation"},
      {{"--workload", "resnet", "--techniques", "none,swap", "--budget", "half"},
       "--budget must be a positive number of bytes or a fraction of none's activation peak such "
       "as 0.5x, not 'half'"},
      {{"--workload", "resnet", "--techniques", "swap,none", "--budget", "0.5x"},
       "--budget 0.5x is a fraction of the none row's activation peak: put none first"},
      {{"--workload", "resnet", "--techniques", "swap", "--swap-bandwidth", "-1"},
       "--swap-bandwidth must be 0 (unthrottled) or at least 1e6 bytes per second"},
      {{"--workload", "resnet", "--techniques", "swap", "--swap-bandwidth", "1"},
       "--swap-bandwidth must be 0 (unthrottled) or at least 1e6 bytes per second"},
      {{"--workload", "resnet", "--techniques", "none,relu", "--budget", "1000000"},
       "--budget applies to recompute, swap, all and algo, none of which is among the techniques"},
      // A device-memory cap on the CPU, a malformed one, a search without a cap.
      {{"--workload", "resnet", "--memory-cap", "8GiB"},
       "--memory-cap limits a device's memory, and the bench runs on the CPU"},
      {{"--workload", "resnet", "--memory-cap", "8 GB"}, "--memory-cap must be bytes"},
      {{"--workload", "resnet", "--find-max-batch"},
       "--find-max-batch searches under a device-memory cap: give --memory-cap"},
      {{"--workload", "resnet", "--find-max-batch", "--memory-cap", "1GiB", "--max-batch", "0"},
       "--max-batch must be at least 1"},
      // A time limit without a search, a negative one.
      {{"--workload", "resnet", "--time-limit", "60"},
       "--time-limit bounds --find-max-batch's search, which is not asked for"},
      {{"--workload", "resnet", "--time-limit", "-1"}, "--time-limit must be seconds, 0 for none"}};
  for (auto [args, message] : cases) {
    args.insert(args.end(), {"--json", json_path});
    const ProgramResult p = bench(args);
    EXPECT_EQ(p.code, 2) << p.err;
    EXPECT_EQ(p.err.rfind("engram: error: " + message, 0), 0u) << p.err;
    EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;
  }
  const ProgramResult negative = bench({"--workload", "resnet", "--device", "cuda", "--memory-cap",
                                        "8GiB", "--find-max-batch", "--time-limit", "-1", "--json",
                                        json_path});
  EXPECT_EQ(negative.code, 2);
  EXPECT_NE(negative.err.find("--time-limit must be seconds"), std::string::npos) << negative.err;
  const ProgramResult cap = bench(
      {"--workload", "resnet", "--memory-cap", "0.5", "--find-max-batch", "--json", json_path});
  EXPECT_NE(cap.err.find("--memory-cap limits a device's memory, and the bench runs on the CPU"),
            std::string::npos)
      << cap.err;
  // Reuse records its first step on the caching allocator: its largest batch is none's.
  const ProgramResult search = bench({"--workload", "resnet", "--device", "cuda", "--memory-cap",
                                      "8GiB", "--find-max-batch", "--techniques", "none,relu+reuse",
                                      "--json", json_path});
  EXPECT_EQ(search.code, 2);
  EXPECT_EQ(search.err.rfind("engram: error: --techniques cannot hold reuse with --find-max-batch",
                             0),
            0u)
      << search.err;
  const ProgramResult joined =
      bench({"--workload", "resnet", "--techniques", "none,reuse+zip", "--json", json_path});
  EXPECT_EQ(joined.code, 2);
  EXPECT_NE(joined.err.find("unknown technique 'zip'"), std::string::npos) << joined.err;
  EXPECT_EQ(dir_.entries().count("m.json"), 0u) << "no report after a usage error";
}

}  // namespace
}  // namespace engram
