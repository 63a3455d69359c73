#pragma once
/// \file
/// The TBCNN code encoder's entry points, one per command, over plain option structs (no torch in
/// this header). Models: "tbcnn" (whole tree, max pooling), "localized" (the pivot's vector after
/// layers of windows centred on it, TreeBatch.h) and "bow" (bag of node types, logistic regression;
/// the baseline). Tasks: "classify" (the class of each file of a corpus), "masked" (the kind of
/// a statement whose own subtree is replaced by one <mask> node; the statement is the pivot, marked
/// by an input flag for the whole-tree model) and "loop" (the file's class at the pivot
/// loop_pivot() finds: the loop of the file's last function, e.g. which high-order function it
/// computes, engram synth's TBCNN recogniser).
///
/// \code
///   engram::tbcnn::TrainTbcnnOptions t;  t.corpus_path = "stdlib.corpus";  t.out_path = "m.pt";
///   engram::tbcnn::train_tbcnn(t);
///   engram::tbcnn::EvalTbcnnOptions e;  e.model_path = "m.pt";  e.corpus_path = "stdlib.corpus";
///   auto r = engram::tbcnn::evaluate_tbcnn(e);    // r.accuracy, r.top5 on the test split
/// \endcode

#include "trainer/TrainingOptions.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace engram::tbcnn {

struct TrainTbcnnOptions {
  std::string corpus_path;
  std::string out_path;
  std::string model = "tbcnn";    ///< tbcnn, localized, bow
  std::string task = "classify";  ///< classify, masked, loop
  int embedding = 64;
  int channels = 128;
  int layers = 2;
  bool residual = false;  ///< add each layer's input to its output (layers after the first)
  std::string activation = "relu";
  bool identifiers = false;
  int statements_per_file = 3;  ///< masked task: statements drawn from each file
  /// Every `valid_every` steps (0: never) the model is scored on the valid split, the accuracy
  /// goes into the metrics line as "valid_accuracy", and the model written to out_path is the one
  /// with the best valid accuracy so far (early stopping by model selection; the earliest on ties).
  long valid_every = 0;
  int valid_statements_per_file = 3;  ///< masked task: statements per valid file
  /// The session: steps, batch (trees per step), learning rate, seed (also the initial
  /// weights), threads, metrics and the memory techniques (trainer/MemoryTechniques.h): "none"
  /// or "relu" (the ReLU outputs of the convolutions kept compressed for backward; lossless).
  /// TBCNN is not cut into units, so recompute and swap are usage errors.
  trainer::TrainingOptions training = default_training();

  static trainer::TrainingOptions default_training() {
    trainer::TrainingOptions t;
    t.steps = 3000;
    t.batch = 32;
    t.learning_rate = 1e-3;
    return t;
  }
};

/// The options the claims use for `model` (scripts/reproduce/tbcnn*.sh), for a user who gives
/// none: TrainTbcnnOptions' defaults, and for the bag-of-types baseline ("bow") a learning rate
/// of 0.05 (at 1e-3 it scored 0.226 on the stdlib task, at 0.05 0.405).
TrainTbcnnOptions train_defaults(const std::string& model);

struct TrainTbcnnReport {
  long steps = 0;
  double seconds = 0;
  double final_loss = 0;
  long examples = 0;  ///< training examples (trees, or masked statements)
  double trees_per_second = 0;
  double nodes_per_second = 0;
  long compressed_tensors = 0;  ///< --memory relu: ReLU outputs stored compressed
  /// With recompute or swap: the plan training ran under (trainer::TrainSummary::memory_plan).
  std::string memory_plan;
  /// valid_every > 0: the valid accuracy at each scored step, and the step of the model written.
  std::vector<std::pair<long, double>> valid_curve;
  long best_step = 0;
  double best_valid_accuracy = 0;
};

TrainTbcnnReport train_tbcnn(const TrainTbcnnOptions& options);

struct EvalTbcnnOptions {
  std::string model_path;
  std::string corpus_path;
  std::string split = "test";
  int statements_per_file = 3;  ///< masked task: statements drawn from each file
  int threads = 1;
  std::string device = "cpu";  ///< where the model runs: cpu, cuda, cuda:N (trainer/Device.h)
  /// When set, every example's vector (encode()), label and prediction are written here as JSON
  /// (see write_vectors_json), atomically.
  std::string vectors_path;
};

struct EvalTbcnnReport {
  std::string model, task, split;
  long count = 0;
  double accuracy = 0;
  double top5 = 0;
  long classes = 0;
  long skipped = 0;  ///< masked task: statements of a kind the model has no class for
};

EvalTbcnnReport evaluate_tbcnn(const EvalTbcnnOptions& options);
/// {"model","task","split","count","accuracy","top5","classes","skipped"}
std::string eval_tbcnn_json(const EvalTbcnnReport& report);

struct EncodeOptions {
  std::string model_path;
  std::string file;
  /// "LINE:COL" (1-based), required by localized and masked-task models: the deepest node there,
  /// or for masked-task models the innermost statement around it.
  std::string pivot;
  /// Loop-task models without a pivot: the loop of this function (default: the file's last).
  std::string function;
  int threads = 1;
  std::string device = "cpu";  ///< where the model runs: cpu, cuda, cuda:N (trainer/Device.h)
};

struct EncodeReport {
  std::vector<float> vector;
  int nodes = 0;
  int error_nodes = 0;     ///< parse errors in the file: ERROR nodes (a warning, not a failure)
  int missing_nodes = 0;   ///< and tokens the parser had to insert (MISSING), e.g. in `def f(:`
  std::string pivot_type;  ///< the node type at the pivot, when one was given
};

/// Throws UsageError for a malformed --pivot, std::runtime_error for an unreadable file.
EncodeReport encode_file(const EncodeOptions& options);
std::string encode_json(const EncodeReport& report);

struct ClassifyReport {
  std::vector<std::pair<std::string, double>> top;  ///< class and probability, best first
  int error_nodes = 0;                              ///< as EncodeReport's
  int missing_nodes = 0;
};

/// The `k` most probable classes of a file: the classes of its model's task (files for classify,
/// statement kinds at --pivot for masked).
ClassifyReport classify_file(const EncodeOptions& options, int k = 5);

}  // namespace engram::tbcnn
