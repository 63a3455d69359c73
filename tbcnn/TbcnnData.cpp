#include "tbcnn/TbcnnData.h"

#include "common/Errors.h"
#include "common/Hash.h"

#include <algorithm>
#include <map>
#include <set>

namespace engram::tbcnn {

using datasets::CodeCorpus;
using datasets::CodeTree;

bool is_statement(const std::string& type) {
  return type.size() > 10 && type.compare(type.size() - 10, 10, "_statement") == 0;
}

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
    if (config.task == "loop") {
      const auto it = class_of.find(corpus.classes[sample.label]);
      const int pivot = loop_pivot(sample.tree, corpus.vocabulary);
      if (it == class_of.end() || pivot < 0) {
        ++ex.skipped;
        continue;
      }
      ex.trees.push_back(sample.tree);
      ex.pivots.push_back(pivot);
      ex.labels.push_back(it->second);
      ex.nodes += sample.tree.size();
      continue;
    }
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

int loop_pivot(const CodeTree& tree, const std::vector<std::string>& names,
               const std::string& function_name) {
  auto type_of = [&](int node) -> const std::string& {
    return names.at(static_cast<std::size_t>(tree.type[static_cast<std::size_t>(node)]));
  };
  // A definition's name is its first identifier child.
  auto name_of = [&](int definition) -> std::string {
    for (int child : tree.children(definition))
      if (type_of(child) == "identifier") return tree.identifier[static_cast<std::size_t>(child)];
    return "";
  };
  int function = -1;
  for (int i = 0; i < tree.size(); ++i) {
    if (type_of(i) == "function_definition" &&
        (function_name.empty() || name_of(i) == function_name))
      function = i;  // the last one in source order
  }
  if (function < 0) return -1;
  static const std::set<std::string> loops{
      "for_statement",     "while_statement",          "list_comprehension",
      "set_comprehension", "dictionary_comprehension", "generator_expression"};
  static const std::set<std::string> high_order{"map", "filter", "zip",    "sum",
                                                "max", "min",    "reduce", "accumulate"};
  // Pre-order: the function's subtree is the nodes after it until the next node outside it.
  for (int i = function + 1; i < tree.size(); ++i) {
    bool inside = false;
    for (int a = tree.parent[static_cast<std::size_t>(i)]; a >= 0;
         a = tree.parent[static_cast<std::size_t>(a)])
      if (a == function) inside = true;
    if (!inside) break;
    if (loops.count(type_of(i)) != 0) return i;
    if (type_of(i) != "call" || tree.num_children(i) == 0) continue;
    int callee =
        tree.child_list[static_cast<std::size_t>(tree.child_begin[static_cast<std::size_t>(i)])];
    if (type_of(callee) == "attribute" && tree.num_children(callee) > 0) {  // functools.reduce
      const auto kids = tree.children(callee);
      callee = kids.back();
    }
    if (high_order.count(tree.identifier[static_cast<std::size_t>(callee)]) != 0) return i;
  }
  return -1;
}

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

}  // namespace engram::tbcnn
