#include "tbcnn/Tbcnn.h"

#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "common/Hash.h"
#include "datasets/CodeCorpus.h"
#include "memory/CompressingStore.h"
#include "nn/Runtime.h"
#include "tbcnn/TbcnnModel.h"
#include "trainer/Checkpoint.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

namespace engram::tbcnn {
namespace {

using datasets::CodeCorpus;
using datasets::CodeTree;

constexpr const char* kKind = "tbcnn";
constexpr const char* kMask = "<mask>";

bool is_statement(const std::string& type) {
  return type.size() > 10 && type.compare(type.size() - 10, 10, "_statement") == 0;
}

/// `tree` with `node`'s descendants removed and its type replaced by `mask_type`.
CodeTree mask_subtree(const CodeTree& tree, int node, int mask_type) {
  const int n = tree.size();
  std::vector<int> remap(n, -1);
  std::vector<bool> inside(n, false);
  CodeTree out;
  out.language = tree.language;
  out.error_nodes = tree.error_nodes;
  out.missing_nodes = tree.missing_nodes;
  for (int i = 0; i < n; ++i) {
    inside[i] =
        i != node && tree.parent[i] >= 0 && (tree.parent[i] == node || inside[tree.parent[i]]);
    if (inside[i]) continue;
    remap[i] = out.size();
    out.type.push_back(i == node ? mask_type : tree.type[i]);
    out.parent.push_back(tree.parent[i] < 0 ? -1 : remap[tree.parent[i]]);
    out.identifier.push_back(i == node ? "" : tree.identifier[i]);
    out.start.push_back(tree.start.empty() ? datasets::Position{} : tree.start[i]);
    out.end.push_back(tree.end.empty() ? datasets::Position{} : tree.end[i]);
  }
  // Children from parents (pre-order is kept).
  std::vector<std::vector<int>> kids(out.size());
  for (int i = 1; i < out.size(); ++i) kids[out.parent[i]].push_back(i);
  out.child_begin.assign(out.size() + 1, 0);
  for (int i = 0; i < out.size(); ++i) {
    out.child_begin[i + 1] = out.child_begin[i] + static_cast<int>(kids[i].size());
    out.child_list.insert(out.child_list.end(), kids[i].begin(), kids[i].end());
  }
  return out;
}

/// Training or evaluation examples: trees (owned), pivots and labels.
struct Examples {
  std::vector<CodeTree> trees;
  std::vector<int> pivots;
  std::vector<int> labels;
  long skipped = 0;
  long nodes = 0;
};

/// Statement kinds of the corpus, sorted.
std::vector<std::string> statement_kinds(const CodeCorpus& corpus) {
  std::vector<bool> seen(corpus.vocabulary.size(), false);
  for (const auto& s : corpus.samples) {
    for (int i = 1; i < s.tree.size(); ++i) seen[s.tree.type[i]] = true;
  }
  std::vector<std::string> kinds;
  for (std::size_t t = 0; t < seen.size(); ++t) {
    if (seen[t] && is_statement(corpus.vocabulary[t])) kinds.push_back(corpus.vocabulary[t]);
  }
  return kinds;
}

Examples make_examples(const CodeCorpus& corpus, datasets::Split split, const TbcnnConfig& config,
                       int statements_per_file) {
  Examples ex;
  // The model's vocabulary: the corpus's by name (the same grammar gives the same list).
  std::map<std::string, int> vocab;
  for (std::size_t i = 0; i < config.vocabulary.size(); ++i)
    vocab.emplace(config.vocabulary[i], static_cast<int>(i));
  if (config.vocabulary.size() < corpus.vocabulary.size() ||
      !std::equal(corpus.vocabulary.begin(), corpus.vocabulary.end(), config.vocabulary.begin())) {
    throw FormatError(
        "the corpus's node types do not match the model's (another language or "
        "grammar version)");
  }
  std::map<std::string, int> class_of;
  for (std::size_t i = 0; i < config.classes.size(); ++i)
    class_of.emplace(config.classes[i], static_cast<int>(i));
  for (const auto index : corpus.indices(split)) {
    const auto& sample = corpus.samples[index];
    if (config.task == "classify") {
      const auto it = class_of.find(corpus.classes[sample.label]);
      if (it == class_of.end()) {
        ++ex.skipped;
        continue;
      }
      ex.trees.push_back(sample.tree);
      ex.pivots.push_back(-1);
      ex.labels.push_back(it->second);
      ex.nodes += sample.tree.size();
      continue;
    }
    // Masked statements: up to statements_per_file, in an order fixed by the file's path.
    std::vector<int> statements;
    for (int i = 1; i < sample.tree.size(); ++i) {
      if (is_statement(corpus.vocabulary[sample.tree.type[i]])) statements.push_back(i);
    }
    std::sort(statements.begin(), statements.end(), [&](int a, int b) {
      return fnv1a(sample.path + "#" + std::to_string(a)) <
             fnv1a(sample.path + "#" + std::to_string(b));
    });
    statements.resize(
        std::min<std::size_t>(statements.size(), static_cast<std::size_t>(statements_per_file)));
    for (int s : statements) {
      const auto it = class_of.find(corpus.vocabulary[sample.tree.type[s]]);
      if (it == class_of.end()) {
        ++ex.skipped;
        continue;
      }
      CodeTree masked = mask_subtree(sample.tree, s, vocab.at(kMask));
      // Nodes before s in pre-order are never inside its subtree, so s keeps its index.
      const int pivot = s;
      ex.nodes += masked.size();
      ex.trees.push_back(std::move(masked));
      ex.pivots.push_back(pivot);
      ex.labels.push_back(it->second);
    }
  }
  return ex;
}

/// The batch `config`'s model reads: a localized model only the nodes its pivot can reach.
TreeBatch model_batch(const std::vector<TreeInput>& inputs, const TbcnnConfig& config) {
  return make_tree_batch(inputs, config.localized(), config.identifiers ? config.buckets : 0,
                         config.localized() ? config.layers : -1);
}

TreeBatch batch_of(const Examples& ex, const std::vector<std::size_t>& indices,
                   const TbcnnConfig& config) {
  std::vector<TreeInput> inputs;
  inputs.reserve(indices.size());
  for (auto i : indices) inputs.push_back({&ex.trees[i], ex.pivots[i]});
  return model_batch(inputs, config);
}

/// Correct answers at rank 1 and within the top 5 over all of `ex`, in chunks, without gradients.
struct Score {
  long correct = 0, top5 = 0;
};

Score score(TbcnnModel& model, const Examples& ex) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto& config = model->config();
  Score s;
  constexpr std::size_t kChunk = 256;
  for (std::size_t start = 0; start < ex.trees.size(); start += kChunk) {
    std::vector<std::size_t> indices;
    for (std::size_t i = start; i < std::min(ex.trees.size(), start + kChunk); ++i)
      indices.push_back(i);
    const auto logits = model->forward(batch_of(ex, indices, config));
    const auto k = std::min<int64_t>(5, logits.size(1));
    const auto best = std::get<1>(logits.topk(k, 1)).contiguous();
    const auto* p = best.data_ptr<int64_t>();
    for (std::size_t r = 0; r < indices.size(); ++r) {
      const int label = ex.labels[indices[r]];
      s.correct += p[r * k] == label ? 1 : 0;
      for (int64_t j = 0; j < k; ++j) s.top5 += p[r * k + j] == label ? 1 : 0;
    }
  }
  return s;
}

class TbcnnWorkload final : public trainer::Workload {
 public:
  TbcnnWorkload(TbcnnModel model, const Examples& examples)
      : model_(std::move(model)), examples_(examples) {}
  std::vector<at::Tensor> parameters() override { return model_->parameters(); }
  std::size_t num_examples() const override { return examples_.trees.size(); }
  trainer::StepOutput forward(const std::vector<std::size_t>& batch) override {
    model_->train();
    const auto logits = model_->forward(batch_of(examples_, batch, model_->config()));
    std::vector<int64_t> labels;
    for (auto i : batch) labels.push_back(examples_.labels[i]);
    const auto target = torch::tensor(labels, torch::kLong);
    trainer::StepOutput out;
    out.loss = torch::nn::functional::cross_entropy(logits, target);
    {
      torch::NoGradGuard no_grad;
      out.metrics["error"] = (logits.argmax(1) != target).to(torch::kFloat).mean().item<double>();
    }
    return out;
  }

