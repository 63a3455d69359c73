#pragma once
/// \file
/// Source code as compact abstract syntax trees, parsed by tree-sitter with the real Python, C and
/// C++ grammars (scripts/fetch-grammars.sh). Only named nodes are kept (tree-sitter's anonymous
/// nodes are punctuation and keywords), in pre-order, so node 0 is the root and every parent comes
/// before its children. Parse errors do not stop parsing: they become ERROR nodes (and MISSING
/// nodes for tokens the parser inserted), which are counted.
///
/// \code
///   using namespace engram::datasets;
///   CodeTree tree = parse_code(Language::kPython, "def f(x):\n    return x + 1\n");
///   tree.size();                                   // named nodes
///   node_type_name(Language::kPython, tree.type[0]); // "module"
///   tree.children(1);                              // child node indices of node 1
///   tree.identifier[k];                            // "f", "x", ... for identifier leaves
/// \endcode
///
/// No tree-sitter types in this header; tree-sitter stays inside CodeTree.cpp.

#include "datasets/Task.h"

#include <cstdint>
#include <string>
#include <vector>

namespace engram::datasets {

enum class Language { kPython, kC, kCpp };

/// "python", "c", "cpp".
std::string language_name(Language language);
/// Parses "python", "c", "cpp" (also "c++"); throws InputError listing them otherwise.
Language parse_language(const std::string& name);
/// The file suffixes of a language's source files, e.g. {".py"}.
std::vector<std::string> language_suffixes(Language language);

/// Names of a grammar's node types; a node's `type` indexes this list. Symbols that tree-sitter
/// aliases to one name share one entry.
const std::vector<std::string>& node_type_names(Language language);
std::string node_type_name(Language language, int type);

/// A 0-based line and column (bytes) in the source.
struct Position {
  int line = 0;
  int column = 0;
};

struct CodeTree {
  Language language = Language::kPython;
  std::vector<int> type;                ///< per node: index into node_type_names(language)
  std::vector<int> parent;              ///< per node: parent index, -1 for the root
  std::vector<int> child_begin;         ///< node i's children are child_list[child_begin[i] ..
  std::vector<int> child_list;          ///<   child_begin[i+1]), in source order
  std::vector<Position> start, end;     ///< per node: source span
  std::vector<std::string> identifier;  ///< per node: the text of identifier leaves, else ""
  int error_nodes = 0;                  ///< ERROR nodes
  int missing_nodes = 0;                ///< tokens the parser inserted to recover

  int size() const { return static_cast<int>(type.size()); }
  int num_children(int node) const { return child_begin[node + 1] - child_begin[node]; }
  std::vector<int> children(int node) const;
  /// The deepest node whose span contains the 0-based position (the root when only it does: a
  /// blank line between statements); -1 when not even the root does (past the end).
  int node_at(Position position) const;
  /// Nodes on the path from `node` up to the root, `node` first.
  std::vector<int> ancestors(int node) const;
};

/// Thrown when a tree has more nodes than allowed (the caller decides to skip or fail).
class TooManyNodes : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses `source`; never throws for malformed code (ERROR nodes instead). Throws TooManyNodes
/// when `max_nodes` > 0 and the tree has more named nodes, std::runtime_error if tree-sitter
/// refuses the grammar (an ABI mismatch).
CodeTree parse_code(Language language, const std::string& source, long max_nodes = 0);

/// Whether `bytes` is valid UTF-8 without NUL bytes (binary files fail).
bool is_text(const std::string& bytes);

}  // namespace engram::datasets
