// engram bench streams: the weight gradients on a second CUDA stream against one, beside the
// one-GPU step model's prediction.
#include "bench/StreamsBench.h"
#include "cli/Command.h"
#include "cli/Flags.h"

#include <memory>

namespace engram::cli {

Command register_bench_streams(CLI::App& parent) {
  auto o = std::make_shared<bench::StreamsBenchOptions>();
  CLI::App* sub = parent.add_subcommand(
      "streams",
      "Out-of-order backprop on one GPU: a ResNet's step with the weight gradients on a second "
      "CUDA stream (--ooo-streams 2) against one stream, beside the step model's prediction");
  sub->add_option("--json", o->json_path, "Write the results here")->required();
  sub->add_option("--workload", o->workload, "resnet (CIFAR ResNet-18) or resnet50 (224x224)")
      ->capture_default_str();
  sub->add_option("--batch", o->batch, "Images per step; 0: 256 (resnet) or 64 (resnet50)")
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed steps per session")->capture_default_str();
  sub->add_option("--steps", o->steps, "Timed steps per session")->capture_default_str();
  sub->add_option("--rounds", o->rounds, "One-stream and two-stream sessions, alternating")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Random seed")->check(seed_check())->capture_default_str();
  FlagTable flags{{"json_path", "--json"}, {"workload", "--workload"}, {"batch", "--batch"},
                  {"warmup", "--warmup"},  {"steps", "--steps"},       {"rounds", "--rounds"},
                  {"seed", "--seed"}};
  add_device_flag(sub, o->device, flags);
  return {sub,
          [o](std::ostream& out, std::ostream&) {
            bench::run_streams_bench(*o, out);
            return 0;
          },
          flags};
}

}  // namespace engram::cli
