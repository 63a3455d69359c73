#include "datasets/CodeTree.h"

#include <tree_sitter/api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

extern "C" {
const TSLanguage* tree_sitter_python(void);
const TSLanguage* tree_sitter_c(void);
const TSLanguage* tree_sitter_cpp(void);
}

namespace engram::datasets {
namespace {

const TSLanguage* grammar(Language language) {
  switch (language) {
    case Language::kPython:
      return tree_sitter_python();
    case Language::kC:
      return tree_sitter_c();
    case Language::kCpp:
      return tree_sitter_cpp();
  }
  return nullptr;
}

/// Per language: deduplicated node-type names and the name index of every grammar symbol.
struct TypeTable {
  std::vector<std::string> names;
  std::vector<int> of_symbol;
  int error_type = 0;
};

const TypeTable& type_table(Language language) {
  static std::once_flag once[3];
  static TypeTable tables[3];
  const int i = static_cast<int>(language);
  std::call_once(once[i], [&] {
    const TSLanguage* lang = grammar(language);
    const uint32_t count = ts_language_symbol_count(lang);
    std::map<std::string, int> index;
    TypeTable& t = tables[i];
    t.of_symbol.assign(count, -1);
    for (uint32_t s = 0; s < count; ++s) {
      const char* name = ts_language_symbol_name(lang, static_cast<TSSymbol>(s));
      if (name == nullptr) continue;
      const auto [it, added] = index.emplace(name, static_cast<int>(t.names.size()));
      if (added) t.names.push_back(name);
      t.of_symbol[s] = it->second;
    }
    // ERROR nodes have the built-in symbol 65535, outside the grammar's symbol table.
    const auto [error, added] = index.emplace("ERROR", static_cast<int>(t.names.size()));
    if (added) t.names.push_back("ERROR");
    t.error_type = error->second;
  });
  return tables[i];
}

struct ParserDeleter {
  void operator()(TSParser* p) const { ts_parser_delete(p); }
};
struct TreeDeleter {
  void operator()(TSTree* t) const { ts_tree_delete(t); }
};

bool is_identifier_type(const std::string& name) {
  return name.size() >= 10 && name.compare(name.size() - 10, 10, "identifier") == 0;
}

}  // namespace

std::string language_name(Language language) {
  switch (language) {
    case Language::kPython:
      return "python";
    case Language::kC:
      return "c";
    case Language::kCpp:
      return "cpp";
  }
  return "?";
}

Language parse_language(const std::string& name) {
  if (name == "python") return Language::kPython;
  if (name == "c") return Language::kC;
  if (name == "cpp" || name == "c++") return Language::kCpp;
  throw InputError("unknown language '" + name + "' (known: python, c, cpp)");
}

std::vector<std::string> language_suffixes(Language language) {
  switch (language) {
    case Language::kPython:
      return {".py"};
    case Language::kC:
      return {".c", ".h", ".txt"};
    case Language::kCpp:
      return {".cpp", ".cc", ".cxx", ".hpp", ".hh", ".h", ".txt"};
  }
  return {};
}

const std::vector<std::string>& node_type_names(Language language) {
  return type_table(language).names;
}

std::string node_type_name(Language language, int type) {
  const auto& names = node_type_names(language);
  return type >= 0 && type < static_cast<int>(names.size()) ? names[type] : "?";
}

std::vector<int> CodeTree::children(int node) const {
  return {child_list.begin() + child_begin[node], child_list.begin() + child_begin[node + 1]};
}

int CodeTree::node_at(Position p) const {
  auto before = [](Position a, Position b) {
    return a.line < b.line || (a.line == b.line && a.column < b.column);
  };
  int best = -1;
  // Pre-order: a later node that contains the position is deeper than every earlier one that does.
  for (int i = 0; i < size(); ++i) {
    if (!before(p, start[i]) && before(p, end[i])) best = i;
  }
  return best;
}

std::vector<int> CodeTree::ancestors(int node) const {
  std::vector<int> path;
  for (int n = node; n >= 0; n = parent[n]) path.push_back(n);
  return path;
}

CodeTree parse_code(Language language, const std::string& source, long max_nodes) {
  std::unique_ptr<TSParser, ParserDeleter> parser(ts_parser_new());
  if (!ts_parser_set_language(parser.get(), grammar(language))) {
    throw std::runtime_error("tree-sitter refuses the " + language_name(language) +
                             " grammar (ABI " +
                             std::to_string(ts_language_version(grammar(language))) + ")");
  }
  std::unique_ptr<TSTree, TreeDeleter> tree(ts_parser_parse_string(
      parser.get(), nullptr, source.data(), static_cast<uint32_t>(source.size())));
  if (!tree) throw std::runtime_error("tree-sitter did not parse the source");
  const TypeTable& types = type_table(language);

  CodeTree out;
  out.language = language;
  // Pre-order walk over every node with a cursor (constant time per step, whatever the fan-out):
  // named nodes are kept, each under its nearest named ancestor; MISSING tokens are counted
  // whether named or not. named_at[d]: the nearest kept node at or above cursor depth d.
  TSTreeCursor cursor = ts_tree_cursor_new(ts_tree_root_node(tree.get()));
  struct CursorDeleter {
    TSTreeCursor* c;
    ~CursorDeleter() { ts_tree_cursor_delete(c); }
  } cursor_deleter{&cursor};
  std::vector<int> named_at;
  std::vector<std::vector<int>> kids;
  std::size_t depth = 0;
  while (true) {
    const TSNode n = ts_tree_cursor_current_node(&cursor);
    const int parent = depth == 0 ? -1 : named_at[depth - 1];
    int self = parent;
    if (ts_node_is_missing(n)) ++out.missing_nodes;
    if (ts_node_is_named(n)) {
      self = out.size();
      if (max_nodes > 0 && self >= max_nodes) {
        throw TooManyNodes("more than " + std::to_string(max_nodes) + " nodes");
      }
      const TSSymbol symbol = ts_node_symbol(n);
      const bool error = std::strcmp(ts_node_type(n), "ERROR") == 0;
      int type = symbol < types.of_symbol.size() ? types.of_symbol[symbol] : -1;
      if (error || type < 0) type = types.error_type;
      out.type.push_back(type);
      out.parent.push_back(parent);
      const TSPoint a = ts_node_start_point(n), b = ts_node_end_point(n);
      out.start.push_back({static_cast<int>(a.row), static_cast<int>(a.column)});
      out.end.push_back({static_cast<int>(b.row), static_cast<int>(b.column)});
      std::string text;
      if (ts_node_named_child_count(n) == 0 && is_identifier_type(types.names[type])) {
        const uint32_t from = ts_node_start_byte(n), to = ts_node_end_byte(n);
        if (to <= source.size() && from < to) text = source.substr(from, to - from);
      }
      out.identifier.push_back(std::move(text));
      if (error) ++out.error_nodes;
      kids.emplace_back();
      if (parent >= 0) kids[parent].push_back(self);
    }
    named_at.resize(depth + 1);
    named_at[depth] = self;
    if (ts_tree_cursor_goto_first_child(&cursor)) {
      ++depth;
      continue;
    }
    bool more = true;
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        more = false;
        break;
      }
      --depth;
    }
    if (!more) break;
  }
  out.child_begin.assign(out.size() + 1, 0);
  for (int i = 0; i < out.size(); ++i) {
    out.child_begin[i + 1] = out.child_begin[i] + static_cast<int>(kids[i].size());
    out.child_list.insert(out.child_list.end(), kids[i].begin(), kids[i].end());
  }
  return out;
}

bool is_text(const std::string& bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0) return false;
    int extra = c < 0x80           ? 0
                : (c >> 5) == 0x6  ? 1
                : (c >> 4) == 0xE  ? 2
                : (c >> 3) == 0x1E ? 3
                                   : -1;
    if (extra < 0) return false;
    for (int k = 1; k <= extra; ++k) {
      if (i + k >= bytes.size() || (static_cast<unsigned char>(bytes[i + k]) >> 6) != 0x2)
        return false;
    }
    i += extra + 1;
  }
  return true;
}

}  // namespace engram::datasets