 private:
  TbcnnModel model_;
  const Examples& examples_;
};

void save_model(const std::string& path, TbcnnModel& model) {
  trainer::Checkpoint ck;
  ck.kind = kKind;
  ck.config_json = model->config().to_json();
  for (const auto& item : model->named_parameters())
    ck.tensors.emplace_back(item.key(), item.value());
  trainer::save_checkpoint(path, ck);
}

TbcnnModel load_model(const std::string& path) {
  const auto ck = trainer::load_checkpoint(path, kKind);
  TbcnnModel model(TbcnnConfig::from_json(ck.config_json));
  trainer::load_parameters(*model, ck.tensors, path);
  model->eval();
  return model;
}

/// Parses "LINE:COL" (1-based).
datasets::Position parse_pivot(const std::string& text) {
  const auto colon = text.find(':');
  int line = 0, column = 0;
  std::size_t used_line = 0, used_column = 0;
  try {
    if (colon != std::string::npos) {
      line = std::stoi(text.substr(0, colon), &used_line);
      column = std::stoi(text.substr(colon + 1), &used_column);
    }
  } catch (const std::exception&) {
    used_line = 0;
  }
  if (colon == std::string::npos || used_line != colon || used_column != text.size() - colon - 1 ||
      line < 1 || column < 1) {
    throw UsageError("--pivot expects LINE:COL with 1-based numbers, e.g. 12:5, got '" + text +
                     "'");
  }
  return {line - 1, column - 1};
}

std::string read_source(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error("'" + path + "' is not a readable file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct FileInput {
  CodeTree tree;
  int pivot = -1;
  std::string pivot_type;
};

FileInput prepare_file(const TbcnnModel& model, const EncodeOptions& options) {
  const auto& config = model->config();
  const std::string source = read_source(options.file);
  if (!datasets::is_text(source)) {
    throw std::runtime_error("'" + options.file + "' is binary or not UTF-8");
  }
  const auto language = datasets::parse_language(config.language);
  FileInput in;
  const CodeTree parsed = datasets::parse_code(language, source);
  in.tree = datasets::remap_types(parsed, config.vocabulary);
  const bool needs_pivot = config.localized() || config.task == "masked";
  if (options.pivot.empty()) {
    if (needs_pivot)
      throw UsageError("this " + config.model + " model of the " + config.task +
                       " task needs --pivot LINE:COL");
    return in;
  }
  int node = parsed.node_at(parse_pivot(options.pivot));
  if (config.task == "masked") {
    // The model was trained on statements: the innermost statement around the position.
    int statement = -1;
    for (int a : parsed.ancestors(node)) {
      if (is_statement(datasets::node_type_name(language, parsed.type[a]))) {
        statement = a;
        break;
      }
    }
    if (statement < 0) throw UsageError("no statement at --pivot " + options.pivot);
    node = statement;
  }
  in.pivot_type = datasets::node_type_name(language, parsed.type[node]);
  if (config.task == "masked") {
    const auto mask = std::find(config.vocabulary.begin(), config.vocabulary.end(), kMask);
    in.tree = mask_subtree(in.tree, node, static_cast<int>(mask - config.vocabulary.begin()));
  }
  in.pivot = node;
  return in;
}

}  // namespace

TrainTbcnnReport train_tbcnn(const TrainTbcnnOptions& options) {
  if (options.out_path.empty()) throw UsageError("--out is required");
  if (options.task != "classify" && options.task != "masked")
    throw UsageError("--task must be classify or masked, not '" + options.task + "'");
  if (options.model == "localized" && options.task != "masked")
    throw UsageError("--model localized needs a pivot: use it with --task masked");
  if (options.steps < 1 || options.batch < 1) throw UsageError("--steps and --batch must be >= 1");
  if (options.embedding < 1 || options.embedding > 4096 || options.channels < 1 ||
      options.channels > 4096 || options.layers < 1 || options.layers > 16)
    throw UsageError("--embedding and --channels must be in 1..4096, --layers in 1..16");
  if (!(options.learning_rate > 0) || !std::isfinite(options.learning_rate))
    throw UsageError("--lr must be a positive number");
  if (options.statements_per_file < 1) throw UsageError("--statements must be at least 1");
  if (options.valid_every < 0) throw UsageError("--valid-every must be 0 (never) or more");
  if (options.valid_statements_per_file < 1)
    throw UsageError("--valid-statements must be at least 1");
  trainer::MemoryOptions memory_options;
  memory_options.techniques = options.memory;
  trainer::MemoryTechniques techniques(memory_options);  // UsageError for unknown names
  if (techniques.uses_units()) {
    throw UsageError(
        "--memory recompute and swap act on a model cut into units; TBCNN offers relu");
  }
  trainer::set_threads_option(options.threads);
  const CodeCorpus corpus = datasets::read_corpus(options.corpus_path);
  { AtomicFile probe(options.out_path, /*binary=*/true); }
  TbcnnConfig config;
  config.model = options.model;
  config.task = options.task;
  config.language = datasets::language_name(corpus.language);
  config.vocabulary = corpus.vocabulary;
  config.embedding = options.embedding;
  config.channels = options.channels;
  config.layers = options.layers;
  config.residual = options.residual;
  config.activation = options.activation;
  config.identifiers = options.identifiers;
  config.pivot_flag = options.model == "tbcnn" && options.task == "masked";
  if (options.task == "masked") {
    config.vocabulary.push_back(kMask);
    config.classes = statement_kinds(corpus);
    if (config.classes.empty()) throw UsageError("the corpus has no statements to mask");
  } else {
    config.classes = corpus.classes;
  }
  torch::manual_seed(options.seed);
  TbcnnModel model(config);  // UsageError for an unknown model or activation
  const Examples train =
      make_examples(corpus, datasets::Split::kTrain, config, options.statements_per_file);
  if (train.trees.empty()) throw UsageError("the corpus's train split is empty");
  Examples valid;
  if (options.valid_every > 0) {
    valid =
        make_examples(corpus, datasets::Split::kValid, config, options.valid_statements_per_file);
    if (valid.trees.empty())
      throw UsageError("--valid-every needs examples in the corpus's valid split; it has none");
  }
  TbcnnWorkload workload(model, train);
  trainer::TrainerOptions t;
  t.steps = options.steps;
  t.batch_size = options.batch;
  t.learning_rate = options.learning_rate;
  t.seed = options.seed;
  t.metrics_path = options.metrics_path;
  t.progress = options.progress;
  TrainTbcnnReport report;
  std::vector<at::Tensor> best;  // the parameters of the best model on valid, when selecting
  if (options.valid_every > 0) {
    t.log_every = static_cast<int>(std::gcd<long>(t.log_every, options.valid_every));
    t.on_log = [&](long step, std::map<std::string, double>& metrics) {
      if (step % options.valid_every != 0 && step != options.steps) return false;
      const double accuracy = static_cast<double>(score(model, valid).correct) /
                              static_cast<double>(valid.trees.size());
      metrics["valid_accuracy"] = accuracy;
      report.valid_curve.emplace_back(step, accuracy);
      if (best.empty() || accuracy > report.best_valid_accuracy) {
        torch::NoGradGuard no_grad;
        best.clear();
        for (const auto& p : model->parameters()) best.push_back(p.detach().clone());
        report.best_step = step;
        report.best_valid_accuracy = accuracy;
      }
      return false;
    };
  }
  trainer::TrainSummary summary;
  {
    nn::RuntimeGuard use(techniques.store(), nullptr);
    summary = trainer::train(workload, t);
  }
  if (!best.empty()) {
    torch::NoGradGuard no_grad;
    auto params = model->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(best[i]);
  }
  save_model(options.out_path, model);
  report.steps = summary.steps;
  report.seconds = summary.seconds;
  report.final_loss = summary.final_loss;
  report.examples = static_cast<long>(train.trees.size());
  report.trees_per_second = summary.examples_per_second;
  report.nodes_per_second = summary.examples_per_second * static_cast<double>(train.nodes) /
                            static_cast<double>(train.trees.size());
  if (techniques.compressing() != nullptr)
    report.compressed_tensors = techniques.compressing()->stats().compressed_tensors;
  return report;
}

EvalTbcnnReport evaluate_tbcnn(const EvalTbcnnOptions& options) {
  const auto split = datasets::parse_split(options.split);
  if (options.statements_per_file < 1) throw UsageError("--statements must be at least 1");
  trainer::set_threads_option(options.threads);
  TbcnnModel model = load_model(options.model_path);
  const CodeCorpus corpus = datasets::read_corpus(options.corpus_path);
  const auto& config = model->config();
  if (config.language != datasets::language_name(corpus.language)) {
    throw FormatError("'" + options.model_path + "' is a model of " + config.language +
                      " code, the corpus is " + datasets::language_name(corpus.language));
  }
  const Examples ex = make_examples(corpus, split, config, options.statements_per_file);
  EvalTbcnnReport report;
  report.model = config.model;
  report.task = config.task;
  report.split = options.split;
  report.classes = static_cast<long>(config.classes.size());
  report.skipped = ex.skipped;
  report.count = static_cast<long>(ex.trees.size());
  if (ex.trees.empty()) return report;
  const Score s = score(model, ex);
  report.accuracy = static_cast<double>(s.correct) / static_cast<double>(report.count);
  report.top5 = static_cast<double>(s.top5) / static_cast<double>(report.count);
  return report;
}

std::string eval_tbcnn_json(const EvalTbcnnReport& r) {
  return nlohmann::json{{"model", r.model},     {"task", r.task},         {"split", r.split},
                        {"count", r.count},     {"accuracy", r.accuracy}, {"top5", r.top5},
                        {"classes", r.classes}, {"skipped", r.skipped}}
      .dump(2);
}

EncodeReport encode_file(const EncodeOptions& options) {
  if (!options.pivot.empty()) parse_pivot(options.pivot);  // usage errors before any file
  trainer::set_threads_option(options.threads);
  TbcnnModel model = load_model(options.model_path);
  const FileInput in = prepare_file(model, options);
  torch::NoGradGuard no_grad;
  const auto v = model->encode(model_batch({{&in.tree, in.pivot}}, model->config())).contiguous();
  EncodeReport report;
  report.vector.assign(v.data_ptr<float>(), v.data_ptr<float>() + v.numel());
  report.nodes = in.tree.size();
  report.error_nodes = in.tree.error_nodes;
  report.pivot_type = in.pivot_type;
  return report;
}

std::string encode_json(const EncodeReport& r) {
  nlohmann::json j{{"dim", r.vector.size()},
                   {"nodes", r.nodes},
                   {"error_nodes", r.error_nodes},
                   {"vector", r.vector}};
  if (!r.pivot_type.empty()) j["pivot_type"] = r.pivot_type;
  return j.dump();
}

ClassifyReport classify_file(const EncodeOptions& options, int k) {
  if (!options.pivot.empty()) parse_pivot(options.pivot);
  trainer::set_threads_option(options.threads);
  TbcnnModel model = load_model(options.model_path);
  const FileInput in = prepare_file(model, options);
  torch::NoGradGuard no_grad;
  const auto& config = model->config();
  const auto probs =
      torch::softmax(model->forward(model_batch({{&in.tree, in.pivot}}, config)), 1).squeeze(0);
  const auto top = probs.topk(std::min<int64_t>(k, probs.size(0)));
  const auto values = std::get<0>(top).contiguous(), indices = std::get<1>(top).contiguous();
  ClassifyReport report;
  for (int64_t i = 0; i < values.size(0); ++i) {
    report.top.emplace_back(config.classes[indices[i].item<int64_t>()], values[i].item<double>());
  }
  report.error_nodes = in.tree.error_nodes;
  return report;
}

}  // namespace engram::tbcnn
