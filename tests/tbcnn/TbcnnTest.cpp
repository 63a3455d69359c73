#include "tbcnn/Tbcnn.h"
#include "tbcnn/TbcnnData.h"
#include "tbcnn/TbcnnModel.h"
#include "tbcnn/TreeBatch.h"

#include "datasets/CodeCorpus.h"
#include "tests/support/DeviceRuns.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace engram::tbcnn {
namespace {

using datasets::CodeTree;
using datasets::Language;
using testing::TempDir;

/// A tree from parents alone (pre-order), all of type `type`.
CodeTree tree_from_parents(const std::vector<int>& parents, int type = 0) {
  CodeTree t;
  t.parent = parents;
  t.type.assign(parents.size(), type);
  t.identifier.assign(parents.size(), "");
  t.start.assign(parents.size(), {});
  t.end.assign(parents.size(), {});
  std::vector<std::vector<int>> kids(parents.size());
  for (std::size_t i = 1; i < parents.size(); ++i) kids[parents[i]].push_back(static_cast<int>(i));
  t.child_begin.assign(parents.size() + 1, 0);
  for (std::size_t i = 0; i < parents.size(); ++i) {
    t.child_begin[i + 1] = t.child_begin[i] + static_cast<int>(kids[i].size());
    t.child_list.insert(t.child_list.end(), kids[i].begin(), kids[i].end());
  }
  return t;
}

std::set<std::pair<int, int>> edges(const std::vector<Window>& windows) {
  std::set<std::pair<int, int>> out;
  for (const auto& w : windows) out.insert({w.top, w.child});
  return out;
}

// The worked 5-node example of tbcnn/TreeBatch.h: 0 -> {1, 2}, 1 -> {3, 4}.
const std::vector<int> kFiveNodes{-1, 0, 0, 1, 1};

TEST(TreeWindows, WholeTreeWindowsAreEachNodeAndItsChildren) {
  const auto windows = tree_windows(tree_from_parents(kFiveNodes), -1, false);
  EXPECT_EQ(edges(windows), (std::set<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 3}, {1, 4}}));
}

TEST(TreeWindows, LocalizedWindowsOfTheWorkedExample) {
  const auto windows = tree_windows(tree_from_parents(kFiveNodes), 3, true);
  // Pivot 3, ancestors 1 and 0. Down: each node's children but ancestors of the pivot; up: every
  // node's parent.
  std::set<std::pair<int, int>> down, up;
  for (const auto& w : windows) (w.up ? up : down).insert({w.top, w.child});
  EXPECT_EQ(down, (std::set<std::pair<int, int>>{{1, 3}, {1, 4}, {0, 2}}));
  EXPECT_EQ(up, (std::set<std::pair<int, int>>{{3, 1}, {1, 0}, {2, 0}, {4, 1}}));
  // Down rows carry the child's place among its siblings, up rows the top's own.
  std::map<std::pair<int, int>, std::pair<float, float>> eta;
  for (const auto& w : windows) eta[{w.top, w.child}] = {w.eta_left, w.eta_right};
  EXPECT_EQ(eta.at({3, 1}), std::make_pair(1.0f, 0.0f)) << "3 is 1's first child";
  EXPECT_EQ(eta.at({1, 0}), std::make_pair(1.0f, 0.0f)) << "1 is 0's first child";
  EXPECT_EQ(eta.at({1, 4}), std::make_pair(0.0f, 1.0f));
  EXPECT_EQ(eta.at({4, 1}), std::make_pair(0.0f, 1.0f));
  EXPECT_EQ(eta.at({0, 2}), std::make_pair(0.0f, 1.0f));
  // The same tree with the pivot at 4, the last child: the pivot's window says so.
  int pivot_rows = 0;
  for (const auto& w : tree_windows(tree_from_parents(kFiveNodes), 4, true)) {
    if (w.top != 4) continue;
    ++pivot_rows;
    EXPECT_TRUE(w.up);
    EXPECT_FLOAT_EQ(w.eta_right, 1.0f);
  }
  EXPECT_EQ(pivot_rows, 1);
  // Pivot at the root: no ancestors, so every edge is used both ways.
  std::set<std::pair<int, int>> at_root_down, at_root_up;
  for (const auto& w : tree_windows(tree_from_parents(kFiveNodes), 0, true))
    (w.up ? at_root_up : at_root_down).insert({w.top, w.child});
  EXPECT_EQ(at_root_down, edges(tree_windows(tree_from_parents(kFiveNodes), -1, false)));
  EXPECT_EQ(at_root_up.size(), 4u);
  EXPECT_THROW(tree_windows(tree_from_parents(kFiveNodes), -1, true), std::invalid_argument);
}

