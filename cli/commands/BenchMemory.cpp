// engram bench memory: training-step memory per memory technique, beside PyTorch's profiler.
#include "bench/MemoryBench.h"
#include "cli/Command.h"
#include "cli/Flags.h"
#include "trainer/MemoryTechnique.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {
namespace {

void add_workload_flags(CLI::App* sub, bench::MemoryBenchOptions& mo) {
  sub->add_option("--steps", mo.steps, "Measured steps (after one warm-up step; three with reuse)")
      ->capture_default_str();
  // Given, at least 1: 0 would select the default batch without a word.
  sub->add_option("--batch", mo.batch,
                  "Examples per step (default: 8 traces for npi, 32 images for resnet)")
      ->check(CLI::Range(1L, 65536L));
  sub->add_option("--image-size", mo.image_size,
                  "resnet, resnet50: image height and width (default: 32, 224)");
  sub->add_option("--width", mo.width,
                  "resnet: channels of the first stage (stages: 1x, 2x, 4x, 8x)")
      ->capture_default_str();
  sub->add_option("--hidden", mo.hidden, "npi: LSTM width")->capture_default_str();
  sub->add_option("--impl", mo.impl,
                  "npi: layer implementation, engram (nn/) or torch (plain torch modules)")
      ->capture_default_str();
  sub->add_option("--seed", mo.seed, "Random seed")->check(seed_check())->capture_default_str();
  sub->add_option("--threads", mo.threads, "Intra-op threads, C++ and peer alike")
      ->capture_default_str();
}

}  // namespace

Command register_bench_memory(CLI::App& parent) {
  auto mo = std::make_shared<bench::MemoryBenchOptions>();
  CLI::App* sub = parent.add_subcommand(
      "memory",
      "Training-step memory (peak, activation peak) per memory technique, exactly counted, "
      "beside PyTorch's profiler (resnet)");
  sub->add_option("--workload", mo->workload,
                  "Workload: npi, resnet (the CIFAR ResNet-18) or resnet50 (ImageNet's ResNet-50)")
      ->required();
  sub->add_option("--techniques", mo->techniques,
                  "Comma-separated memory techniques, one row each: " +
                      trainer::memory_techniques_help() +
                      "; a row may join several with +, e.g. reuse+relu")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--json", mo->json_path, "Write the results here")->required();
  sub->add_option("--trace", mo->trace_path,
                  "Write the last measured step as a Chrome trace here");
  add_workload_flags(sub, *mo);
  sub->add_option("--python", mo->python, "Interpreter with torch for the peer")
      ->capture_default_str();
  sub->add_flag("--no-peer", mo->skip_peer, "Measure C++ only");
  sub->add_option(
      "--budget", mo->budget,
      "Bound on activation_peak_bytes for recompute, swap, all and algo: bytes, or a "
      "fraction of none's activation peak such as 0.5x (none first); without it "
      "every unit is recomputed or swapped, every layer on its least-workspace algorithm");
  sub->add_option(
         "--swap-bandwidth", mo->swap_bandwidth,
         "Throttle the spill file to this many bytes per second, at least 1e6 (0: unthrottled)")
      ->capture_default_str();
  sub->add_flag("--explain", mo->explain,
                "Print the swap/recompute and algorithm plans of each row");
  sub->add_option(
      "--memory-cap", mo->memory_cap,
      "On a GPU: what the allocator may hold while a row trains, in bytes (8GiB) or "
      "as a fraction of the device (0.5); recompute, swap and algo are planned under it");
  sub->add_flag("--find-max-batch", mo->find_max_batch,
                "With --memory-cap: each row's largest batch that trains under the cap, beside "
                "PyTorch's eager and checkpointing under the same cap");
  sub->add_option("--max-batch", mo->max_batch, "--find-max-batch tries no larger batch")
      ->capture_default_str();
  sub->add_option("--time-limit", mo->time_limit,
                  "--find-max-batch starts no trial after this many seconds and reports what it "
                  "found, saying what was cut (0: no limit)")
      ->capture_default_str();
  FlagTable flags{{"workload", "--workload"},     {"techniques", "--techniques"},
                  {"json_path", "--json"},        {"trace_path", "--trace"},
                  {"steps", "--steps"},           {"batch", "--batch"},
                  {"image_size", "--image-size"}, {"width", "--width"},
                  {"hidden", "--hidden"},         {"impl", "--impl"},
                  {"seed", "--seed"},             {"threads", "--threads"},
                  {"python", "--python"},         {"budget", "--budget"},
                  {"swap_bandwidth", "--swap-bandwidth"}, {"memory_cap", "--memory-cap"},
                  {"find_max_batch", "--find-max-batch"}, {"max_batch", "--max-batch"},
                  {"time_limit", "--time-limit"}};
  add_device_flag(sub, mo->device, flags);
  return {sub,
          [mo](std::ostream& out, std::ostream&) {
            bench::run_memory_bench(*mo, out);
            return 0;
          },
          flags};
}

}  // namespace engram::cli
