// engram train tbcnn: a TBCNN code encoder (or the bag-of-types baseline) on a corpus. Flags the
// user does not give take the model's defaults (tbcnn::train_defaults: bow trains at lr 0.05).
#include "cli/Command.h"
#include "cli/Flags.h"
#include "trainer/MemoryTechnique.h"
#include "tbcnn/Tbcnn.h"

#include <iomanip>
#include <memory>

namespace engram::cli {
namespace {

struct TrainTbcnn {
  tbcnn::TrainTbcnnOptions options;
  TrainingFlags training;
};

int run_train_tbcnn(TrainTbcnn& c, std::ostream& out) {
  auto& tt = c.options;
  c.training.fill_unset(tbcnn::train_defaults(tt.model).training, tt.training);
  refuse_overwriting({{"--corpus", tt.corpus_path}},
                     training_outputs("--out", tt.out_path, tt.training));
  tt.training.progress = stderr_is_terminal();
  tt.training.job = read_job_environment();
  const auto r = tbcnn::train_tbcnn(tt);
  out << "trained " << tt.model << " (" << tt.task << ") on " << r.examples
      << " examples: " << r.steps << " steps in " << std::fixed << std::setprecision(1)
      << r.seconds << " s (" << r.trees_per_second << " trees/s, " << std::setprecision(0)
      << r.nodes_per_second << " nodes/s), final loss " << std::setprecision(4) << r.final_loss
      << (tt.training.writes_files() ? "; wrote " + tt.out_path : "");
  if (tt.valid_every > 0) {
    out << ", the model of step " << r.best_step << " (valid accuracy " << std::setprecision(4)
        << r.best_valid_accuracy << ", the best of " << r.valid_curve.size() << " scored)";
  }
  out << "\n" << r.memory_plan;
  return 0;
}

void add_model_flags(CLI::App* sub, tbcnn::TrainTbcnnOptions& tt) {
  sub->add_option("--embedding", tt.embedding, "Node vector width")->capture_default_str();
  sub->add_option("--channels", tt.channels, "Convolution width")->capture_default_str();
  sub->add_option("--layers", tt.layers, "Convolution layers")->capture_default_str();
  sub->add_flag("--residual", tt.residual,
                "Add each convolution layer's input to its output (after the first), so deep "
                "stacks train");
  sub->add_option("--activation", tt.activation, "relu (default) or tanh (the paper's)")
      ->capture_default_str();
  sub->add_flag("--identifiers", tt.identifiers,
                "Add identifier sub-token embeddings (hashed) to the node vectors");
  sub->add_option("--statements", tt.statements_per_file,
                  "masked task: statements drawn from each file")
      ->capture_default_str();
  sub->add_option("--valid-every", tt.valid_every,
                  "Score the valid split every N steps (0: never) and write the model with the "
                  "best valid accuracy; the scores go into --metrics as valid_accuracy")
      ->capture_default_str();
  sub->add_option("--valid-statements", tt.valid_statements_per_file,
                  "masked task with --valid-every: statements drawn from each valid file")
      ->capture_default_str();
}

}  // namespace

Command register_train_tbcnn(CLI::App& parent) {
  auto c = std::make_shared<TrainTbcnn>();
  auto& tt = c->options;
  FlagTable flags{{"corpus_path", "--corpus"},
                  {"out_path", "--out"},
                  {"model", "--model"},
                  {"task", "--task"},
                  {"embedding", "--embedding"},
                  {"channels", "--channels"},
                  {"layers", "--layers"},
                  {"activation", "--activation"},
                  {"residual", "--residual"},
                  {"identifiers", "--identifiers"},
                  {"statements_per_file", "--statements"},
                  {"valid_every", "--valid-every"},
                  {"valid_statements_per_file", "--valid-statements"}};
  CLI::App* sub = parent.add_subcommand(
      "tbcnn", "Train a TBCNN code encoder (or the bag-of-types baseline)");
  sub->add_option("--corpus", tt.corpus_path, "Corpus from `engram data code`")->required();
  sub->add_option("--out", tt.out_path, "Model file to write")->required();
  sub->add_option("--model", tt.model,
                  "tbcnn (whole tree, max pooling), localized (the pivot's vector; --task "
                  "masked or loop), bow (bag of node types, logistic regression)")
      ->capture_default_str();
  sub->add_option("--task", tt.task,
                  "classify (each file's class), masked (the kind of a statement whose subtree "
                  "is masked) or loop (each file's class at the loop of its last function)")
      ->capture_default_str();
  TrainingFlagsSpec spec;
  spec.batch = "Trees per step";
  spec.lr_default = "per model: 0.001, 0.05 for bow";
  spec.memory =
      "Comma-separated memory techniques: " + trainer::memory_techniques_help() +
      ". The TBCNN is not cut into units (no recompute or swap) and has no convolutions for algo";
  c->training = add_training_flags(sub, tt.training, spec, flags);
  add_model_flags(sub, tt);
  return {sub, [c](std::ostream& out, std::ostream&) { return run_train_tbcnn(*c, out); },
          flags};
}

}  // namespace engram::cli
