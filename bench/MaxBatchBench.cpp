#include "bench/BatchSearch.h"
#include "bench/BenchSupport.h"
#include "bench/DeviceMemoryBench.h"
#include "bench/MaxBatchReport.h"
#include "bench/MemoryBenchParts.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/UnitPlanner.h"
#include "trainer/Device.h"
#include "trainer/MemoryCap.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/Trainer.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace engram::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kPrecision = 0.125;    // the search stops within 12.5% of the largest batch
constexpr long kDefaultStart = 8;

/// The first line of an error's message (c10's carry a stack trace after it).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

/// One trial: a fresh network trained at `batch` with `technique` under the cap, one warm-up
/// step and `o.steps` measured ones. nullopt when it ran out of device memory (or the planner
/// found no plan under the cap); the reason in `why`.
std::optional<json> trial(const MemoryBenchOptions& o, const std::string& technique, long batch,
                          const c10::Device& device, std::string& why) {
  memory::CudaMemoryTracker& tracker = memory::CudaMemoryTracker::install(device.index());
  trainer::release_cached_device_memory(device);
  std::optional<json> result;
  try {
    detail::PreparedWorkload w = detail::make_resnet(o, batch);
    trainer::TrainingOptions to = detail::row_training_options(o, technique, batch);
    to.device = o.device;
    to.memory.cap = o.memory_cap;
    trainer::TrainingSession session(*w.workload, to);
    const std::vector<std::size_t>& examples = w.batch;
    session.step(examples);  // warm-up: the optimizer's state, cuDNN's plans
    trainer::synchronize(device);
    std::vector<double> ms;
    std::int64_t peak = 0, reserved_peak = 0;
    for (long i = 0; i < o.steps; ++i) {
      tracker.begin_window();
      const auto start = Clock::now();
      session.step(examples);
      trainer::synchronize(device);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      const memory::DeviceMemoryWindow window = tracker.end_window();
      peak = std::max(peak, window.peak_bytes);
      reserved_peak = std::max(reserved_peak, window.reserved_peak_bytes);
    }
    const double step_ms = median(ms);
    json r{{"batch", batch},
           {"step_ms", step_ms},
           {"step_ms_per_step", ms},
           {"images_per_s", static_cast<double>(batch) / (step_ms / 1000.0)},
           {"peak_bytes", peak},
           {"reserved_peak_bytes", reserved_peak},
           {"cap_bytes", session.memory_cap_bytes()},
           {"planned_under_cap", session.memory().plans()}};
    if (session.memory().uses_units()) {
      long recomputed = 0;
      for (const auto& c : session.memory().memory_plan().choices) recomputed += c.recompute;
      r["units"] = session.memory().memory_plan().choices.size();
      r["units_recomputed"] = recomputed;
      r["planned_activation_peak_bytes"] = session.memory().memory_plan().activation_peak_bytes;
    }
    result = std::move(r);
  } catch (const c10::OutOfMemoryError& e) {
    why = "out of device memory: " + first_line(e.what());
  } catch (const c10::Error& e) {
    // cuDNN with no engine whose workspace fits, a library's own failed allocation.
    if (!says_out_of_memory(e.what())) throw;
    why = "out of memory: " + first_line(e.what());  // the device's, or pinned host memory
  } catch (const memory::InfeasibleBudget& e) {
    why = std::string("no plan under the cap: ") + e.what();
  } catch (const InvalidOption& e) {
    if (e.option() != "memory.cap") throw;
    why = e.what();  // the cap leaves nothing beside the step's state
  }
  if (tracker.window_open()) tracker.end_window();
  trainer::release_cached_device_memory(device);
  return result;
}

