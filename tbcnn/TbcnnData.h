#pragma once
/// \file
/// TBCNN training and evaluation data: examples drawn from a code corpus (whole files for the
/// classify task; for the masked task, up to N statements per file, each with its own subtree
/// replaced by one <mask> node and kept as the pivot), the statement kinds a masked model
/// predicts, and the batches its model reads.
///
/// \code
///   const auto corpus = engram::datasets::read_corpus("stdlib.corpus");
///   engram::tbcnn::TbcnnConfig config;  config.task = "masked";
///   config.vocabulary = corpus.vocabulary;  config.vocabulary.push_back(engram::tbcnn::kMask);
///   config.classes = engram::tbcnn::statement_kinds(corpus);
///   auto train = engram::tbcnn::make_examples(corpus, engram::datasets::Split::kTrain, config, 3);
///   engram::tbcnn::TreeBatch batch = engram::tbcnn::batch_of(train, {0, 1, 2}, config);
/// \endcode
///
/// Heavy header (torch): tbcnn sources and tests only; users go through tbcnn/Tbcnn.h.

#include "datasets/CodeCorpus.h"
#include "tbcnn/TbcnnModel.h"
#include "tbcnn/TreeBatch.h"

#include <cstddef>
#include <string>
#include <vector>

namespace engram::tbcnn {

/// The node type that replaces a masked statement (the last of a masked model's vocabulary).
inline constexpr const char* kMask = "<mask>";

/// True for the node types the masked task predicts: names ending in "_statement".
bool is_statement(const std::string& type);

/// `tree` with `node`'s descendants removed and its type replaced by `mask_type`.
datasets::CodeTree mask_subtree(const datasets::CodeTree& tree, int node, int mask_type);

/// Training or evaluation examples: trees (owned), pivots and labels.
struct Examples {
  std::vector<datasets::CodeTree> trees;
  std::vector<int> pivots;
  std::vector<int> labels;
  long skipped = 0;
  long nodes = 0;
};

/// The loop of the tree's last function definition (Python): the first node, in source order,
/// that is a for or while statement, a list, set or dict comprehension, a generator expression,
/// or a call of map, filter, zip, sum, max, min, reduce or accumulate (also as module.name);
/// -1 when there is none. `names`: the node-type names the tree's types index (a corpus's
/// vocabulary, or datasets::node_type_names of a freshly parsed tree). `function`: the loop of
/// the last definition of the function of that name instead (-1 also when there is none).
int loop_pivot(const datasets::CodeTree& tree, const std::vector<std::string>& names,
               const std::string& function = "");

/// Statement kinds of the corpus, sorted.
std::vector<std::string> statement_kinds(const datasets::CodeCorpus& corpus);

/// The examples of `split` for `config`'s task: every file of a class the model knows (classify),
/// or up to `statements_per_file` statements of each file, in an order fixed by the file's path
/// (masked); examples of a class the model does not know are counted in `skipped`. Throws
/// FormatError when the corpus's node types do not match the model's.
Examples make_examples(const datasets::CodeCorpus& corpus, datasets::Split split,
                       const TbcnnConfig& config, int statements_per_file);

/// The batch `config`'s model reads: a localized model only the nodes its pivot can reach.
TreeBatch model_batch(const std::vector<TreeInput>& inputs, const TbcnnConfig& config);

/// model_batch of the examples at `indices`.
TreeBatch batch_of(const Examples& ex, const std::vector<std::size_t>& indices,
                   const TbcnnConfig& config);

}  // namespace engram::tbcnn