TEST(TreeWindows, ContinuousBinaryTreeCoefficients) {
  const auto windows = tree_windows(tree_from_parents({-1, 0, 0, 0, 3}), -1, false);
  ASSERT_EQ(windows.size(), 4u);
  // Three children: right 0, 1/2, 1; left = 1 - right. One child: 1/2 and 1/2.
  EXPECT_FLOAT_EQ(windows[0].eta_right, 0.0f);
  EXPECT_FLOAT_EQ(windows[0].eta_left, 1.0f);
  EXPECT_FLOAT_EQ(windows[1].eta_right, 0.5f);
  EXPECT_FLOAT_EQ(windows[2].eta_right, 1.0f);
  EXPECT_FLOAT_EQ(windows[2].eta_left, 0.0f);
  EXPECT_FLOAT_EQ(windows[3].eta_left, 0.5f);
  EXPECT_FLOAT_EQ(windows[3].eta_right, 0.5f);
}

TEST(TreeBatch, IdentifierSubtokens) {
  EXPECT_EQ(identifier_subtokens("parseHTTPResponse_v2"),
            (std::vector<std::string>{"parse", "http", "response", "v", "2"}));
  EXPECT_EQ(identifier_subtokens("__init__"), (std::vector<std::string>{"init"}));
}

TbcnnConfig small_config(const std::string& model) {
  TbcnnConfig c;
  c.model = model;
  c.vocabulary = {"a", "b", "c", "d"};
  c.classes = {"x", "y", "z"};
  c.embedding = 6;
  c.channels = 5;
  c.layers = 2;
  return c;
}

std::vector<CodeTree> sample_trees() {
  std::vector<CodeTree> trees{tree_from_parents(kFiveNodes), tree_from_parents({-1, 0, 1, 1, 0, 4}),
                              tree_from_parents({-1})};
  for (auto& t : trees) {
    for (int i = 0; i < t.size(); ++i) t.type[i] = (i * 3 + t.size()) % 4;
  }
  return trees;
}

/// The layer equation node by node with plain torch ops: the per-tree reference.
torch::Tensor reference_encode(TbcnnModelImpl& model, const CodeTree& tree, int pivot) {
  auto params = model.named_parameters();
  const auto& c = model.config();
  auto x = params["types.weight"].index_select(
      0, torch::tensor(std::vector<int64_t>(tree.type.begin(), tree.type.end())));
  const auto windows = tree_windows(tree, pivot, c.localized());
  for (int l = 0; l < c.layers; ++l) {
    const std::string n = "conv" + std::to_string(l);
    const auto wt = params[n + "_top.weight"], bt = params[n + "_top.bias"];
    const auto wl = params[n + "_left.weight"], wr = params[n + "_right.weight"];
    const auto ul = c.localized() ? params[n + "_up_left.weight"] : torch::Tensor();
    const auto ur = c.localized() ? params[n + "_up_right.weight"] : torch::Tensor();
    std::vector<torch::Tensor> rows;
    for (int p = 0; p < tree.size(); ++p) {
      auto y = torch::mv(wt, x[p]) + bt;
      for (const auto& w : windows) {
        if (w.top != p) continue;
        const auto& left = w.up ? ul : wl;
        const auto& right = w.up ? ur : wr;
        y = y + w.eta_left * torch::mv(left, x[w.child]) +
            w.eta_right * torch::mv(right, x[w.child]);
      }
      rows.push_back(torch::relu(y));
    }
    x = c.residual && l > 0 ? torch::stack(rows) + x : torch::stack(rows);
  }
  return c.localized() ? x[pivot] : std::get<0>(x.max(0));
}

TEST(TbcnnModel, BatchedForwardAndGradientsEqualThePerTreeReference) {
  for (const std::string name : {"tbcnn", "localized", "tbcnn+residual", "localized+residual"}) {
    const std::string kind = name.substr(0, name.find('+'));
    auto config = small_config(kind);
    config.residual = name.find("+residual") != std::string::npos;
    torch::manual_seed(3);
    TbcnnModel model(config);
    const auto trees = sample_trees();
    std::vector<TreeInput> inputs;
    for (const auto& t : trees) inputs.push_back({&t, t.size() - 1});
    const auto batched = model->encode(make_tree_batch(inputs, kind == "localized", 0));
    ASSERT_EQ(batched.sizes(), (std::vector<int64_t>{3, 5}));
    std::vector<torch::Tensor> rows;
    for (const auto& t : trees) rows.push_back(reference_encode(*model, t, t.size() - 1));
    const auto reference = torch::stack(rows);
    EXPECT_TRUE(torch::allclose(batched, reference, 1e-5, 1e-6)) << name;

    // Gradients of the same scalar through both paths.
    const auto weights = torch::arange(15, torch::kFloat).reshape({3, 5}) / 7.0;
    std::vector<torch::Tensor> grads_batched, grads_reference;
    model->zero_grad();
    (model->encode(make_tree_batch(inputs, kind == "localized", 0)) * weights).sum().backward();
    for (auto& p : model->parameters())
      grads_batched.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    model->zero_grad();
    (reference * weights).sum().backward();
    for (auto& p : model->parameters())
      grads_reference.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    int compared = 0;
    for (std::size_t i = 0; i < grads_batched.size(); ++i) {
      ASSERT_EQ(grads_batched[i].defined(), grads_reference[i].defined()) << name << i;
      if (!grads_batched[i].defined()) continue;  // the classifier: not part of encode()
      EXPECT_TRUE(torch::allclose(grads_batched[i], grads_reference[i], 1e-4, 1e-5)) << name << i;
      ++compared;
    }
    EXPECT_EQ(compared, kind == "localized" ? 13 : 9)
        << "the type embedding, and three matrices (five localized) and a bias per layer";
  }
}

