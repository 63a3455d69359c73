#pragma once
/// \file
/// The summary of `bench memory --find-max-batch` (bench/MaxBatchBench.cpp): from its rows, the
/// PyTorch peer's report and Engram's trial at the equal batch, the ratios to none, the row timed
/// against PyTorch, the fastest peer there, issue 35's goals and whether the time limit cut
/// anything. Pure functions of the report's JSON, so that the CPU tests what only a GPU run fills
/// in. Internal to bench/.
///
/// \code
///   const std::size_t best = detail::rate_rows(rows);
///   const std::size_t compared = detail::compared_row(rows, best);
///   ...  // the peer, then Engram's trial at its equal batch
///   report["goals"] = detail::goals(report);
///   report["complete"] = detail::complete(report);
/// \endcode

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

namespace engram::bench::detail {

/// Issue 35's goals: `all` trains at least this multiple of none's largest batch ...
inline constexpr double kGoalBatchVsNone = 2.5;
/// ... and at the equal batch its step takes at most this multiple of the fastest peer's.
inline constexpr double kGoalStepVsFastestPeer = 1.0;

/// Adds largest_batch_ratio_vs_none to each row of `rows` (none's row first, each with
/// technique, largest_batch and cut_by_time_limit) where none trained and neither row's search
/// was cut (a cut search's largest batch is only one that trained); returns the index of the
/// row with the largest batch (the first of a tie).
std::size_t rate_rows(nlohmann::json& rows);

/// The row timed against PyTorch at the equal batch: `all`'s where it trained (issue 35's goal is
/// about it), else `best`.
std::size_t compared_row(const nlohmann::json& rows, std::size_t best);

/// The fastest of the peer's variants at the equal batch ({variant: {"step_ms": ...}}): its name
/// and step, or nullopt where none ran there.
std::optional<std::pair<std::string, double>> fastest_variant(const nlohmann::json& at_equal);

/// Issue 35's goals, judged from a report with rows (rate_rows'), and equal_batch where the peer
/// ran: {"all_batch_vs_none": {...}, "all_step_vs_fastest_peer": {...}}, each with its bound
/// (at_least or at_most), and either the measured ratio and whether it is met, or `undecided`
/// saying what the run lacks (no `all` row, a search the time limit cut, no peer at the equal
/// batch). `all` not training at the equal batch, below its own largest, is a goal not met.
nlohmann::json goals(const nlohmann::json& report);

/// Whether nothing of the run was cut by the time limit: no row's search, no technique left out
/// (techniques_not_reached), no peer left out or cut, no equal-batch trial left out.
bool complete(const nlohmann::json& report);

}  // namespace engram::bench::detail
