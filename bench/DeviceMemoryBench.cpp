#include "bench/DeviceMemoryBench.h"

#include "bench/BenchSupport.h"
#include "bench/MemoryBenchParts.h"
#include "common/AtomicFile.h"
#include "memory/ArenaPlanner.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/PinnedCopy.h"
#include "memory/SwapStore.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/Device.h"
#include "trainer/Stepper.h"
#include "trainer/Trainer.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace engram::bench {
namespace {

using json = nlohmann::json;
using memory::Tag;
using Clock = std::chrono::steady_clock;
/// The arena's alignment: the caching allocator's block rounding.
constexpr std::int64_t kArenaAlignment = 512;

constexpr long kDefaultBatch = 32;

/// One row: `technique` trained on a fresh copy of the network (the same seed: the same weights)
/// for `warmups` steps and `o.steps` measured ones.
struct DeviceRow {
  json row;
  std::vector<double> losses;
  std::vector<at::Tensor> parameters;  ///< after the last step, on the CPU
  memory::DeviceMemoryWindow last;
  json config;
  json swap;  ///< the swap store's figures, for a row that swaps
};

DeviceRow measure_row(const MemoryBenchOptions& o, const std::string& technique, long batch,
                      const c10::Device& device, bool deterministic, int warmups) {
  memory::CudaMemoryTracker& tracker = memory::CudaMemoryTracker::install(device.index());
  const c10::cuda::CUDAGuard on_device(device);
  // The segments an earlier row's network left cached go back to the device, so that each
  // row's reserved bytes are its own.
  trainer::release_cached_device_memory(device);
  detail::PreparedWorkload w = detail::make_resnet(o, batch);
  trainer::Workload& workload = *w.workload;
  {
    memory::TagGuard tag(Tag::parameter);
    workload.to_device(device);
  }
  const auto params = workload.parameters();
  std::int64_t parameter_count = 0;
  for (const auto& p : params) parameter_count += p.numel();
  const std::vector<std::size_t>& examples = w.batch;

  trainer::TrainingOptions to = detail::row_training_options(o, technique, batch);
  to.device = o.device;
  to.deterministic = deterministic;
  to.memory.cap = o.memory_cap;
  trainer::TrainingSession session(workload, to);
  auto step = [&] {
    const double loss = session.step(examples).loss.item<double>();
    c10::cuda::device_synchronize();
    // Every gradient counted as a gradient from its first byte (the window's replay applies the
    // final tag), as the CPU bench's retag does: on CUDA the layers' own retag reaches only the
    // CPU tracker, and autograd allocates the others.
    for (const auto& p : params) tracker.retag(p.grad(), Tag::gradient);
    return loss;
  };
  DeviceRow r;
  detail::ReuseNotes reuse;
  // Warm-up: optimizer state, cuDNN's plans, and a reuse row's plan settled.
  for (int i = 0; i < warmups; ++i) {
    r.losses.push_back(step());
    reuse.note(session.stepper().last_reuse(), /*is_measured=*/false);
  }

  std::vector<double> ms;
  std::vector<std::int64_t> peaks, activation_peaks, activation_above_start, reserved_at_peak,
      reserved_peaks, fragmentation;
  for (long i = 0; i < o.steps; ++i) {
    c10::cuda::device_synchronize();
    tracker.begin_window();
    const auto start = Clock::now();
    r.losses.push_back(step());
    reuse.note(session.stepper().last_reuse(), /*is_measured=*/true);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    r.last = tracker.end_window();
    const memory::DeviceMemoryWindow& last = r.last;
    peaks.push_back(last.peak_bytes);
    activation_peaks.push_back(last.activation_peak_bytes);
    // What the step's activations add to what was live before it but is no parameter, gradient
    // or optimizer state: the cuBLAS handles' workspaces, made by the warm-up step's first
    // products and kept by the allocator for the process's life.
    const auto& at_start = last.start_live_by_tag;
    const std::int64_t persistent =
        last.start_live_bytes - at_start[static_cast<std::size_t>(Tag::parameter)] -
        at_start[static_cast<std::size_t>(Tag::gradient)] -
        at_start[static_cast<std::size_t>(Tag::optimizer_state)];
    activation_above_start.push_back(last.activation_peak_bytes - persistent);
    reserved_at_peak.push_back(last.reserved_at_peak_bytes);
    reserved_peaks.push_back(last.reserved_peak_bytes);
    fragmentation.push_back(last.fragmentation_bytes);
  }
  for (const auto& p : params) r.parameters.push_back(p.detach().to(at::kCPU));
  if (const memory::SwapStore* swap = session.memory().swap_store()) {
    // Since planning: the warm-up steps and the measured ones.
    const memory::SwapStats st = swap->stats();
    const double steps = static_cast<double>(o.steps + warmups);
    auto rate = [](std::int64_t bytes, std::int64_t ns) {
      return ns > 0 ? static_cast<double>(bytes) / (static_cast<double>(ns) / 1e9) : 0.0;
    };
    r.swap = json{{"swapped_out_bytes_per_step", static_cast<double>(st.swapped_out_bytes) / steps},
                  {"swapped_in_bytes_per_step", static_cast<double>(st.swapped_in_bytes) / steps},
                  {"prefetched", st.prefetched},
                  {"on_demand", st.on_demand},
                  {"prefetches_refused", st.prefetches_refused},
                  {"stall_ms_per_step", static_cast<double>(st.stall_ns) / 1e6 / steps},
                  // The pinned copies' own time (events on the copy stream), the bus's work.
                  {"device_to_host_bytes_per_s", rate(st.swapped_out_bytes, st.copy_out_ns)},
                  {"host_to_device_bytes_per_s", rate(st.swapped_in_bytes, st.copy_in_ns)},
                  {"io_thread_swap_out_ms_per_step",
                   static_cast<double>(st.swap_out_ns) / 1e6 / steps},
                  {"io_thread_swap_in_ms_per_step",
                   static_cast<double>(st.swap_in_ns) / 1e6 / steps}};
  }
  auto largest = [](const std::vector<std::int64_t>& v) {
    return v.empty() ? std::int64_t{0} : *std::max_element(v.begin(), v.end());
  };
  const std::size_t worst = static_cast<std::size_t>(
      std::max_element(peaks.begin(), peaks.end()) - peaks.begin());
  r.row = json{{"technique", technique},
               {"device", trainer::describe_device(device)},
               {"deterministic", deterministic},
               {"peak_bytes", largest(peaks)},
               {"peak_bytes_per_step", peaks},
               {"activation_peak_bytes", largest(activation_peaks)},
               {"activation_peak_bytes_per_step", activation_peaks},
               {"activation_peak_above_step_start_bytes", largest(activation_above_start)},
               {"reserved_at_peak_bytes", reserved_at_peak.at(worst)},
               {"reserved_peak_bytes", largest(reserved_peaks)},
               {"fragmentation_bytes", fragmentation.at(worst)},
               {"fragmentation_bytes_per_step", fragmentation},
               {"live_bytes_by_tag_at_step_start",
                detail::bytes_by_tag(r.last.start_live_by_tag)},
               {"unmodelled_allocations", tracker.unmodelled_allocations()},
               {"step_ms", median(ms)},
               {"step_ms_per_step", ms},
               {"losses", r.losses}};
  if (reuse.measured.empty()) {
    r.row["device_arena_plan"] = detail::device_arena_plan(r.last);
  } else {
    // Served: the arena is one allocation in the window, the blocks inside it are not, so the
    // row's live and reserved peaks are what the device held with it.
    r.row["reuse"] = reuse.to_json();
  }
  r.config = w.config;
  r.config["parameters"] = parameter_count;
  return r;
}

/// Against the none row: memory and time ratios, and whether the losses and the parameters
/// after the last step are the same bits (the techniques on the device are lossless).
void compare_with_none(const DeviceRow& none, DeviceRow& other) {
  const auto ratio = [](const json& a, const json& b) { return a.get<double>() / b.get<double>(); };
  other.row["peak_ratio"] = ratio(other.row["peak_bytes"], none.row["peak_bytes"]);
  other.row["activation_peak_ratio"] =
      ratio(other.row["activation_peak_bytes"], none.row["activation_peak_bytes"]);
  other.row["reserved_peak_ratio"] =
      ratio(other.row["reserved_peak_bytes"], none.row["reserved_peak_bytes"]);
  other.row["time_ratio"] = ratio(other.row["step_ms"], none.row["step_ms"]);
  double largest = 0;
  bool identical = other.losses == none.losses;
  for (std::size_t i = 0; i < none.parameters.size(); ++i) {
    identical = identical && at::equal(none.parameters[i], other.parameters[i]);
    largest = std::max(
        largest, (none.parameters[i] - other.parameters[i]).abs().max().item<double>());
  }
  other.row["bit_identical_to_none"] = identical;
  other.row["max_abs_parameter_difference_vs_none"] = largest;
}

}  // namespace