// On a GPU: every TBCNN variant's forward and gradients on CUDA equal the CPU's (TF32 off), with
// the batch made in host memory as always.
TEST(TbcnnModel, OnCudaTheForwardAndGradientsEqualTheCpus) {
  ENGRAM_SKIP_WITHOUT_CUDA();
  at::globalContext().setAllowTF32CuBLAS(false);
  for (const std::string kind : {"tbcnn", "localized", "bow"}) {
    SCOPED_TRACE(kind);
    const auto config = small_config(kind);
    const auto trees = sample_trees();
    std::vector<TreeInput> inputs;
    for (const auto& t : trees) inputs.push_back({&t, t.size() - 1});
    const TreeBatch batch = make_tree_batch(inputs, kind == "localized", 0);
    std::vector<torch::Tensor> outputs;
    std::vector<std::vector<torch::Tensor>> grads;
    for (const char* device : {"cpu", "cuda"}) {
      torch::manual_seed(3);
      TbcnnModel model(config);
      model->to(torch::Device(device));
      const auto logits = model->forward(batch);
      (logits * logits).sum().backward();
      outputs.push_back(logits.detach().cpu());
      grads.emplace_back();
      for (auto& p : model->parameters())
        grads.back().push_back(p.grad().defined() ? p.grad().cpu() : torch::Tensor());
    }
    double largest = (outputs[0] - outputs[1]).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(outputs[0], outputs[1], 1e-5, 1e-6));
    for (std::size_t i = 0; i < grads[0].size(); ++i) {
      ASSERT_EQ(grads[0][i].defined(), grads[1][i].defined()) << i;
      if (!grads[0][i].defined()) continue;
      largest = std::max(largest, (grads[0][i] - grads[1][i]).abs().max().item<double>());
      EXPECT_TRUE(torch::allclose(grads[0][i], grads[1][i], 1e-4, 1e-5)) << i;
    }
    std::printf("[ device   ] tbcnn %s: largest output or gradient difference %.3g\n",
                kind.c_str(), largest);
  }
}

