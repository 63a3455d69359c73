// engram bench scale: the data-parallel step predicted for 8, 64 and 512 GPUs from one GPU's
// profiled backward and the link model.
#include "bench/ScalingModel.h"
#include "cli/Command.h"
#include "cli/Flags.h"

#include <memory>

namespace engram::cli {

Command register_bench_scale(CLI::App& parent) {
  auto o = std::make_shared<bench::ScalingOptions>();
  CLI::App* sub = parent.add_subcommand(
      "scale",
      "Predict the data-parallel step (after, overlap, ooo) for 8 GPUs over NVLink and 64 and "
      "512 over 100/400 Gb/s, from a `bench streams` profile of one GPU and the ring all-reduce's "
      "cost; no GPU needed");
  sub->add_option(
         "--from", o->from_path,
         "A `bench streams` JSON, or a results file of them (results/gpu_ooo_streams.json)")
      ->required();
  sub->add_option("--json", o->json_path, "Write the predictions here")->required();
  return {sub,
          [o](std::ostream& out, std::ostream&) {
            refuse_overwriting({{"--from", o->from_path}}, {{"--json", o->json_path}});
            bench::run_scaling_model(*o, out);
            return 0;
          },
          {{"from_path", "--from"}, {"json_path", "--json"}}};
}

}  // namespace engram::cli