json detail::device_arena_plan(const memory::DeviceMemoryWindow& w) {
  std::vector<memory::AllocationEvent> events;
  events.reserve(w.events.size());
  for (const auto& e : w.events) events.push_back({e.allocation, e.bytes});
  std::int64_t outliving = 0;
  const std::vector<memory::BlockUse> blocks = memory::step_blocks(events, &outliving);
  const memory::ArenaPlan plan = memory::plan_arena(blocks, kArenaAlignment);
  const std::int64_t step = w.start_live_bytes + outliving + plan.arena_bytes;
  return json{{"served", false},
              {"blocks", blocks.size()},
              {"arena_bytes", plan.arena_bytes},
              {"lower_bound_bytes", plan.lower_bound},
              {"strategy", memory::strategy_name(plan.strategy)},
              {"start_live_bytes", w.start_live_bytes},
              {"outliving_bytes", outliving},
              {"arena_step_bytes", step},
              {"reserved_peak_bytes", w.reserved_peak_bytes},
              {"arena_step_vs_reserved_peak",
               w.reserved_peak_bytes > 0 ? static_cast<double>(step) /
                                               static_cast<double>(w.reserved_peak_bytes)
                                         : 0.0}};
}

void run_device_memory_bench(const MemoryBenchOptions& o, std::ostream& out) {
  const c10::Device device = trainer::resolve_device(o.device);
  const long batch = o.batch > 0 ? o.batch : kDefaultBatch;
  // Before the first CUDA tensor, so that every byte and segment is seen.
  memory::CudaMemoryTracker::install(device.index());
  if (!memory::CudaMemoryTracker::hooked())
    throw std::runtime_error("the CUDA allocator's trace hook is not attached (" +
                             memory::CudaMemoryTracker::hook_status() + ")");
  // With technique rows beside none, every row computes deterministically, so that a lossless
  // technique's parameters can be compared bit for bit.
  const bool deterministic = o.techniques.size() > 1;
  std::vector<DeviceRow> rows;
  const int warmups = detail::warmup_steps(o.techniques);
  for (const auto& technique : o.techniques) {
    rows.push_back(measure_row(o, technique, batch, device, deterministic, warmups));
    if (rows.size() > 1) compare_with_none(rows.front(), rows.back());
  }
  const json& config = rows.front().config;
  json report_rows = json::array();
  std::optional<memory::BusBandwidth> bus;
  for (auto& r : rows) {
    if (!r.swap.is_null()) {
      // The copies' rate against the bus's peak, measured here with the same pinned copies.
      if (!bus) bus = memory::measure_bus_bandwidth(device);
      r.swap["bus_device_to_host_bytes_per_s"] = bus->device_to_host;
      r.swap["bus_host_to_device_bytes_per_s"] = bus->host_to_device;
      r.swap["device_to_host_share_of_bus"] =
          r.swap["device_to_host_bytes_per_s"].get<double>() / bus->device_to_host;
      r.swap["host_to_device_share_of_bus"] =
          r.swap["host_to_device_bytes_per_s"].get<double>() / bus->host_to_device;
      r.row["swap"] = r.swap;
    }
    report_rows.push_back(r.row);
  }
  json report{{"benchmark", "memory"},
              {"workload", o.workload},
              {"device", trainer::describe_device(device)},
              {"allocator_hook", memory::CudaMemoryTracker::hook_status()},
              {"config", config},
              {"steps", o.steps},
              {"warmup_steps", warmups},
              {"rows", report_rows}};

  if (!o.skip_peer) {
    std::vector<std::string> peer_args{"--steps", std::to_string(o.steps),
                                       "--warmup", std::to_string(warmups),
                                       "--device", "cuda:" + std::to_string(device.index())};
    if (deterministic) peer_args.push_back("--deterministic");  // as the rows compute
    json peer = detail::run_resnet_peer(o, batch, config, "resnet_cuda_peer.py", "cuda-peer",
                                        peer_args);
    auto& r = report["rows"][0];
    r["peak_ratio_vs_torch"] = static_cast<double>(r.at("peak_bytes").get<std::int64_t>()) /
                               static_cast<double>(peer.at("peak_bytes").get<std::int64_t>());
    r["time_ratio_vs_torch"] = r.at("step_ms").get<double>() / peer.at("step_ms").get<double>();
    report["peer"] = peer;
  }
  if (!o.trace_path.empty())
    memory::write_chrome_trace(o.trace_path, rows.front().last,
                               "engram bench memory resnet " + o.device);
  write_file_atomically(o.json_path, report.dump(2) + "\n");

  auto mib = [](const json& bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f",
                  static_cast<double>(bytes.get<std::int64_t>()) / 1048576.0);
    return std::string(text);
  };
  out << o.workload << ", batch " << batch << ", " << report["device"].get<std::string>() << "\n";
  for (const auto& r : report["rows"]) {
    out << "  " << r["technique"].get<std::string>() << ": peak " << mib(r["peak_bytes"])
        << " MiB, activation peak " << mib(r["activation_peak_bytes"])
        << " MiB, reserved at the peak " << mib(r["reserved_at_peak_bytes"])
        << " MiB (fragmentation " << mib(r["fragmentation_bytes"]) << " MiB), step "
        << r["step_ms"].get<double>() << " ms";
    if (r.contains("bit_identical_to_none"))
      out << "; bit-identical to none: " << (r["bit_identical_to_none"].get<bool>() ? "yes" : "no");
    out << "\n";
    if (r.contains("device_arena_plan")) {
      const json& a = r["device_arena_plan"];
      out << "    arena (planned, not served): " << mib(a["arena_bytes"])
          << " MiB for the step's transient allocations (lower bound "
          << mib(a["lower_bound_bytes"]) << " MiB); a step served from it would hold "
          << mib(a["arena_step_bytes"]) << " MiB against " << mib(a["reserved_peak_bytes"])
          << " MiB reserved by the caching allocator\n";
    }
    if (r.contains("reuse")) {
      const json& a = r["reuse"];
      out << "    arena (served): " << mib(a["arena_bytes"]) << " MiB (lower bound "
          << mib(a["lower_bound_bytes"]) << " MiB), hit rate " << a["hit_rate"].get<double>()
          << ", " << a["conflicts"].get<long>() << " conflicts, " << a["misses"].get<long>()
          << " misses over the measured steps\n";
    }
    if (r.contains("swap")) {
      const json& w = r["swap"];
      out << "    swap: " << w["swapped_out_bytes_per_step"].get<double>() / 1048576.0
          << " MiB out per step, to the host at "
          << w["device_to_host_bytes_per_s"].get<double>() / 1e9 << " GB/s ("
          << w["device_to_host_share_of_bus"].get<double>() << " of the bus's "
          << w["bus_device_to_host_bytes_per_s"].get<double>() / 1e9 << "), back at "
          << w["host_to_device_bytes_per_s"].get<double>() / 1e9 << " GB/s ("
          << w["host_to_device_share_of_bus"].get<double>() << "), stall "
          << w["stall_ms_per_step"].get<double>() << " ms per step\n";
    }
  }
  if (report.contains("peer")) {
    const auto& p = report["peer"];
    const auto& r = report["rows"][0];
    out << "  PyTorch eager: max_memory_allocated " << mib(p["peak_bytes"]) << " MiB, step "
        << p["step_ms"].get<double>() << " ms; none / torch: peak "
        << r["peak_ratio_vs_torch"].get<double>() << ", time "
        << r["time_ratio_vs_torch"].get<double>() << "\n";
  }
  out << "wrote " << o.json_path << "\n";
}

}  // namespace engram::bench
