// engram bench tbcnn: parse throughput beside raw tree-sitter, TBCNN training throughput.
#include "bench/TbcnnBench.h"
#include "cli/Command.h"
#include "cli/Flags.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {

Command register_bench_tbcnn(CLI::App& parent) {
  auto tbo = std::make_shared<bench::TbcnnBenchOptions>();
  CLI::App* sub = parent.add_subcommand(
      "tbcnn",
      "Parse throughput beside raw tree-sitter, TBCNN training throughput and peak memory");
  sub->add_option("--json", tbo->json_path, "Write the results here")->required();
  sub->add_option("--corpus", tbo->corpus_path, "Corpus the training steps run on")->required();
  sub->add_option("--src", tbo->src_dir, "Source files whose parsing is timed")
      ->capture_default_str();
  sub->add_option("--lang", tbo->language, "Their language")->capture_default_str();
  sub->add_option("--model", tbo->model, "tbcnn, localized or bow")->capture_default_str();
  sub->add_option("--steps", tbo->steps, "Training steps timed")->capture_default_str();
  sub->add_option("--batch", tbo->batch, "Trees per step")->capture_default_str();
  sub->add_option("--threads", tbo->threads, "Intra-op threads")->capture_default_str();
  sub->add_option("--repeats", tbo->repeats, "Parse passes (the fastest counts)")
      ->capture_default_str();
  FlagTable flags{{"json_path", "--json"}, {"corpus_path", "--corpus"}, {"src_dir", "--src"},
                  {"language", "--lang"},  {"model", "--model"},        {"steps", "--steps"},
                  {"batch", "--batch"},    {"threads", "--threads"},    {"repeats", "--repeats"}};
  add_device_flag(sub, tbo->device, flags);
  return {sub,
          [tbo](std::ostream& out, std::ostream&) {
            bench::run_tbcnn_bench(*tbo, out);
            return 0;
          },
          flags};
}

}  // namespace engram::cli
