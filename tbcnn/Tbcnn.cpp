#include "tbcnn/Tbcnn.h"

#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "datasets/CodeCorpus.h"
#include "tbcnn/TbcnnData.h"
#include "tbcnn/TbcnnModel.h"
#include "tbcnn/TbcnnWorkload.h"
#include "trainer/Checkpoint.h"
#include "trainer/Device.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"
#include "trainer/TrainingState.h"

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

/// Correct answers at rank 1 and within the top 5 over all of `ex`, in chunks, without gradients.
struct Score {
  long correct = 0, top5 = 0;
  std::vector<int> predicted;  ///< per example, when vectors are kept
  at::Tensor vectors;          ///< [examples, dim] from encode(), when kept
};

Score score(TbcnnModel& model, const Examples& ex, bool keep_vectors = false) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto& config = model->config();
  Score s;
  std::vector<at::Tensor> chunks;
  constexpr std::size_t kChunk = 256;
  for (std::size_t start = 0; start < ex.trees.size(); start += kChunk) {
    std::vector<std::size_t> indices;
    for (std::size_t i = start; i < std::min(ex.trees.size(), start + kChunk); ++i)
      indices.push_back(i);
    const auto vectors = model->encode(batch_of(ex, indices, config));
    const auto logits = model->classify(vectors);
    if (keep_vectors) chunks.push_back(vectors.cpu());
    const auto k = std::min<int64_t>(5, logits.size(1));
    const auto best = std::get<1>(logits.topk(k, 1)).cpu().contiguous();
    const auto* p = best.data_ptr<int64_t>();
    for (std::size_t r = 0; r < indices.size(); ++r) {
      const int label = ex.labels[indices[r]];
      s.correct += p[r * k] == label ? 1 : 0;
      for (int64_t j = 0; j < k; ++j) s.top5 += p[r * k + j] == label ? 1 : 0;
      if (keep_vectors) s.predicted.push_back(static_cast<int>(p[r * k]));
    }
  }
  if (keep_vectors && !chunks.empty()) s.vectors = torch::cat(chunks).contiguous();
  return s;
}

/// {"model","task","split","classes":[names],"dim","examples":[{"label","predicted","vector"}]}
/// with labels and predictions as indices into classes.
void write_vectors_json(const std::string& path, const EvalTbcnnReport& report,
                        const TbcnnConfig& config, const Examples& ex, const Score& s) {
  nlohmann::json examples = nlohmann::json::array();
  const int64_t dim = s.vectors.defined() ? s.vectors.size(1) : 0;
  for (std::size_t i = 0; i < ex.trees.size(); ++i) {
    const float* row = s.vectors.data_ptr<float>() + static_cast<int64_t>(i) * dim;
    examples.push_back({{"label", ex.labels[i]},
                        {"predicted", s.predicted[i]},
                        {"vector", std::vector<float>(row, row + dim)}});
  }
  const nlohmann::json j{
      {"model", report.model},     {"task", report.task}, {"split", report.split},
      {"classes", config.classes}, {"dim", dim},          {"examples", std::move(examples)}};
  AtomicFile file(path);
  file.stream() << j.dump() << "\n";
  file.commit();
}

void save_model(const std::string& path, TbcnnModel& model) {
  trainer::save_module(path, kKind, model->config().to_json(), *model);
}

