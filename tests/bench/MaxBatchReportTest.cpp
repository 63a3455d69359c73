#include "bench/MaxBatchReport.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

namespace engram::bench::detail {
namespace {

using json = nlohmann::json;

json row(const std::string& technique, long largest, bool cut = false) {
  return {{"technique", technique}, {"largest_batch", largest}, {"cut_by_time_limit", cut}};
}

/// A report of rows none 40, all 128, relu 56, swap 160, with all timed at the equal batch.
json report_with_equal_batch(double all_ms, double fastest_ms) {
  json rows = json::array({row("none", 40), row("all", 128), row("relu", 56), row("swap", 160)});
  rate_rows(rows);
  return {{"rows", rows},
          {"peer", {{"cut_by_time_limit", false}}},
          {"equal_batch",
           {{"batch", 96},
            {"technique", "all"},
            {"fastest_peer", "checkpoint_non_reentrant"},
            {"fastest_peer_step_ms", fastest_ms},
            {"time_ratio_vs_fastest_peer", all_ms / fastest_ms}}}};
}

TEST(MaxBatchReportTest, RatesEachRowAgainstNoneAndNamesTheLargest) {
  json rows = json::array({row("none", 40), row("all", 128), row("relu", 56), row("swap", 160)});
  EXPECT_EQ(rate_rows(rows), 3u);
  EXPECT_DOUBLE_EQ(rows[0]["largest_batch_ratio_vs_none"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(rows[1]["largest_batch_ratio_vs_none"].get<double>(), 3.2);
  EXPECT_DOUBLE_EQ(rows[2]["largest_batch_ratio_vs_none"].get<double>(), 1.4);
  EXPECT_DOUBLE_EQ(rows[3]["largest_batch_ratio_vs_none"].get<double>(), 4.0);
}

TEST(MaxBatchReportTest, NoRatioFromOrToACutSearchNorFromANoneThatNeverTrained) {
  json cut_none = json::array({row("none", 40, true), row("all", 128)});
  rate_rows(cut_none);
  EXPECT_FALSE(cut_none[1].contains("largest_batch_ratio_vs_none"));
  json cut_all = json::array({row("none", 40), row("all", 128, true), row("relu", 48)});
  rate_rows(cut_all);
  EXPECT_FALSE(cut_all[1].contains("largest_batch_ratio_vs_none"));
  EXPECT_DOUBLE_EQ(cut_all[2]["largest_batch_ratio_vs_none"].get<double>(), 1.2);
  json never = json::array({row("none", 0), row("all", 16)});
  EXPECT_EQ(rate_rows(never), 1u);
  EXPECT_FALSE(never[1].contains("largest_batch_ratio_vs_none"));
}

TEST(MaxBatchReportTest, TheFirstOfATieIsTheLargest) {
  json rows = json::array({row("none", 40), row("recompute", 96), row("all", 96)});
  EXPECT_EQ(rate_rows(rows), 1u);
}

TEST(MaxBatchReportTest, AllIsComparedWithPyTorchWhereItTrainedElseTheLargestRow) {
  const json rows =
      json::array({row("none", 40), row("all", 128), row("relu", 56), row("swap", 160)});
  EXPECT_EQ(compared_row(rows, 3), 1u);
  const json all_never = json::array({row("none", 40), row("all", 0), row("swap", 160)});
  EXPECT_EQ(compared_row(all_never, 2), 2u);
  const json no_all = json::array({row("none", 40), row("swap", 160)});
  EXPECT_EQ(compared_row(no_all, 1), 1u);
}

TEST(MaxBatchReportTest, TheFastestVariantAtTheEqualBatch) {
  const json at_equal = {{"eager", {{"step_ms", 90.0}}},
                         {"checkpoint_reentrant", {{"step_ms", 120.0}}},
                         {"selective", {{"step_ms", 85.5}}}};
  const auto fastest = fastest_variant(at_equal);
  ASSERT_TRUE(fastest.has_value());
  EXPECT_EQ(fastest->first, "selective");
  EXPECT_DOUBLE_EQ(fastest->second, 85.5);
  EXPECT_FALSE(fastest_variant(json::object()).has_value());
}

TEST(MaxBatchReportTest, GoalsMetAndNotMet) {
  const json met = goals(report_with_equal_batch(/*all_ms=*/95.0, /*fastest_ms=*/100.0));
  EXPECT_DOUBLE_EQ(met["all_batch_vs_none"]["ratio"].get<double>(), 3.2);
  EXPECT_TRUE(met["all_batch_vs_none"]["met"].get<bool>());
  EXPECT_DOUBLE_EQ(met["all_batch_vs_none"]["at_least"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(met["all_step_vs_fastest_peer"]["ratio"].get<double>(), 0.95);
  EXPECT_TRUE(met["all_step_vs_fastest_peer"]["met"].get<bool>());

  json slow = report_with_equal_batch(/*all_ms=*/110.0, /*fastest_ms=*/100.0);
  slow["rows"][1]["largest_batch"] = 96;  // 2.4x none's 40
  const json missed = goals(slow);
  EXPECT_FALSE(missed["all_batch_vs_none"]["met"].get<bool>());
  EXPECT_FALSE(missed["all_step_vs_fastest_peer"]["met"].get<bool>());

  json failed = report_with_equal_batch(95.0, 100.0);
  failed["equal_batch"].erase("time_ratio_vs_fastest_peer");
  failed["equal_batch"]["engram_did_not_train"] = "out of device memory";
  const json step = goals(failed)["all_step_vs_fastest_peer"];
  EXPECT_FALSE(step["met"].get<bool>());
  EXPECT_NE(step["why"].get<std::string>().find("out of device memory"), std::string::npos);
}

TEST(MaxBatchReportTest, GoalsUndecidedWhereTheRunLacksWhatJudgesThem) {
  json cut = report_with_equal_batch(95.0, 100.0);
  cut["rows"][0]["cut_by_time_limit"] = true;
  EXPECT_TRUE(goals(cut)["all_batch_vs_none"].contains("undecided"));
  EXPECT_FALSE(goals(cut)["all_batch_vs_none"].contains("met"));

  json no_peer = report_with_equal_batch(95.0, 100.0);
  no_peer.erase("equal_batch");
  EXPECT_TRUE(goals(no_peer)["all_step_vs_fastest_peer"].contains("undecided"));
  EXPECT_TRUE(goals(no_peer)["all_batch_vs_none"]["met"].get<bool>());

  json other = report_with_equal_batch(95.0, 100.0);
  other["equal_batch"]["technique"] = "swap";
  EXPECT_TRUE(goals(other)["all_step_vs_fastest_peer"].contains("undecided"));

  json left_out = report_with_equal_batch(95.0, 100.0);
  left_out["equal_batch"].erase("time_ratio_vs_fastest_peer");
  left_out["equal_batch"]["engram_not_run"] = "the time limit ran out before it";
  EXPECT_TRUE(goals(left_out)["all_step_vs_fastest_peer"].contains("undecided"));

  const json no_all = {{"rows", json::array({row("none", 40), row("swap", 160)})}};
  EXPECT_TRUE(goals(no_all)["all_batch_vs_none"].contains("undecided"));
  EXPECT_TRUE(goals(no_all)["all_step_vs_fastest_peer"].contains("undecided"));
}

TEST(MaxBatchReportTest, CompleteOnlyWhereTheTimeLimitCutNothing) {
  const json whole = report_with_equal_batch(95.0, 100.0);
  EXPECT_TRUE(complete(whole));
  json row_cut = whole;
  row_cut["rows"][2]["cut_by_time_limit"] = true;
  EXPECT_FALSE(complete(row_cut));
  json not_reached = whole;
  not_reached["techniques_not_reached"] = json::array({"swap"});
  EXPECT_FALSE(complete(not_reached));
  json peer_cut = whole;
  peer_cut["peer"]["cut_by_time_limit"] = true;
  EXPECT_FALSE(complete(peer_cut));
  json peer_not_run = whole;
  peer_not_run.erase("peer");
  peer_not_run.erase("equal_batch");
  peer_not_run["peer_not_run"] = "the time limit ran out before it";
  EXPECT_FALSE(complete(peer_not_run));
  json trial_left_out = whole;
  trial_left_out["equal_batch"]["engram_not_run"] = "the time limit ran out before it";
  EXPECT_FALSE(complete(trial_left_out));
}

}  // namespace
}  // namespace engram::bench::detail