// Internal pivots (a loop statement has a parent and children, so its window holds both the
// parent term and children below), with the whole tree and with the pivot's neighbourhood only:
// the batched forward and every gradient equal the node-by-node reference at every node.
TEST(TbcnnModel, LocalizedAtInternalPivotsEqualsThePerTreeReference) {
  std::vector<int> parents{-1, 0, 1, 1, 1, 0, 5, 6, 6, 5, 0};  // 1 and 5: inner nodes, 6 deeper
  auto tree = tree_from_parents(parents);
  for (int i = 0; i < tree.size(); ++i) tree.type[i] = (i * 5 + 1) % 4;
  for (const bool residual : {false, true}) {
    auto config = small_config("localized");
    config.layers = 3;
    config.residual = residual;
    torch::manual_seed(17);
    TbcnnModel model(config);
    std::vector<TreeInput> inputs;
    for (int pivot = 0; pivot < tree.size(); ++pivot) inputs.push_back({&tree, pivot});
    std::vector<torch::Tensor> rows;
    for (int pivot = 0; pivot < tree.size(); ++pivot)
      rows.push_back(reference_encode(*model, tree, pivot));
    const auto reference = torch::stack(rows);
    const auto weights = torch::arange(reference.numel(), torch::kFloat).reshape(reference.sizes());
    auto gradients = [&](const torch::Tensor& out) {
      model->zero_grad();
      (out * weights / 13.0).sum().backward();
      std::vector<torch::Tensor> g;
      for (auto& p : model->parameters())
        if (p.grad().defined()) g.push_back(p.grad().clone());
      return g;
    };
    const auto expected = gradients(reference);
    for (const int reach : {-1, config.layers}) {  // the whole tree; the neighbourhood
      const auto batch = make_tree_batch(inputs, true, 0, reach);
      const auto batched = model->encode(batch);
      EXPECT_TRUE(torch::allclose(batched, reference, 1e-5, 1e-6)) << residual << reach;
      const auto got = gradients(model->encode(make_tree_batch(inputs, true, 0, reach)));
      ASSERT_EQ(got.size(), expected.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(torch::allclose(got[i], expected[i], 1e-4, 1e-5)) << residual << reach << i;
    }
  }
}

// The loop task's pivot: the loop of the file's last function, whatever its style.
TEST(TbcnnData, LoopPivotIsTheLoopOfTheLastFunction) {
  auto pivot_type = [](const std::string& source) -> std::string {
    const auto tree = datasets::parse_code(Language::kPython, source);
    const auto& names = datasets::node_type_names(Language::kPython);
    const int pivot = loop_pivot(tree, names);
    if (pivot < 0) return "none";
    return names[static_cast<std::size_t>(tree.type[static_cast<std::size_t>(pivot)])] + "@" +
           std::to_string(tree.start[static_cast<std::size_t>(pivot)].line + 1);
  };
  EXPECT_EQ(pivot_type("def f(xs):\n    out = []\n    for x in xs:\n        out.append(x)\n"
                       "    return out\n"),
            "for_statement@3");
  EXPECT_EQ(pivot_type("def helper(x):\n    for d in range(2, x):\n        pass\n"
                       "def f(xs):\n    return [x * 2 for x in xs]\n"),
            "list_comprehension@5");  // not the helper's loop
  EXPECT_EQ(pivot_type("def f(xs):\n    return sum(x * x for x in xs) % 10\n"), "call@2");
  EXPECT_EQ(pivot_type("import functools\ndef f(xs):\n    return functools.reduce(g, xs, 0)\n"),
            "call@3");
  EXPECT_EQ(pivot_type("def f(xs):\n    n = len(xs)\n    return list(map(g, xs))\n"), "call@3");
  EXPECT_EQ(pivot_type("def f(xs):\n    i = 0\n    while i < len(xs):\n        i += 1\n"),
            "while_statement@3");
  EXPECT_EQ(pivot_type("def f(xs):\n    return xs\n"), "none");
  EXPECT_EQ(pivot_type("x = [1, 2]\n"), "none");
}

TEST(TbcnnData, LoopPivotOfANamedFunctionIsItsLoopWhereverItIs) {
  const std::string source =
      "def helper(x):\n    for d in range(2, x):\n        pass\n"
      "def f(xs):\n    return [x * 2 for x in xs]\n"
      "def g(xs):\n    return sum(xs)\n";
  const auto tree = datasets::parse_code(Language::kPython, source);
  const auto& names = datasets::node_type_names(Language::kPython);
  auto line_of = [&](int pivot) {
    return pivot < 0 ? 0 : tree.start[static_cast<std::size_t>(pivot)].line + 1;
  };
  EXPECT_EQ(line_of(loop_pivot(tree, names, "f")), 5);
  EXPECT_EQ(line_of(loop_pivot(tree, names, "helper")), 2);
  EXPECT_EQ(line_of(loop_pivot(tree, names)), 7);  // the last function's
  EXPECT_EQ(loop_pivot(tree, names, "xs"), -1);    // no function of that name
}

TEST(TreeBatch, PivotNeighbourhoodOfTheWorkedExample) {
  const auto tree = tree_from_parents(kFiveNodes);  // 0 -> {1, 2}, 1 -> {3, 4}
  EXPECT_EQ(pivot_neighbourhood(tree, 3, 0), (std::vector<int>{3}));
  EXPECT_EQ(pivot_neighbourhood(tree, 3, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(pivot_neighbourhood(tree, 3, 2), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(pivot_neighbourhood(tree, 3, 3), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_THROW(make_tree_batch({{&tree, 3}}, /*localized=*/false, 0, 2), std::invalid_argument);
}

TEST(TbcnnModel, NeighbourhoodBatchGivesThePivotVectorOfTheWholeTree) {
  // A 37-node tree: a spine of 10 nodes, three leaves under each spine node but the root.
  std::vector<int> parents{-1}, spine{0};
  for (int s = 1; s < 10; ++s) {
    parents.push_back(spine.back());
    spine.push_back(static_cast<int>(parents.size()) - 1);
    for (int leaf = 0; leaf < 3; ++leaf) parents.push_back(spine.back());
  }
  auto tree = tree_from_parents(parents);
  for (int i = 0; i < tree.size(); ++i) tree.type[i] = (i * 7) % 4;
  for (const bool residual : {false, true}) {
    auto config = small_config("localized");
    config.layers = 3;
    config.residual = residual;
    torch::manual_seed(11);
    TbcnnModel model(config);
    std::vector<TreeInput> inputs;
    for (int s : {spine[1], spine[5], spine[9]}) inputs.push_back({&tree, s});
    const auto whole = make_tree_batch(inputs, true, 0);
    const auto cut = make_tree_batch(inputs, true, 0, config.layers);
    EXPECT_LT(cut.types.size(0), whole.types.size(0) / 2) << "the cut batch has fewer nodes";
    EXPECT_TRUE(torch::allclose(model->encode(cut), model->encode(whole), 1e-5, 1e-6)) << residual;
    // One edge less and the pivots miss what the third layer brings from three edges away.
    const auto too_small = make_tree_batch(inputs, true, 0, config.layers - 1);
    EXPECT_FALSE(torch::allclose(model->encode(too_small), model->encode(whole), 1e-5, 1e-6));
  }
}

TEST(TbcnnModel, GradientMatchesFiniteDifferences) {
  torch::manual_seed(5);
  TbcnnModel model(small_config("tbcnn"));
  const auto trees = sample_trees();
  std::vector<TreeInput> inputs;
  for (const auto& t : trees) inputs.push_back({&t, -1});
  const auto batch = make_tree_batch(inputs, false, 0);
  const auto target = torch::tensor(std::vector<int64_t>{0, 2, 1});
  auto loss = [&] { return torch::nn::functional::cross_entropy(model->forward(batch), target); };
  model->zero_grad();
  loss().backward();
  auto params = model->named_parameters();
  for (const char* name : {"conv0_left.weight", "conv1_right.weight", "types.weight"}) {
    auto p = params[name];
    const auto analytic = p.grad().flatten()[3].item<double>();
    torch::NoGradGuard no_grad;
    const float h = 1e-2f;
    const float old = p.flatten()[3].item<float>();
    p.flatten()[3] = old + h;
    const double up = loss().item<double>();
    p.flatten()[3] = old - h;
    const double down = loss().item<double>();
    p.flatten()[3] = old;
    EXPECT_NEAR(analytic, (up - down) / (2 * h), 2e-3) << name;
  }
}

TEST(TbcnnConfig, InconsistentCheckpointConfigurationsAreFormatErrors) {
  const std::string good = small_config("tbcnn").to_json();
  EXPECT_NO_THROW(TbcnnConfig::from_json(good));
  auto with = [&](const std::string& key, const std::string& value) {
    auto j = nlohmann::json::parse(good);
    j[key] = nlohmann::json::parse(value);
    return j.dump();
  };
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"layers", "100000000"},
                                                        {"channels", "0"},
                                                        {"model", "\"rnn\""},
                                                        {"task", "\"guess\""},
                                                        {"activation", "\"gelu\""},
                                                        {"language", "\"rust\""},
                                                        {"buckets", "-1"}}) {
    EXPECT_THROW(TbcnnConfig::from_json(with(key, value)), FormatError) << key;
  }
  EXPECT_THROW(TbcnnConfig::from_json(with("task", "\"masked\"")), FormatError)
      << "a masked-task vocabulary ends with <mask>";
  EXPECT_THROW(TbcnnConfig::from_json("{"), FormatError);
}

TEST(TbcnnModel, BagOfTypesIsTypeFrequencies) {
  TbcnnModel model(small_config("bow"));
  const auto tree = tree_from_parents({-1, 0, 0, 0});
  CodeTree typed = tree;
  typed.type = {1, 1, 3, 1};
  const auto v = model->encode(make_tree_batch({{&typed, -1}}, false, 0));
  EXPECT_TRUE(torch::allclose(v, torch::tensor({{0.0f, 0.75f, 0.0f, 0.25f}})));
}

// --- corpora -------------------------------------------------------------------------------------

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(CodeCorpus, SplitIsDeterministicAndAboutSixtyTwentyTwenty) {
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 3000; ++i)
    ++counts[static_cast<int>(datasets::split_of("f" + std::to_string(i) + ".py"))];
  EXPECT_NEAR(counts[0] / 3000.0, 0.6, 0.04);
  EXPECT_NEAR(counts[1] / 3000.0, 0.2, 0.04);
  EXPECT_NEAR(counts[2] / 3000.0, 0.2, 0.04);
  EXPECT_EQ(datasets::split_of("a/b.py"), datasets::split_of("a/b.py"));
}

TEST(CodeCorpus, BuildCountsErrorsSkipsBinaryAndLargeTreesAndRoundTrips) {
  TempDir dir;
  const std::filesystem::path src = dir.file("src");
  write(src / "alpha" / "one.py", "def f(x):\n    return x + 1\n");
  write(src / "alpha" / "broken.py", "def f(:\n    return )\n");
  write(src / "alpha" / "blob.py", std::string("\x7f"
                                               "ELF\0\0",
                                               6));
  write(src / "beta" / "two.py", "class A:\n    pass\n");
  write(
      src / "beta" / "big.py", "x = [" + std::string(400, '1').replace(1, 0, "") + "]\n" + [] {
        std::string s = "y = [";
        for (int i = 0; i < 300; ++i) s += "1, ";
        return s + "1]\n";
      }());
  write(src / "beta" / "notes.md", "not python");
  datasets::CorpusOptions options;
  options.src_dir = src.string();
  options.max_nodes = 200;
  auto corpus = datasets::build_corpus(options);
  EXPECT_EQ(corpus.classes, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(corpus.report.files, 5);
  EXPECT_EQ(corpus.report.kept, 3);
  EXPECT_EQ(corpus.report.with_errors, 1);
  EXPECT_EQ(corpus.report.skipped_not_text, 1);
  EXPECT_EQ(corpus.report.skipped_too_large, 1);
  EXPECT_EQ(corpus.report.warnings.size(), 2u);

  datasets::write_corpus(dir.file("c.corpus"), corpus);
  const auto back = datasets::read_corpus(dir.file("c.corpus"));
  ASSERT_EQ(back.samples.size(), corpus.samples.size());
  for (std::size_t i = 0; i < back.samples.size(); ++i) {
    EXPECT_EQ(back.samples[i].tree.type, corpus.samples[i].tree.type);
    EXPECT_EQ(back.samples[i].tree.child_list, corpus.samples[i].tree.child_list);
    EXPECT_EQ(back.samples[i].tree.identifier, corpus.samples[i].tree.identifier);
    EXPECT_EQ(back.samples[i].split, corpus.samples[i].split);
  }
  options.skip_errors = true;
  EXPECT_EQ(datasets::build_corpus(options).report.skipped_errors, 1);

  // Truncated and corrupt files are format errors.
  std::string text = testing::read_file(dir.file("c.corpus"));
  write(dir.file("t.corpus"), text.substr(0, text.rfind('\n', text.size() - 2) + 1));
  EXPECT_THROW(datasets::read_corpus(dir.file("t.corpus")), FormatError);
  write(dir.file("j.corpus"), "{\"format\":\"nope\"}\n");
  EXPECT_THROW(datasets::read_corpus(dir.file("j.corpus")), FormatError);
  // Numbers that are not integers in range, identifier keys that are not node indices.
  const auto header = text.substr(0, text.find('\n') + 1);
  auto line = nlohmann::json::parse(
      text.substr(header.size(), text.find('\n', header.size()) - header.size()));
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"label", "1e300"},
                                                        {"label", "4294967296"},
                                                        {"ident", "{\"x\": \"a\"}"},
                                                        {"ident", "{\"3abc\": \"a\"}"},
                                                        {"type", "[1.5]"},
                                                        {"parent", "[-1, 7]"}}) {
    auto bad = line;
    bad[key] = nlohmann::json::parse(value);
    auto h = nlohmann::json::parse(header);
    h["count"] = 1;
    write(dir.file("n.corpus"), h.dump() + "\n" + bad.dump() + "\n");
    EXPECT_THROW(datasets::read_corpus(dir.file("n.corpus")), FormatError) << key << "=" << value;
  }
  EXPECT_THROW(datasets::read_corpus(dir.file("missing.corpus")), std::runtime_error);
}