/// A technique's search, aimed at `cap` by what the allocator reserved in the trials that trained
/// (bench/BatchSearch.h) unless the row is planned under the cap, no trial started once
/// `may_go_on` says no; the row of the report.
json search_row(const MemoryBenchOptions& o, const std::string& technique, long start,
                std::int64_t cap, double prior_bytes_per_example, const c10::Device& device,
                const std::function<bool()>& may_go_on, std::ostream& out) {
  std::vector<json> tried;
  json at_largest;
  BatchSearchOptions so;
  so.start = std::min(start, o.max_batch);
  so.limit = o.max_batch;
  so.precision = kPrecision;
  so.cap_bytes = cap;
  so.prior_bytes_per_example = prior_bytes_per_example;
  so.may_go_on = may_go_on;
  const BatchSearch s = largest_training_batch(so, [&](long batch) -> TrialOutcome {
    std::string why;
    const std::optional<json> r = trial(o, technique, batch, device, why);
    json t{{"batch", batch}, {"trained", r.has_value()}};
    if (r) {
      t["step_ms"] = r->at("step_ms");
      t["peak_bytes"] = r->at("peak_bytes");
      t["reserved_peak_bytes"] = r->at("reserved_peak_bytes");
    } else {
      t["why"] = why;
    }
    tried.push_back(t);
    out << "  " << technique << " batch " << batch << ": "
        << (r ? "trained, step " + std::to_string(r->at("step_ms").get<double>()) + " ms"
              : "did not train (" + why + ")")
        << std::endl;
    if (r && (at_largest.is_null() || batch > at_largest.at("batch").get<long>())) at_largest = *r;
    if (!r) return false;
    // A row planned under the cap (recompute, swap, algo) fills what the cap leaves at every
    // batch its plan fits, so no line through its trials names the cap's batch: it doubles.
    if (r->at("planned_under_cap").get<bool>()) return true;
    return {true, r->at("reserved_peak_bytes").get<std::int64_t>()};
  });
  for (std::size_t i = 0; i < tried.size() && i < s.trials.size(); ++i)
    tried[i]["aimed"] = s.trials[i].aimed;
  json row{{"technique", technique},
           {"largest_batch", s.largest},
           {"reserved_bytes_per_example", bytes_per_example(s.trials)},
           {"smallest_failed_batch", s.smallest_failed},
           {"cut_by_time_limit", s.cut},
           {"trials", tried}};
  if (s.largest > 0) row["at_largest"] = at_largest;
  if (s.cut) out << "  " << technique << ": the time limit cut the search\n";
  return row;
}

}  // namespace

