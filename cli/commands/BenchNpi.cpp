// engram bench npi: NPI training throughput beside the PyTorch peer.
#include "bench/NpiBench.h"
#include "cli/Command.h"
#include "cli/Flags.h"

#include <memory>

namespace engram::cli {

Command register_bench_npi(CLI::App& parent) {
  auto bo = std::make_shared<bench::NpiBenchOptions>();
  CLI::App* sub = parent.add_subcommand(
      "npi", "NPI training throughput (traces/s) at batch 1 and 32, beside the PyTorch peer");
  sub->add_option("--json", bo->json_path, "Write the results here")->required();
  sub->add_option("--task", bo->task, "Task: " + known_tasks())->capture_default_str();
  sub->add_option("--steps", bo->steps, "Timed optimizer steps per batch size")
      ->capture_default_str();
  sub->add_option("--batch", bo->batch_sizes, "Traces per step (repeatable)")
      ->capture_default_str();
  sub->add_option("--threads", bo->threads, "Intra-op threads, C++ and peer alike")
      ->capture_default_str();
  sub->add_option("--hidden", bo->hidden, "LSTM width")->capture_default_str();
  sub->add_option("--seed", bo->seed, "Random seed")->check(seed_check())->capture_default_str();
  sub->add_option("--python", bo->python, "Interpreter with torch for the peer")
      ->capture_default_str();
  sub->add_flag("--no-peer", bo->skip_peer, "Measure C++ only");
  FlagTable flags{{"json_path", "--json"}, {"task", "--task"},       {"steps", "--steps"},
                  {"batch_sizes", "--batch"}, {"threads", "--threads"}, {"hidden", "--hidden"},
                  {"seed", "--seed"},        {"python", "--python"}};
  add_device_flag(sub, bo->device, flags);
  return {sub,
          [bo](std::ostream& out, std::ostream&) {
            bench::run_npi_bench(*bo, out);
            return 0;
          },
          flags};
}

}  // namespace engram::cli