TEST(CodeCorpus, ClearErrorsForBadSourceFolders) {
  TempDir dir;
  datasets::CorpusOptions options;
  options.src_dir = dir.file("nowhere");
  EXPECT_THROW(datasets::build_corpus(options), InputError);
  options.src_dir = dir.path();
  EXPECT_THROW(datasets::build_corpus(options), InputError) << "no class folders";
  write(std::filesystem::path(dir.path()) / "full" / "a.py", "x = 1\n");
  std::filesystem::create_directories(std::filesystem::path(dir.path()) / "empty");
  try {
    datasets::build_corpus(options);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
}

/// Options to train a small model on a corpus of `files` files per class, file i of a class being
/// `body(i)`, written under `dir`.
TrainTbcnnOptions tiny_training(const TempDir& dir,
                                const std::map<std::string, std::string (*)(int)>& classes,
                                int files) {
  const std::filesystem::path src = dir.file("src");
  for (const auto& [name, body] : classes) {
    for (int i = 0; i < files; ++i) write(src / name / ("f" + std::to_string(i) + ".py"), body(i));
  }
  datasets::CorpusOptions co;
  co.src_dir = src.string();
  datasets::write_corpus(dir.file("c.corpus"), datasets::build_corpus(co));
  TrainTbcnnOptions t;
  t.corpus_path = dir.file("c.corpus");
  t.training.batch = 4;
  t.channels = 8;
  t.embedding = 4;
  return t;
}

std::string returns_sum(int i) { return "def f(x):\n    return x + " + std::to_string(i) + "\n"; }
std::string prints_range(int) { return "for i in range(3):\n    print(i)\n"; }
std::string prints_range_of(int i) {
  return "for i in range(" + std::to_string(i) + "):\n    print(i)\n";
}
std::string nested_loop(int i) {
  return "def h(x):\n    for y in x:\n        print(y + " + std::to_string(i) + ")\n";
}

TEST(TrainTbcnn, ReluCompressionIsLosslessAndRecomputeIsAUsageError) {
  TempDir dir;
  TrainTbcnnOptions t = tiny_training(dir, {{"a", returns_sum}, {"b", prints_range}}, 6);
  t.training.steps = 3;
  t.out_path = dir.file("plain.pt");
  EXPECT_EQ(train_tbcnn(t).compressed_tensors, 0);
  t.training.memory.techniques = {"relu"};
  t.out_path = dir.file("relu.pt");
  EXPECT_GT(train_tbcnn(t).compressed_tensors, 0) << "the convolutions' ReLU outputs";
  EXPECT_EQ(testing::read_file(dir.file("plain.pt")), testing::read_file(dir.file("relu.pt")))
      << "the same model bytes";
  t.training.memory.techniques = {"recompute"};
  EXPECT_THROW(train_tbcnn(t), UsageError);
}

TEST(TrainTbcnn, ValidEveryWritesTheModelOfTheBestValidStep) {
  TempDir dir;
  TrainTbcnnOptions t =
      tiny_training(dir, {{"a", returns_sum}, {"b", prints_range_of}, {"c", nested_loop}}, 10);
  t.training.steps = 40;
  t.training.learning_rate = 0.05;
  t.valid_every = 5;  // not a multiple of the trainer's log interval (10)
  t.out_path = dir.file("selected.pt");
  t.training.metrics_path = dir.file("metrics.jsonl");
  const TrainTbcnnReport r = train_tbcnn(t);

  std::vector<long> steps;
  for (const auto& [step, accuracy] : r.valid_curve) steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<long>{5, 10, 15, 20, 25, 30, 35, 40}));
  auto best = r.valid_curve.front();
  for (const auto& point : r.valid_curve)
    if (point.second > best.second) best = point;  // the earliest of equal scores
  EXPECT_EQ(r.best_step, best.first);
  EXPECT_EQ(r.best_valid_accuracy, best.second);
  // The metrics lines carry the same scores.
  std::map<long, double> logged;
  for (const auto& line : testing::split_lines(testing::read_file(t.training.metrics_path))) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("valid_accuracy")) logged[j.at("step").get<long>()] = j.at("valid_accuracy");
  }
  EXPECT_EQ(logged, (std::map<long, double>(r.valid_curve.begin(), r.valid_curve.end())));

  // The written model is the one of the best step: the same bytes as a run stopped there, and
  // scoring it on the valid split gives the recorded accuracy.
  TrainTbcnnOptions stopped = t;
  stopped.valid_every = 0;
  stopped.training.metrics_path.clear();
  stopped.training.steps = r.best_step;
  stopped.out_path = dir.file("stopped.pt");
  train_tbcnn(stopped);
  EXPECT_TRUE(testing::read_file(dir.file("selected.pt")) ==
              testing::read_file(dir.file("stopped.pt")))
      << "the written model differs from one trained for " << r.best_step << " steps";
  EvalTbcnnOptions e;
  e.model_path = t.out_path;
  e.corpus_path = t.corpus_path;
  e.split = "valid";
  EXPECT_EQ(evaluate_tbcnn(e).accuracy, r.best_valid_accuracy);

  t.valid_every = -1;
  EXPECT_THROW(train_tbcnn(t), UsageError);
  // The best model so far is not part of a training checkpoint: selecting and checkpointing (or
  // resuming) is refused before any training.
  t.valid_every = 5;
  t.training.checkpoint_every = 10;
  EXPECT_THROW(train_tbcnn(t), UsageError);
  t.training.checkpoint_every = 0;
  t.training.resume = true;
  EXPECT_THROW(train_tbcnn(t), UsageError);
}

