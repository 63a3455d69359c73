#include "primitives/PrimitiveNet.h"
#include "primitives/PrimitiveWorkload.h"
#include "primitives/Primitives.h"

#include "datasets/ListTask.h"
#include "tests/support/DeviceRuns.h"
#include "tests/support/TempDir.h"
#include "tests/support/Thrown.h"
#include "trainer/Checkpoint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace engram::primitives {
namespace {

using testing::expect_says;
using testing::message_of;
using testing::TempDir;

TEST(PrimitiveExamples, EnumerateTheWholeDomainWithExactTargets) {
  const auto unary = all_examples(PrimitiveNetConfig::for_family("square", 10));
  EXPECT_EQ(unary.inputs.sizes(), (std::vector<int64_t>{10, 1}));
  EXPECT_EQ(unary.targets[7].item<int64_t>(), 9);
  const auto binary = all_examples(PrimitiveNetConfig::for_family("mul", 100));
  EXPECT_EQ(binary.inputs.sizes(), (std::vector<int64_t>{10000, 2}));
  const long row = 12 * 100 + 34;
  EXPECT_EQ(binary.inputs[row][0].item<int64_t>(), 12);
  EXPECT_EQ(binary.inputs[row][1].item<int64_t>(), 34);
  EXPECT_EQ(binary.targets[row].item<int64_t>(), 8);
  // div(c) for c in 1..9: the parameter is an input; c = 0 is not part of the domain.
  const auto div = all_examples(PrimitiveNetConfig::for_family("div", 10));
  EXPECT_EQ(div.inputs.sizes(), (std::vector<int64_t>{90, 2}));
  EXPECT_EQ(div.inputs.select(1, 1).min().item<int64_t>(), 1);
  EXPECT_EQ(PrimitiveNetConfig::for_family("gt", 10).num_outputs(), 2);
}

TEST(PrimitiveNet, MapsEveryInputToLogitsOverItsResults) {
  torch::manual_seed(0);
  PrimitiveNet net(PrimitiveNetConfig::for_family("gt", 10));
  const auto examples = all_examples(net->config());
  EXPECT_EQ(net->forward(examples.inputs).sizes(), (std::vector<int64_t>{100, 2}));
  auto params = net->named_parameters();
  EXPECT_NE(params.find("input1.weight"), nullptr) << "the parameter has its own embedding";
}

// On a GPU: a few SGD steps of a primitive's network land where the CPU's land.
TEST(PrimitiveNet, OnCudaAFewStepsMatchTheCpu) {
  ENGRAM_SKIP_WITHOUT_CUDA();
  const auto config = PrimitiveNetConfig::for_family("mul", 10);
  const Examples examples = all_examples(config);
  trainer::TrainingOptions options;
  options.optimizer = "sgd";
  options.learning_rate = 0.1;
  std::vector<std::size_t> batch;
  for (std::size_t i = 0; i < 100; i += 7) batch.push_back(i);
  auto run = [&](const std::string& device) {
    torch::manual_seed(0);
    PrimitiveWorkload workload(PrimitiveNet(config), examples);
    return testing::run_on(workload, options, device, batch, 3);
  };
  const auto cpu = run("cpu");
  const auto gpu = run("cuda");
  const auto [loss, parameter] = testing::largest_differences(cpu, gpu, "primitive mul");
  EXPECT_LT(loss, 1e-4);
  EXPECT_LT(parameter, 1e-4);
}

class PrimitiveLibraryTest : public ::testing::Test {
 protected:
  TrainPrimitivesOptions options(const std::vector<std::string>& families) {
    TrainPrimitivesOptions o;
    o.out_path = dir_.file("p.pt");
    o.families = families;
    o.hidden = 64;
    o.embedding = 16;
    o.training.steps = 3000;
    return o;
  }
  TempDir dir_;
};

TEST_F(PrimitiveLibraryTest, TrainsUntilExactAndTheLearnedPrimitiveAgreesWithTheSymbolicOne) {
  const auto reports = train_primitives(options({"add", "prime", "gt"}));
  ASSERT_EQ(reports.size(), 3u);
  for (const auto& r : reports) {
    EXPECT_TRUE(r.exact) << r.family << ": " << r.correct << "/" << r.examples;
    EXPECT_LT(r.steps, 3000) << r.family << " stops as soon as it is exact";
  }
  const auto library = PrimitiveLibrary::load(dir_.file("p.pt"));
  EXPECT_EQ(library.domain(), 10);
  EXPECT_EQ(library.families(), (std::vector<std::string>{"add", "gt", "prime"}));
  const auto gt3 = library.get(datasets::parse_primitive("gt(3)"));
  EXPECT_EQ(gt3->implementation(), "neural");
  EXPECT_EQ(gt3->kind(), datasets::PrimitiveKind::kPredicate);
  const auto add = library.get(datasets::parse_primitive("add"));
  for (int x = 0; x < 10; ++x) {
    EXPECT_EQ(gt3->apply(x), x > 3 ? 1 : 0) << x;
    for (int y = 0; y < 10; ++y) EXPECT_EQ(add->apply(x, y), (x + y) % 10);
  }
  const auto scores = evaluate_primitives(dir_.file("p.pt"));
  ASSERT_EQ(scores.size(), 3u);
  for (const auto& s : scores) EXPECT_EQ(s.accuracy, 1.0) << s.family;
}

TEST_F(PrimitiveLibraryTest, AddTrainsOneNetworkAndLeavesTheOthersAsTheyWere) {
  train_primitives(options({"double", "max"}));
  const auto before = trainer::load_checkpoint(dir_.file("p.pt"), "primitives");
  auto add = options({"div"});
  add.add = true;
  train_primitives(add);
  const auto after = trainer::load_checkpoint(dir_.file("p.pt"), "primitives");
  std::size_t compared = 0;
  for (const auto& [name, tensor] : before.tensors) {
    for (const auto& [name2, tensor2] : after.tensors) {
      if (name == name2) {
        EXPECT_TRUE(torch::equal(tensor, tensor2)) << name;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, before.tensors.size());
  EXPECT_GT(after.tensors.size(), before.tensors.size());
  const auto library = PrimitiveLibrary::load(dir_.file("p.pt"));
  const auto div3 = library.get(datasets::parse_primitive("div(3)"));
  for (int x = 0; x < 10; ++x) EXPECT_EQ(div3->apply(x), x % 3 == 0 ? 1 : 0) << x;
}

TEST_F(PrimitiveLibraryTest, ClearErrorsForBadOptionsAndFiles) {
  expect_says(message_of<UsageError>([&] { train_primitives(options({"triple"})); }),
              "unknown primitive 'triple' (known: succ,");
  auto bad_k = options({"add"});
  bad_k.k = 1;
  expect_says(message_of<UsageError>([&] { train_primitives(bad_k); }), "k must lie in 2..1000");
  // A state written on SIGINT would name a --resume this command refuses.
  auto with_checkpoint = options({"add"});
  with_checkpoint.training.checkpoint_path = dir_.file("p.ckpt");
  expect_says(message_of<UsageError>([&] { train_primitives(with_checkpoint); }),
              "checkpoint_path is for one model's training (npi, tbcnn)");
  auto add_missing = options({"div"});
  add_missing.add = true;
  expect_says(message_of<UsageError>([&] { train_primitives(add_missing); }),
              "add finds no primitive library at '" + dir_.file("p.pt") + "'");

  train_primitives(options({"succ", "gt"}));
  auto other_k = options({"div"});
  other_k.add = true;
  other_k.k = 100;
  expect_says(message_of<UsageError>([&] { train_primitives(other_k); }),
              "it holds primitives for K = 10, not 100");
  const auto library = PrimitiveLibrary::load(dir_.file("p.pt"));
  expect_says(message_of<UsageError>([&] { library.get(datasets::parse_primitive("even")); }),
              "--add --primitive even");
  // A constant outside the library's domain, of a family it has.
  expect_says(message_of<UsageError>([&] { library.get(datasets::parse_primitive("gt(12)")); }),
              "primitive 'gt(12)': the parameter must lie in 0..9 for K = 10");

  std::ofstream(dir_.file("junk.pt")) << "not a checkpoint";
  expect_says(message_of<FormatError>([&] { PrimitiveLibrary::load(dir_.file("junk.pt")); }),
              "'" + dir_.file("junk.pt") + "' is not an engram checkpoint");
  expect_says(
      message_of<std::runtime_error>([&] { PrimitiveLibrary::load(dir_.file("missing.pt")); }),
      "model file '" + dir_.file("missing.pt") + "' not found");
  trainer::save_checkpoint(dir_.file("npi.pt"), trainer::Checkpoint{"npi", "{}", {}});
  expect_says(message_of<FormatError>([&] { PrimitiveLibrary::load(dir_.file("npi.pt")); }),
              "holds a 'npi' model, expected 'primitives'");
}

// One metrics file for the library: every family's lines, in the order trained, each naming
// its family (each family's session used to truncate the file, leaving only the last's).
TEST_F(PrimitiveLibraryTest, TheMetricsFileKeepsEveryFamilysLinesInTurn) {
  auto o = options({"succ", "gt"});
  o.training.metrics_path = dir_.file("m.jsonl");
  o.training.log_every = 10;
  std::ofstream(o.training.metrics_path) << "an old line\n";
  const auto reports = train_primitives(o);
  ASSERT_EQ(reports.size(), 2u);
  std::ifstream in(o.training.metrics_path);
  std::vector<std::string> families;
  std::map<std::string, long> last_step;
  for (std::string line; std::getline(in, line);) {
    const auto entry = nlohmann::json::parse(line);  // the old line is gone: it is not JSON
    const std::string family = entry.at("family");
    if (families.empty() || families.back() != family) families.push_back(family);
    const long step = entry.at("step");
    EXPECT_GT(step, last_step[family]) << family << "'s steps count from its own start";
    last_step[family] = step;
  }
  EXPECT_EQ(families, (std::vector<std::string>{"succ", "gt"}));
  EXPECT_EQ(last_step["succ"], reports[0].steps);
  EXPECT_EQ(last_step["gt"], reports[1].steps);
}

TEST_F(PrimitiveLibraryTest, ANeuralPrimitiveDrivesTheListEnvironment) {
  train_primitives(options({"square"}));
  const auto library = PrimitiveLibrary::load(dir_.file("p.pt"));
  datasets::Binding binding;
  binding.primitive = library.get(datasets::parse_primitive("square"));
  const auto task = datasets::bind_task("map", binding);
  const auto trace = task->teach("2,3");
  auto env = task->make_environment("2,3");
  using T = datasets::HigherOrderTask;
  for (int i = 0; i < 2; ++i) {
    env->act(T::kApply, {T::kX, T::kNone, 0});
    env->act(T::kWrite, {T::kOut, T::kReg, 0});
    env->act(T::kMove, {T::kX, 0, 0});
  }
  EXPECT_EQ(env->result(), "4,9");
  EXPECT_EQ(trace.output, "4,9");
}

}  // namespace
}  // namespace engram::primitives
