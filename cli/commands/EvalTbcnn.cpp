// engram eval tbcnn: accuracy and top-5 of a TBCNN on a corpus split.
#include "cli/Command.h"
#include "cli/Flags.h"
#include "tbcnn/Tbcnn.h"

#include <CLI/CLI.hpp>

#include <iomanip>
#include <memory>

namespace engram::cli {
namespace {

struct EvalTbcnn {
  tbcnn::EvalTbcnnOptions options;
  bool json = false;
};

int run_eval_tbcnn(const EvalTbcnn& c, std::ostream& out) {
  refuse_overwriting({{"--model", c.options.model_path}, {"--corpus", c.options.corpus_path}},
                     {{"--vectors", c.options.vectors_path}});
  const auto r = tbcnn::evaluate_tbcnn(c.options);
  if (c.json) {
    out << tbcnn::eval_tbcnn_json(r) << "\n";
  } else {
    out << r.model << " (" << r.task << ") on " << r.split << ": accuracy " << std::fixed
        << std::setprecision(4) << r.accuracy << ", top-5 " << r.top5 << " over " << r.count
        << " examples, " << r.classes << " classes\n";
  }
  return 0;
}

}  // namespace

Command register_eval_tbcnn(CLI::App& parent) {
  auto c = std::make_shared<EvalTbcnn>();
  auto& et = c->options;
  FlagTable flags{{"model_path", "--model"},      {"corpus_path", "--corpus"},
                  {"split", "--split"},           {"statements_per_file", "--statements"},
                  {"threads", "--threads"},       {"vectors_path", "--vectors"}};
  CLI::App* sub = parent.add_subcommand("tbcnn", "Accuracy and top-5 of a TBCNN on a corpus split");
  sub->add_option("--model", et.model_path, "Model file")->required();
  sub->add_option("--corpus", et.corpus_path, "Corpus file")->required();
  sub->add_option("--split", et.split, "train, valid or test")->capture_default_str();
  sub->add_option("--statements", et.statements_per_file,
                  "masked task: statements drawn from each file")
      ->capture_default_str();
  sub->add_option("--threads", et.threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  add_device_flag(sub, et.device, flags);
  sub->add_option("--vectors", et.vectors_path,
                  "Write every example's vector, label and prediction here (JSON)");
  sub->add_flag("--json", c->json, "Print JSON");
  return {sub,
          [c](std::ostream& out, std::ostream&) { return run_eval_tbcnn(*c, out); }, flags};
}

}  // namespace engram::cli
