#include "datasets/CodeTree.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace engram::datasets {
namespace {

std::string type_of(const CodeTree& tree, int node) {
  return node_type_name(tree.language, tree.type[node]);
}

std::vector<std::string> types_in_preorder(const CodeTree& tree) {
  std::vector<std::string> names;
  for (int i = 0; i < tree.size(); ++i) names.push_back(type_of(tree, i));
  return names;
}

TEST(CodeTree, PythonFunctionBecomesItsNamedNodesInPreorder) {
  const CodeTree tree = parse_code(Language::kPython, "def f(x):\n    return x + 1\n");
  EXPECT_EQ(types_in_preorder(tree),
            (std::vector<std::string>{"module", "function_definition", "identifier", "parameters",
                                      "identifier", "block", "return_statement", "binary_operator",
                                      "identifier", "integer"}));
  EXPECT_EQ(tree.parent[0], -1);
  for (int i = 1; i < tree.size(); ++i) EXPECT_LT(tree.parent[i], i) << "parents come first";
  EXPECT_EQ(tree.children(1), (std::vector<int>{2, 3, 5}));
  EXPECT_EQ(tree.identifier[2], "f");
  EXPECT_EQ(tree.identifier[4], "x");
  EXPECT_EQ(tree.identifier[9], "") << "only identifiers keep their text";
  EXPECT_EQ(tree.error_nodes, 0);
  EXPECT_EQ(tree.start[6].line, 1);
  EXPECT_EQ(tree.start[6].column, 4);
  // Children lists agree with parents.
  for (int i = 0; i < tree.size(); ++i) {
    for (int c : tree.children(i)) EXPECT_EQ(tree.parent[c], i);
  }
}

TEST(CodeTree, CAndCppParseWithTheirGrammars) {
  const CodeTree c = parse_code(Language::kC, "int main(void) { return 0; }\n");
  EXPECT_EQ(type_of(c, 0), "translation_unit");
  EXPECT_EQ(type_of(c, 1), "function_definition");
  EXPECT_EQ(c.error_nodes, 0);
  const CodeTree cpp =
      parse_code(Language::kCpp, "template <class T> T add(T a, T b) { return a + b; }\n");
  EXPECT_EQ(type_of(cpp, 1), "template_declaration");
  EXPECT_EQ(cpp.error_nodes, 0);
  EXPECT_NE(node_type_names(Language::kCpp).size(), node_type_names(Language::kC).size());
}

TEST(CodeTree, ParseErrorsBecomeCountedErrorNodes) {
  const CodeTree tree = parse_code(Language::kPython, "def f(:\n    return )\n");
  EXPECT_GT(tree.error_nodes + tree.missing_nodes, 0);
  bool has_error_type = false;
  for (int i = 0; i < tree.size(); ++i) has_error_type |= type_of(tree, i) == "ERROR";
  EXPECT_EQ(has_error_type, tree.error_nodes > 0);
  // A missing anonymous token (the ';') is counted too.
  const CodeTree c = parse_code(Language::kC, "int main(void) { int x = 1 }\n");
  EXPECT_EQ(c.error_nodes, 0);
  EXPECT_EQ(c.missing_nodes, 1);
}

TEST(CodeTree, WideNodesParseInLinearTime) {
  std::string source = "int a[] = {";
  for (int i = 0; i < 200000; ++i) source += "1,";
  source += "1};\n";
  const CodeTree tree = parse_code(Language::kC, source);
  EXPECT_GT(tree.size(), 200000);
}

TEST(CodeTree, NodeAtFindsTheDeepestNodeAndAncestorsLeadToTheRoot) {
  const CodeTree tree = parse_code(Language::kPython, "def f(x):\n    return x + 1\n");
  const int node = tree.node_at({1, 15});  // the "1"
  EXPECT_EQ(type_of(tree, node), "integer");
  const auto path = tree.ancestors(node);
  EXPECT_EQ(path.front(), node);
  EXPECT_EQ(path.back(), 0);
  EXPECT_EQ(type_of(tree, path[1]), "binary_operator");
}

TEST(CodeTree, NodeAtIsTheRootOnABlankLineAndNoneAfterTheEnd) {
  const CodeTree tree = parse_code(Language::kPython, "a = 1\n\nb = 2\n");
  EXPECT_EQ(tree.node_at({1, 0}), 0) << "the blank line is the module's alone";
  EXPECT_EQ(type_of(tree, tree.node_at({2, 0})), "identifier");  // the "b"
  EXPECT_EQ(tree.node_at({10, 0}), -1);
}

TEST(CodeTree, MaxNodesStopsLargeTrees) {
  EXPECT_THROW(parse_code(Language::kPython, "a = [1, 2, 3, 4, 5, 6]\n", 5), TooManyNodes);
  EXPECT_NO_THROW(parse_code(Language::kPython, "a = 1\n", 100));
}

TEST(CodeTree, LanguagesAndTextDetection) {
  EXPECT_EQ(parse_language("c++"), Language::kCpp);
  EXPECT_EQ(language_name(parse_language("python")), "python");
  EXPECT_THROW(parse_language("rust"), InputError);
  EXPECT_TRUE(is_text("x = 'caf\xc3\xa9'\n"));
  EXPECT_FALSE(is_text(std::string("ab\0cd", 5)));
  EXPECT_FALSE(is_text("\xff\xfe"));
  EXPECT_FALSE(is_text("caf\xc3"));
}

}  // namespace
}  // namespace engram::datasets