TbcnnModel load_model(const std::string& path) {
  TbcnnModel model = trainer::load_module(path, kKind, [](const std::string& config_json) {
    return TbcnnModel(TbcnnConfig::from_json(config_json));
  });
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
    throw InvalidOption("pivot",
                        "expects LINE:COL with 1-based numbers, e.g. 12:5, got '" + text + "'");
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
  if (!options.function.empty() && (config.task != "loop" || !options.pivot.empty())) {
    throw InvalidOption(
        "function",
        "picks the loop a loop-task model classifies, without --pivot" +
            std::string(config.task != "loop" ? "; this model's task is " + config.task : ""));
  }
  // A pivot the model would not read is refused, as --function is, rather than ignored.
  if (!options.pivot.empty() && config.task == "classify")
    throw InvalidOption("pivot", "is for models of the masked and loop tasks; this " +
                                     config.model + " model classifies whole files");
  if (!options.pivot.empty() && config.model == "bow" && config.task == "loop")
    throw InvalidOption("pivot",
                        "is not read by a bow model of the loop task: it counts the "
                        "node types of the whole file");
  if (options.pivot.empty() && config.task == "loop") {  // the loop of the (last) function
    in.pivot = loop_pivot(parsed, datasets::node_type_names(language), options.function);
    if (in.pivot < 0) {
      throw std::runtime_error("'" + options.file + "' has " +
                               (options.function.empty()
                                    ? std::string("no loop in its last function")
                                    : "no function '" + options.function + "' with a loop"));
    }
    in.pivot_type = datasets::node_type_name(language, parsed.type[in.pivot]);
    return in;
  }
  if (options.pivot.empty()) {
    if (needs_pivot)
      throw UsageError("this " + config.model + " model of the " + config.task +
                       " task needs --pivot LINE:COL");
    return in;
  }
  int node = parsed.node_at(parse_pivot(options.pivot));
  // The whole file is no pivot: a position past its end or on a blank line between statements
  // was read as the module itself, and the module was classified or encoded without a word.
  if (node <= 0)
    throw InvalidOption("pivot", options.pivot + ": no node of the file but the module itself " +
                                     (node < 0 ? "(the position is past its end)"
                                               : "(a blank line, or between statements)"));
  if (config.task == "masked") {
    // The model was trained on statements: the innermost statement around the position.
    int statement = -1;
    for (int a : parsed.ancestors(node)) {
      if (is_statement(datasets::node_type_name(language, parsed.type[a]))) {
        statement = a;
        break;
      }
    }
    if (statement < 0) throw InvalidOption("pivot", options.pivot + ": no statement there");
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

TrainTbcnnOptions train_defaults(const std::string& model) {
  TrainTbcnnOptions options;
  options.model = model;
  if (model == "bow") options.training.learning_rate = 0.05;
  return options;
}

TrainTbcnnReport train_tbcnn(const TrainTbcnnOptions& options) {
  if (options.out_path.empty()) throw InvalidOption("out_path", "is required");
  if (options.task != "classify" && options.task != "masked" && options.task != "loop")
    throw InvalidOption("task", "must be classify, masked or loop, not '" + options.task + "'");
  check_model_and_activation(options.model, options.activation);
  if (options.model == "localized" && options.task == "classify")
    throw InvalidOption("model",
                        "localized needs a pivot: it applies to the masked and loop tasks");
  if (options.model == "bow") {
    // The bag of node types is one linear layer over type counts: the convolutions' options
    // would be ignored, so one set to other than its default is refused.
    const TrainTbcnnOptions defaults;
    const char* unused = options.embedding != defaults.embedding     ? "embedding"
                         : options.channels != defaults.channels     ? "channels"
                         : options.layers != defaults.layers         ? "layers"
                         : options.residual                          ? "residual"
                         : options.identifiers                       ? "identifiers"
                         : options.activation != defaults.activation ? "activation"
                                                                     : nullptr;
    if (unused != nullptr)
      throw InvalidOption(unused, "is not used by the bow model: it counts node types");
  }
  trainer::TrainingOptions t = options.training;
  // Where an interrupted run saves its state.
  if (t.checkpoint_path.empty())
    t.checkpoint_path = trainer::default_checkpoint_path(options.out_path);
  trainer::validate(t, /*min_steps=*/1);
  trainer::check_device_support(t);
  if (options.embedding < 1 || options.embedding > 4096)
    throw InvalidOption("embedding", "must be in 1..4096");
  if (options.channels < 1 || options.channels > 4096)
    throw InvalidOption("channels", "must be in 1..4096");
  if (options.layers < 1 || options.layers > 16) throw InvalidOption("layers", "must be in 1..16");
  if (options.statements_per_file < 1)
    throw InvalidOption("statements_per_file", "must be at least 1");
  if (options.valid_every < 0) throw InvalidOption("valid_every", "must be 0 (never) or more");
  if (options.valid_statements_per_file < 1)
    throw InvalidOption("valid_statements_per_file", "must be at least 1");
  if (trainer::chosen_techniques(options.training.memory.techniques).uses_units())
    throw InvalidOption("memory.techniques",
                        "recompute and swap act on a model cut into units; TBCNN offers relu");
  const CodeCorpus corpus = datasets::read_corpus(options.corpus_path);
  if (options.training.writes_files()) {
    check_writable(options.out_path);
  }
  if (options.valid_every > 0 &&
      (options.training.resume || options.training.checkpoint_every > 0)) {
    // The best model so far lives in the callback, not in the session's state.
    throw InvalidOption("valid_every",
                        "keeps the best model on valid, which a training checkpoint does not hold "
                        "yet: train without it to checkpoint or resume");
  }
  if (options.valid_every > 0 && options.training.world_size() > 1) {
    // The best model on valid is kept by the callback's own state, on the rank that scores it.
    throw InvalidOption("valid_every",
                        "selects the best model on one rank, which data-parallel training does "
                        "not support yet: train without it, or in one process");
  }
  // Nor can it be resumed after a signal: it writes no state then, and promises no resume.
  if (options.valid_every > 0) t.checkpoint_path.clear();
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
  config.pivot_flag = options.model == "tbcnn" && options.task != "classify";
  if (options.task == "masked") {
    config.vocabulary.push_back(kMask);
    config.classes = statement_kinds(corpus);
    if (config.classes.empty()) throw UsageError("the corpus has no statements to mask");
  } else {
    config.classes = corpus.classes;
  }
  torch::manual_seed(options.training.seed);
  TbcnnModel model(config);  // UsageError for an unknown model or activation
  const Examples train =
      make_examples(corpus, datasets::Split::kTrain, config, options.statements_per_file);
  if (train.trees.empty()) throw UsageError("the corpus's train split is empty");
  Examples valid;
  if (options.valid_every > 0) {
    valid =
        make_examples(corpus, datasets::Split::kValid, config, options.valid_statements_per_file);
    if (valid.trees.empty())
      throw InvalidOption("valid_every", "needs examples in the corpus's valid split; it has none");
  }
  TbcnnWorkload workload(model, train);
  t.identity = config.to_json() + "\ncorpus " + trainer::file_identity(options.corpus_path) +
               "\nstatements " + std::to_string(options.statements_per_file);
  trainer::LogCallback on_log;
  TrainTbcnnReport report;
  std::vector<at::Tensor> best;  // the parameters of the best model on valid, when selecting
  if (options.valid_every > 0) {
    t.log_every = static_cast<int>(std::gcd<long>(t.log_every, options.valid_every));
    on_log = [&](long step, std::map<std::string, double>& metrics) {
      if (step % options.valid_every != 0 && step != t.steps) return false;
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
  const trainer::TrainSummary summary = trainer::train(workload, t, on_log);
  if (!best.empty()) {
    torch::NoGradGuard no_grad;
    auto params = model->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(best[i]);
  }
  if (t.writes_files()) save_model(options.out_path, model);
  report.steps = summary.steps;
  report.seconds = summary.seconds;
  report.final_loss = summary.final_loss;
  report.examples = static_cast<long>(train.trees.size());
  report.trees_per_second = summary.examples_per_second;
  report.nodes_per_second = summary.examples_per_second * static_cast<double>(train.nodes) /
                            static_cast<double>(train.trees.size());
  report.compressed_tensors = summary.compressed_tensors;
  report.memory_plan = summary.memory_plan;
  return report;
}

EvalTbcnnReport evaluate_tbcnn(const EvalTbcnnOptions& options) {
  const auto split = datasets::parse_split(options.split);
  if (options.statements_per_file < 1)
    throw InvalidOption("statements_per_file", "must be at least 1");
  trainer::set_threads_option(options.threads);
  const c10::Device device = trainer::resolve_device(options.device);
  TbcnnModel model = load_model(options.model_path);
  model->to(device);
  const CodeCorpus corpus = datasets::read_corpus(options.corpus_path);
  if (!options.vectors_path.empty()) check_writable(options.vectors_path);  // fail before work
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
  if (report.count == 0) {
    // An accuracy over nothing would read as a model that is always wrong.
    std::string classes;
    for (const auto& c : config.classes) classes += (classes.empty() ? "" : ", ") + c;
    throw std::runtime_error(
        "'" + options.corpus_path + "' has no example of the " + options.split + " split to score" +
        (ex.skipped > 0 ? ": its " + std::to_string(ex.skipped) + " samples are of classes the " +
                              "model does not know (" + classes + ")" +
                              (config.task == "loop" ? " or have no loop" : "")
                        : ""));
  }
  const Score s = score(model, ex, !options.vectors_path.empty());
  if (report.count > 0) {
    report.accuracy = static_cast<double>(s.correct) / static_cast<double>(report.count);
    report.top5 = static_cast<double>(s.top5) / static_cast<double>(report.count);
  }
  if (!options.vectors_path.empty())
    write_vectors_json(options.vectors_path, report, config, ex, s);
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
  const c10::Device device = trainer::resolve_device(options.device);
  TbcnnModel model = load_model(options.model_path);
  model->to(device);
  const FileInput in = prepare_file(model, options);
  torch::NoGradGuard no_grad;
  const auto v =
      model->encode(model_batch({{&in.tree, in.pivot}}, model->config())).cpu().contiguous();
  EncodeReport report;
  report.vector.assign(v.data_ptr<float>(), v.data_ptr<float>() + v.numel());
  report.nodes = in.tree.size();
  report.error_nodes = in.tree.error_nodes;
  report.missing_nodes = in.tree.missing_nodes;
  report.pivot_type = in.pivot_type;
  return report;
}

std::string encode_json(const EncodeReport& r) {
  nlohmann::json j{{"dim", r.vector.size()},
                   {"nodes", r.nodes},
                   {"error_nodes", r.error_nodes},
                   {"missing_nodes", r.missing_nodes},
                   {"vector", r.vector}};
  if (!r.pivot_type.empty()) j["pivot_type"] = r.pivot_type;
  return j.dump();
}

ClassifyReport classify_file(const EncodeOptions& options, int k) {
  if (!options.pivot.empty()) parse_pivot(options.pivot);
  trainer::set_threads_option(options.threads);
  const c10::Device device = trainer::resolve_device(options.device);
  TbcnnModel model = load_model(options.model_path);
  model->to(device);
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
  report.missing_nodes = in.tree.missing_nodes;
  return report;
}

}  // namespace engram::tbcnn