void run_max_batch_bench(const MemoryBenchOptions& o, std::ostream& out) {
  // No trial starts past the time limit, counted from here (o.time_limit seconds; 0: none).
  const auto began = Clock::now();
  const auto deadline = began + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(o.time_limit));
  const std::function<bool()> may_go_on = [&] {
    return o.time_limit <= 0 || Clock::now() < deadline;
  };
  const c10::Device device = trainer::resolve_device(o.device);
  // Before the first CUDA tensor, so that every byte and segment is seen.
  memory::CudaMemoryTracker::install(device.index());
  if (!memory::CudaMemoryTracker::hooked())
    throw std::runtime_error("the CUDA allocator's trace hook is not attached (" +
                             memory::CudaMemoryTracker::hook_status() + ")");
  const std::int64_t device_bytes = trainer::device_memory_bytes(device);
  const std::int64_t cap = trainer::resolve_memory_cap(o.memory_cap, device_bytes, "memory_cap");
  const detail::PreparedWorkload described = detail::make_resnet(o, 1);
  json config = described.config;
  std::int64_t parameters = 0;
  for (const auto& p : described.workload->parameters()) parameters += p.numel();
  config["parameters"] = parameters;
  out << o.workload << " under a cap of " << memory::mib(cap) << " on "
      << trainer::describe_device(device) << "\n";

  json rows = json::array();
  json not_reached = json::array();  // techniques the time limit left out
  long start = o.batch > 0 ? o.batch : kDefaultStart;
  double prior = 0;  // bytes per example of the first row's line, once it has one
  for (const auto& technique : o.techniques) {
    if (!rows.empty() && !may_go_on()) {
      not_reached.push_back(technique);
      continue;
    }
    rows.push_back(search_row(o, technique, start, cap, prior, device, may_go_on, out));
    // Every other row starts where none stopped (a technique lowers the memory a batch needs),
    // aimed from there along none's slope until it has its own.
    if (rows.size() == 1 && rows[0].at("largest_batch").get<long>() > 0) {
      start = rows[0].at("largest_batch").get<long>();
      prior = rows[0].at("reserved_bytes_per_example").get<double>();
    }
  }
  const std::size_t best = detail::rate_rows(rows);
  // Timed against PyTorch at the equal batch: all (issue 35's goal), else the best row.
  const std::size_t compared = detail::compared_row(rows, best);
  json report{{"benchmark", "memory_max_batch"},
              {"workload", o.workload},
              {"device", trainer::describe_device(device)},
              {"device_memory_bytes", device_bytes},
              {"cap", o.memory_cap},
              {"cap_bytes", cap},
              {"search", {{"start", o.batch > 0 ? o.batch : kDefaultStart},
                          {"limit", o.max_batch},
                          {"precision", kPrecision},
                          {"aimed_by", "reserved_peak_bytes"},
                          {"prior_bytes_per_example", prior},
                          {"steps_per_trial", o.steps}}},
              {"allocator_hook", memory::CudaMemoryTracker::hook_status()},
              {"config", config},
              {"rows", rows},
              {"best", rows[best].at("technique")},
              {"time_limit_seconds", o.time_limit}};
  if (!not_reached.empty()) report["techniques_not_reached"] = not_reached;

  if (!o.skip_peer && !may_go_on()) {
    report["peer_not_run"] = "the time limit ran out before it";
  } else if (!o.skip_peer) {
    const long compared_largest = rows[compared].at("largest_batch").get<long>();
    json peer = detail::run_resnet_peer(
        o, 1, config, "resnet_cap_peer.py", "cap-peer",
        {"--cap-bytes", std::to_string(cap),
         "--start", std::to_string(std::min(start, o.max_batch)),
         "--limit", std::to_string(o.max_batch), "--precision", std::to_string(kPrecision),
         "--prior-bytes-per-example", std::to_string(prior),
         "--steps", std::to_string(o.steps), "--equal-batch-limit",
         std::to_string(std::max(compared_largest, 1L)),
         "--device", "cuda:" + std::to_string(device.index()),
         // The same deadline (steady_clock is CLOCK_MONOTONIC, as Python's time.monotonic).
         "--monotonic-deadline",
         std::to_string(o.time_limit > 0
                            ? std::chrono::duration<double>(deadline.time_since_epoch()).count()
                            : 0.0)});
    report["peer"] = peer;
    // The compared row against the fastest peer that trains at the equal batch.
    const long equal = peer.at("equal_batch").at("batch").get<long>();
    const auto fastest = detail::fastest_variant(peer.at("equal_batch").at("rows"));
    if (compared_largest > 0 && equal > 0 && fastest) {
      std::string why;
      const std::string technique = rows[compared].at("technique").get<std::string>();
      json cmp{{"batch", equal}, {"technique", technique}, {"fastest_peer", fastest->first},
               {"fastest_peer_step_ms", fastest->second}};
      // The fastest of the variants that ran: the time limit may have left some out.
      if (peer.value("cut_by_time_limit", false)) cmp["peer_cut_by_time_limit"] = true;
      if (!may_go_on()) {
        cmp["engram_not_run"] = "the time limit ran out before it";
      } else if (const std::optional<json> ours = trial(o, technique, equal, device, why)) {
        cmp["engram"] = *ours;
        cmp["time_ratio_vs_fastest_peer"] = ours->at("step_ms").get<double>() / fastest->second;
      } else {
        cmp["engram_did_not_train"] = why;
      }
      report["equal_batch"] = cmp;
    }
  }
  report["goals"] = detail::goals(report);
  const bool cut = !detail::complete(report);
  report["complete"] = !cut;
  write_file_atomically(o.json_path, report.dump(2) + "\n");

  out << "largest batch under " << memory::mib(cap) << ":\n";
  for (const auto& r : report["rows"]) {
    out << "  " << r["technique"].get<std::string>() << ": "
        << (r["cut_by_time_limit"].get<bool>() ? "at least " : "")
        << r["largest_batch"].get<long>();
    if (r.contains("at_largest")) {
      const json& a = r["at_largest"];
      out << " (" << a["images_per_s"].get<double>() << " images/s, peak "
          << memory::mib(a["peak_bytes"].get<std::int64_t>()) << ", reserved "
          << memory::mib(a["reserved_peak_bytes"].get<std::int64_t>()) << ")";
    }
    if (r.contains("largest_batch_ratio_vs_none"))
      out << ", " << r["largest_batch_ratio_vs_none"].get<double>() << "x none";
    out << "\n";
  }
  if (report.contains("peer")) {
    for (const auto& r : report["peer"]["rows"]) {
      out << "  PyTorch " << r["variant"].get<std::string>() << ": "
          << (r.value("cut_by_time_limit", false) ? "at least " : "")
          << r["largest_batch"].get<long>() << "\n";
    }
  }
  if (report.contains("equal_batch")) {
    const json& c = report["equal_batch"];
    out << "at batch " << c["batch"].get<long>() << ": " << c["technique"].get<std::string>();
    if (c.contains("time_ratio_vs_fastest_peer"))
      out << " takes " << c["time_ratio_vs_fastest_peer"].get<double>() << "x the step of ";
    else if (c.contains("engram_not_run"))
      out << " was not run (the time limit), against ";
    else
      out << " did not train, against ";
    out << "PyTorch " << c["fastest_peer"].get<std::string>() << "\n";
  }
  for (const auto& [name, goal] : report["goals"].items()) {
    out << "goal " << name << " (" << (goal.contains("at_least") ? "at least " : "at most ")
        << goal.value("at_least", goal.value("at_most", 0.0)) << "x): ";
    if (goal.contains("undecided"))
      out << "undecided, " << goal["undecided"].get<std::string>();
    else if (goal.contains("ratio"))
      out << goal["ratio"].get<double>() << "x, " << (goal["met"].get<bool>() ? "met" : "not met");
    else
      out << "not met, " << goal["why"].get<std::string>();
    out << "\n";
  }
  if (cut) out << "cut short by the time limit of " << o.time_limit << " s (see the report)\n";
  out << "wrote " << o.json_path << "\n";
}

}  // namespace engram::bench