TEST(EvalTbcnn, VectorsFileHoldsEveryExampleWithTheScoredPredictions) {
  TempDir dir;
  TrainTbcnnOptions t =
      tiny_training(dir, {{"a", returns_sum}, {"b", prints_range_of}, {"c", nested_loop}}, 10);
  t.training.steps = 20;
  t.training.learning_rate = 0.05;
  t.out_path = dir.file("m.pt");
  train_tbcnn(t);
  EvalTbcnnOptions e;
  e.model_path = t.out_path;
  e.corpus_path = t.corpus_path;
  e.split = "train";
  e.vectors_path = dir.file("vectors.json");
  const EvalTbcnnReport r = evaluate_tbcnn(e);
  const auto j = nlohmann::json::parse(testing::read_file(e.vectors_path));
  EXPECT_EQ(j.at("classes"), (nlohmann::json{"a", "b", "c"}));
  EXPECT_EQ(j.at("dim").get<int>(), t.channels);
  const auto& examples = j.at("examples");
  ASSERT_EQ(static_cast<long>(examples.size()), r.count);
  long correct = 0;
  std::set<int> labels;
  for (const auto& ex : examples) {
    ASSERT_EQ(ex.at("vector").size(), static_cast<std::size_t>(t.channels));
    correct += ex.at("label") == ex.at("predicted") ? 1 : 0;
    labels.insert(ex.at("label").get<int>());
  }
  EXPECT_EQ(labels, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(static_cast<double>(correct) / static_cast<double>(r.count), r.accuracy);
  // Without the file the report is the same.
  e.vectors_path.clear();
  EXPECT_EQ(evaluate_tbcnn(e).accuracy, r.accuracy);
  // An unwritable path fails before any work, leaving nothing behind.
  e.vectors_path = dir.file("missing/vectors.json");
  EXPECT_ANY_THROW(evaluate_tbcnn(e));
  EXPECT_FALSE(std::filesystem::exists(dir.file("missing")));
}

TEST(Stdlib, FunctionsOfPackagesWithEnoughFilesDedentedAndWithoutTests) {
  TempDir dir;
  const std::filesystem::path lib = dir.file("lib");
  for (const char* pkg : {"big", "small"}) {
    write(lib / pkg / "__init__.py", "");
    write(lib / pkg / "a.py",
          "def one():\n    return 1\n\nclass K:\n    def two(self):\n"
          "        if self:\n            return 2\n");
    write(lib / pkg / "b.py",
          "def three(x):\n    def inner():\n        return x\n    return inner\n");
  }
  write(lib / "big" / "c.py", "def four():\n    pass\n");
  write(lib / "big" / "test" / "test_a.py", "def test_one():\n    assert True\n");
  write(lib / "toplevel.py", "def alone():\n    pass\n");
  datasets::StdlibOptions o;
  o.lib_dir = lib.string();
  o.out_dir = dir.file("out") + "/";  // a trailing separator names the same folder
  o.min_files = 4;                    // big has __init__, a, b, c; small has 3 files
  o.min_functions = 5;
  const auto report = datasets::write_stdlib_functions(o);
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_EQ(report.classes[0], std::make_pair(std::string("big"), 5L))
      << "one, two, three, inner, four; not test_one";
  EXPECT_EQ(report.too_small, (std::vector<std::string>{"small"}));
  // Every written function parses without errors once dedented.
  datasets::CorpusOptions co;
  co.src_dir = o.out_dir;
  const auto corpus = datasets::build_corpus(co);
  EXPECT_EQ(corpus.report.kept, 5);
  EXPECT_EQ(corpus.report.with_errors, 0);
  EXPECT_TRUE(
      std::filesystem::exists(std::filesystem::path(o.out_dir) / "big" / "big.a__two_L5.py"));
  EXPECT_THROW(datasets::write_stdlib_functions(o), InputError) << "out exists";
  o.lib_dir = dir.file("nolib");
  o.out_dir = dir.file("out2");
  EXPECT_THROW(datasets::write_stdlib_functions(o), InputError);

  // --modules: the same class, its modules whole (the package's test folder still left out).
  o.lib_dir = lib.string();
  o.out_dir = dir.file("modules");
  o.modules = true;
  const auto modules = datasets::write_stdlib_functions(o);
  ASSERT_EQ(modules.classes.size(), 1u);
  EXPECT_EQ(modules.classes[0], std::make_pair(std::string("big"), 4L)) << "__init__, a, b, c";
  EXPECT_EQ(modules.modules, 4);
  EXPECT_EQ(modules.functions, 5);
  EXPECT_EQ(testing::read_file(dir.file("modules") + "/big/big.a.py"),
            testing::read_file((lib / "big" / "a.py").string()));
  EXPECT_FALSE(std::filesystem::exists(dir.file("modules") + "/small"));
}

TEST(StdlibCorpus, SourcesThatGiveOneNameAreAllWritten) {
  // Module m's g__h and module m__g's h are both pk.m__g__h_L1; pk/sub/q.py and pk/sub.q.py are
  // both module pk.sub.q. One overwrote the other while the counts said both were written.
  testing::TempDir dir;
  const std::filesystem::path lib = dir.file("lib");
  std::filesystem::create_directories(lib / "pk" / "sub");
  testing::write_file((lib / "pk" / "__init__.py").string(), "");
  testing::write_file((lib / "pk" / "m.py").string(), "def g__h(x):\n    return x\n");
  testing::write_file((lib / "pk" / "m__g.py").string(), "def h(x):\n    return x + 1\n");
  testing::write_file((lib / "pk" / "sub" / "q.py").string(), "def f(x):\n    return 1\n");
  testing::write_file((lib / "pk" / "sub.q.py").string(), "def f(x):\n    return 2\n");
  datasets::StdlibOptions o;
  o.lib_dir = lib.string();
  o.out_dir = dir.file("out");
  o.min_files = 1;
  o.min_functions = 1;
  const auto report = datasets::write_stdlib_functions(o);
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_EQ(report.classes[0].second, 4);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("out") + "/pk")) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 4u);
  // Its folder is checked before the library is read: a file in the way is named.
  testing::write_file(dir.file("f.py"), "");
  o.out_dir = dir.file("f.py") + "/sub";
  ENGRAM_EXPECT_THROW_WITH(datasets::write_stdlib_functions(o), std::runtime_error,
                           "is not a folder");
}

}  // namespace
}  // namespace engram::tbcnn
