#include "bench/MaxBatchReport.h"

namespace engram::bench::detail {

using json = nlohmann::json;

namespace {

long largest(const json& row) { return row.at("largest_batch").get<long>(); }
bool cut(const json& row) { return row.at("cut_by_time_limit").get<bool>(); }

/// The index of the row of `technique`, or rows.size().
std::size_t row_of(const json& rows, const std::string& technique) {
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].at("technique").get<std::string>() == technique) return i;
  return rows.size();
}

json undecided(const char* bound, double value, const std::string& why) {
  return {{bound, value}, {"undecided", why}};
}

}  // namespace

std::size_t rate_rows(json& rows) {
  std::size_t best = 0;
  const long none = rows.empty() ? 0 : largest(rows[0]);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (none > 0 && !cut(rows[0]) && !cut(rows[i]))
      rows[i]["largest_batch_ratio_vs_none"] =
          static_cast<double>(largest(rows[i])) / static_cast<double>(none);
    if (largest(rows[i]) > largest(rows[best])) best = i;
  }
  return best;
}

std::size_t compared_row(const json& rows, std::size_t best) {
  const std::size_t all = row_of(rows, "all");
  return all < rows.size() && largest(rows[all]) > 0 ? all : best;
}

std::optional<std::pair<std::string, double>> fastest_variant(const json& at_equal) {
  std::optional<std::pair<std::string, double>> fastest;
  for (auto it = at_equal.begin(); it != at_equal.end(); ++it) {
    const double ms = it.value().at("step_ms").get<double>();
    if (!fastest || ms < fastest->second) fastest = std::make_pair(it.key(), ms);
  }
  return fastest;
}

json goals(const json& report) {
  const json& rows = report.at("rows");
  const std::size_t all = row_of(rows, "all");
  const std::size_t none = row_of(rows, "none");
  json batch;
  if (all == rows.size() || none == rows.size()) {
    batch = undecided("at_least", kGoalBatchVsNone, "the run has no all row or no none row");
  } else if (cut(rows[all]) || cut(rows[none])) {
    batch = undecided("at_least", kGoalBatchVsNone,
                      "the time limit cut the search of none or of all");
  } else if (largest(rows[none]) == 0) {
    batch = undecided("at_least", kGoalBatchVsNone, "none trained at no batch tried");
  } else {
    const double ratio =
        static_cast<double>(largest(rows[all])) / static_cast<double>(largest(rows[none]));
    batch = {{"at_least", kGoalBatchVsNone}, {"ratio", ratio}, {"met", ratio >= kGoalBatchVsNone}};
  }
  json step;
  const json* equal = report.contains("equal_batch") ? &report.at("equal_batch") : nullptr;
  if (all == rows.size() || largest(rows[all]) == 0) {
    step = undecided("at_most", kGoalStepVsFastestPeer, "all trained at no batch tried");
  } else if (equal == nullptr) {
    step = undecided("at_most", kGoalStepVsFastestPeer,
                     "no PyTorch variant was timed at the equal batch");
  } else if (equal->at("technique").get<std::string>() != "all") {
    step = undecided("at_most", kGoalStepVsFastestPeer, "the equal batch timed another row");
  } else if (equal->contains("engram_not_run")) {
    step = undecided("at_most", kGoalStepVsFastestPeer,
                     "the time limit left out all's trial at the equal batch");
  } else if (equal->contains("engram_did_not_train")) {
    step = {{"at_most", kGoalStepVsFastestPeer}, {"met", false},
            {"why", "all did not train at the equal batch: " +
                        equal->at("engram_did_not_train").get<std::string>()}};
  } else {
    const double ratio = equal->at("time_ratio_vs_fastest_peer").get<double>();
    step = {{"at_most", kGoalStepVsFastestPeer},
            {"ratio", ratio},
            {"met", ratio <= kGoalStepVsFastestPeer}};
  }
  return {{"all_batch_vs_none", batch}, {"all_step_vs_fastest_peer", step}};
}

bool complete(const json& report) {
  if (report.contains("techniques_not_reached") || report.contains("peer_not_run")) return false;
  for (const json& row : report.at("rows"))
    if (cut(row)) return false;
  if (report.contains("peer") && report.at("peer").value("cut_by_time_limit", false))
    return false;
  return !(report.contains("equal_batch") && report.at("equal_batch").contains("engram_not_run"));
}

}  // namespace engram::bench::detail
