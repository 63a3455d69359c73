// The real `engram` binary as a subprocess: exit codes and what reaches stdout and stderr.
#include "tests/support/RunProgram.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace engram {
namespace {

using testing::ProgramResult;
using testing::read_file;
using testing::TempDir;

class EngramBinaryTest : public ::testing::Test {
 protected:
  /// Runs the binary with `args`, stdout and stderr to files.
  ProgramResult run(const std::vector<std::string>& args) {
    std::vector<std::string> argv{ENGRAM_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::run_program(argv, dir_);
  }
  void expect_one_error_line(const ProgramResult& p, int code) {
    EXPECT_EQ(p.code, code) << p.err;
    EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << "stderr: " << p.err;
    EXPECT_EQ(p.err.rfind("engram: error: ", 0), 0u) << p.err;
    EXPECT_EQ(p.out, "");
  }
  /// Addition traces up to length 4, four per length, in the test's folder.
  std::string short_additions() {
    const std::string data = dir_.file("d.jsonl");
    const ProgramResult p = run({"data", "gen", "--task", "addition", "--out", data, "--max-len",
                                 "4", "--per-length", "4"});
    EXPECT_EQ(p.code, 0) << p.err;
    return data;
  }
  /// 40 steps of a hidden-32 NPI on `data`, batch 16, into `model` in the test's folder.
  ProgramResult train_small_addition(const std::string& data, const std::string& model,
                                     const std::vector<std::string>& extra) {
    std::vector<std::string> args{"train",    "npi",   "--task",         "addition", "--data",
                                  data,       "--out", dir_.file(model), "--steps",  "40",
                                  "--hidden", "32",    "--batch",        "16"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }

  TempDir dir_;
};

TEST_F(EngramBinaryTest, HelpSucceedsOnStdout) {
  const ProgramResult p = run({"help"});
  EXPECT_EQ(p.code, 0);
  EXPECT_NE(p.out.find("train"), std::string::npos) << p.out;
  EXPECT_EQ(p.err, "");
}

TEST_F(EngramBinaryTest, ErrorsAreOneLineOnStderrWithTheirExitCode) {
  expect_one_error_line(run({"--bogus"}), 2);
  expect_one_error_line(
      run({"run", "--model", dir_.file("m.pt"), "--task", "addition", "--input", "12+"}), 2);
  expect_one_error_line(
      run({"run", "--model", dir_.file("m.pt"), "--task", "addition", "--input", "1+2"}), 1);
}

// The library names the invalid field (learning_rate); the binary names the flag that fills it.
TEST_F(EngramBinaryTest, AnInvalidOptionNamesItsFlag) {
  const ProgramResult p = run({"train", "npi", "--task", "addition", "--data", dir_.file("d.jsonl"),
                               "--out", dir_.file("m.pt"), "--lr", "-1"});
  expect_one_error_line(p, 2);
  EXPECT_EQ(p.err, "engram: error: --lr must be a positive number\n");
}

// --device cuda on a machine that shows this process no GPU: every command that computes says so
// as a usage error naming the flag, before any work (no model, no demo folder written). Skipped
// where a GPU is visible.
TEST_F(EngramBinaryTest, CudaWithoutAGpuIsAUsageErrorBeforeAnyWork) {
  if (std::filesystem::exists("/dev/nvidiactl"))
    GTEST_SKIP() << "this machine has an NVIDIA driver: a GPU may be visible";
  const std::string data = dir_.file("d.jsonl");
  ASSERT_EQ(run({"data", "gen", "--task", "addition", "--out", data, "--traces", "8"}).code, 0);
  const std::string model = dir_.file("m.pt");
  const std::vector<std::vector<std::string>> commands{
      {"train", "npi", "--task", "addition", "--data", data, "--out", model, "--device", "cuda"},
      {"eval", "npi", "--model", model, "--task", "addition", "--length", "3", "--device",
       "cuda:1"},
      {"run", "--model", model, "--task", "addition", "--input", "1+2", "--device", "cuda"},
      {"demo", "--dir", dir_.file("demo"), "--device", "cuda"},
      {"bench", "memory", "--workload", "resnet", "--json", dir_.file("b.json"), "--device",
       "cuda"},
      {"bench", "npi", "--json", dir_.file("b.json"), "--device", "cuda"},
      {"bench", "dp", "--json", dir_.file("b.json"), "--device", "cuda"},
      {"bench", "streams", "--json", dir_.file("b.json")},
      {"bench", "tbcnn", "--json", dir_.file("b.json"), "--corpus", dir_.file("c.corpus"),
       "--device", "cuda"},
      {"eval", "primitives", "--model", dir_.file("p.pt"), "--device", "cuda"}};
  for (const auto& args : commands) {
    const ProgramResult p = run(args);
    expect_one_error_line(p, 2);
    EXPECT_EQ(p.err.rfind("engram: error: --device is cuda", 0), 0u) << p.err;
    EXPECT_NE(p.err.find("no CUDA device is visible"), std::string::npos) << p.err;
  }
  EXPECT_FALSE(std::filesystem::exists(model));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("demo")));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("b.json")));
  const ProgramResult bad = run({"train", "npi", "--task", "addition", "--data", data, "--out",
                                 model, "--device", "gpu"});
  expect_one_error_line(bad, 2);
  EXPECT_EQ(bad.err.rfind("engram: error: --device must be cpu, cuda or cuda:N", 0), 0u) << bad.err;
}

TEST_F(EngramBinaryTest, DataGenTracesInAllExcludesPerLengthAndMustBePositive) {
  const std::string data = dir_.file("d.jsonl");
  const ProgramResult both = run(
      {"data", "gen", "--task", "addition", "--out", data, "--traces", "7", "--per-length", "2"});
  expect_one_error_line(both, 2);
  const ProgramResult zero =
      run({"data", "gen", "--task", "addition", "--out", data, "--traces", "0"});
  expect_one_error_line(zero, 2);
  EXPECT_EQ(zero.err, "engram: error: --traces must be at least 1\n");
  EXPECT_FALSE(std::filesystem::exists(data));
  const ProgramResult ok =
      run({"data", "gen", "--task", "sort-recursive", "--out", data, "--traces", "20"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("wrote 20 sort-recursive traces (lengths 2..20)"), std::string::npos)
      << ok.out;
}

// Fixed-structure reuse moves where the step's bytes live, nothing else: the model file is the
// same byte for byte, and the metrics say the arena served most allocations.
TEST_F(EngramBinaryTest, TrainingWithReuseWritesTheSameModelBytes) {
  const std::string data = short_additions();
  for (const std::string memory : {"none", "reuse"}) {
    const ProgramResult p = train_small_addition(
        data, memory + ".pt", {"--memory", memory, "--metrics", dir_.file(memory + ".jsonl")});
    ASSERT_EQ(p.code, 0) << p.err;
  }
  EXPECT_EQ(read_file(dir_.file("none.pt")), read_file(dir_.file("reuse.pt")));
  const auto lines = testing::split_lines(read_file(dir_.file("reuse.jsonl")));
  ASSERT_FALSE(lines.empty());
  const auto last = nlohmann::json::parse(lines.back());
  EXPECT_GT(last.at("reuse_hit_rate").get<double>(), 0.5) << lines.back();
}

TEST_F(EngramBinaryTest, WeightGradientsOnASecondThreadWriteTheSameModelBytes) {
  // --ooo-threads 2 runs the weight gradients on a worker thread while the input-gradient chain
  // goes on: the same tasks in the same order, so the same model file byte for byte.
  const std::string data = short_additions();
  for (const std::string threads : {"1", "2"}) {
    const ProgramResult p =
        train_small_addition(data, "ooo" + threads + ".pt", {"--ooo-threads", threads});
    ASSERT_EQ(p.code, 0) << p.err;
  }
  EXPECT_EQ(read_file(dir_.file("ooo1.pt")), read_file(dir_.file("ooo2.pt")));
  const ProgramResult bad = run({"train", "npi", "--task", "addition", "--data", data, "--out",
                                 dir_.file("bad.pt"), "--ooo-threads", "2", "--threads", "2"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--threads must be 1 with --ooo-threads 2"), std::string::npos) << bad.err;
}

// What only a GPU does, asked of a model on the CPU: a usage error naming the flag and why,
// before any work.
TEST_F(EngramBinaryTest, NcclAndASecondStreamOnTheCpuAreUsageErrors) {
  const std::string data = short_additions();
  const std::string model = dir_.file("m.pt");
  const ProgramResult nccl = run({"train", "npi", "--task", "addition", "--data", data, "--out",
                                  model, "--dist-backend", "nccl"});
  expect_one_error_line(nccl, 2);
  EXPECT_EQ(nccl.err.rfind("engram: error: --dist-backend is nccl, which sums CUDA tensors only, "
                           "and the model is on the CPU", 0),
            0u)
      << nccl.err;
  const ProgramResult streams = run({"train", "npi", "--task", "addition", "--data", data,
                                     "--out", model, "--ooo-streams", "2"});
  expect_one_error_line(streams, 2);
  EXPECT_NE(streams.err.find("--ooo-streams is 2, a second CUDA stream, and the model is on the "
                             "CPU"),
            std::string::npos)
      << streams.err;
  EXPECT_FALSE(std::filesystem::exists(model));
  const ProgramResult bench =
      run({"bench", "streams", "--json", dir_.file("s.json"), "--device", "cpu"});
  expect_one_error_line(bench, 2);
  EXPECT_EQ(
      bench.err.rfind("engram: error: --device is cpu: the second stream is a CUDA stream", 0), 0u)
      << bench.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("s.json")));
}

TEST_F(EngramBinaryTest, TrainAndRunEndToEnd) {
  const std::string data = dir_.file("d.jsonl"), model = dir_.file("m.pt");
  ProgramResult p = run({"data", "gen", "--task", "sort-recursive", "--out", data, "--max-len", "3",
                         "--per-length", "2"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"train", "npi", "--task", "sort-recursive", "--data", data, "--out", model, "--steps",
           "2", "--hidden", "8", "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.err, "") << "no progress bar when stderr is not a terminal";
  p = run({"run", "--model", model, "--task", "sort-recursive", "--input", "3,1,2", "--json",
           "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j.at("expected"), "1,2,3");
  EXPECT_EQ(j.at("program").at("program"), "BUBBLESORT");
  expect_one_error_line(run({"run", "--model", model, "--task", "addition", "--input", "1+2"}), 1);
}

TEST_F(EngramBinaryTest, HighOrderProgramLearnedOnceWorksWithNeuralPrimitivesAndPipelines) {
  const std::string data = dir_.file("f.jsonl"), models = dir_.path(),
                    filter = dir_.file("filter.pt"), prims = dir_.file("p.pt");
  ProgramResult p = run(
      {"data", "gen", "--task", "filter", "--out", data, "--max-len", "6", "--per-length", "8"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"train", "npi", "--task", "filter", "--data", data, "--out", filter, "--steps", "400",
           "--hidden", "64", "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"train", "primitives", "--out", prims, "--primitive", "even,gt", "--hidden", "64"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"eval", "primitives", "--model", prims, "--json"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out).at("all_exact"), true) << p.out;

  // Trained on lists of length <= 6 with `even`; applied to length 30 with the gt network.
  p = run({"eval", "npi", "--model", filter, "--task", "filter", "--primitive", "gt(4)",
           "--primitives", prims, "--length", "30", "--count", "20", "--json"});
  ASSERT_EQ(p.code, 0) << p.err;
  auto j = nlohmann::json::parse(p.out);
  for (const char* key : {"task", "length", "count", "correct", "accuracy", "trace_exact"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j.at("accuracy"), 1.0) << p.out;
  EXPECT_EQ(j.at("primitive"), "gt(4)");
  EXPECT_EQ(j.at("primitives"), "neural");

  // A held-out predicate: only its network is trained, the program is not.
  expect_one_error_line(run({"eval", "npi", "--model", filter, "--task", "filter", "--primitive",
                             "div(3)", "--primitives", prims, "--length", "5"}),
                        2);
  p = run({"train", "primitives", "--out", prims, "--add", "--primitive", "div", "--hidden", "64"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"eval", "npi", "--model", filter, "--task", "filter", "--primitive", "div(3)",
           "--primitives", prims, "--length", "30", "--count", "20", "--json"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out).at("accuracy"), 1.0) << p.out;

  // A pipeline of two FILTER stages, each with its own primitive.
  p = run({"run", "--program", "filter(gt(2), filter(even, xs))", "--models", models,
           "--primitives", prims, "--input", "1,2,3,4,6", "--json"});
  ASSERT_EQ(p.code, 0) << p.err;
  j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j.at("output"), "4,6");
  EXPECT_EQ(j.at("correct"), true);
  ASSERT_EQ(j.at("stages").size(), 2u);
  EXPECT_EQ(j.at("stages")[0].at("expression"), "filter(even, xs)");
  EXPECT_EQ(j.at("stages")[0].at("output"), "2,4,6");
  EXPECT_EQ(j.at("stages")[1].at("program").at("program"), "FILTER");
  p = run({"run", "--program", "filter(even, xs)", "--models", models, "--symbolic-primitives",
           "--input", "1,2"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("stage 1: filter(even, xs)"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("result: 2  (correct)"), std::string::npos) << p.out;

  // Bad input: one line, the position of the problem, exit 2; a missing model: exit 1.
  p = run({"run", "--program", "filter(even xs)", "--models", models, "--primitives", prims,
           "--input", "1,2"});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("program column 13"), std::string::npos) << p.err;
  p = run({"run", "--program", "map(add, xs)", "--models", models, "--primitives", prims, "--input",
           "1,2"});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("arity mismatch"), std::string::npos) << p.err;
  p = run({"run", "--model", filter, "--task", "filter", "--primitive", "even", "--primitives",
           prims, "--input", "1,10"});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("column 3: value 10 (element 2) is outside the domain 0..9"),
            std::string::npos)
      << p.err;
  expect_one_error_line(run({"eval", "npi", "--model", filter, "--task", "filter", "--primitive",
                             "double", "--primitives", prims, "--length", "5"}),
                        2);
  expect_one_error_line(run({"eval", "npi", "--model", filter, "--task", "filter", "--primitive",
                             "even", "--length", "5"}),
                        2);
  expect_one_error_line(
      run({"train", "primitives", "--out", dir_.file("q.pt"), "--primitive", "triple"}), 2);
  expect_one_error_line(run({"run", "--program", "map(double, xs)", "--models", models,
                             "--symbolic-primitives", "--input", "1,2"}),
                        1);
  expect_one_error_line(run({"eval", "primitives", "--model", dir_.file("none.pt")}), 1);
}

TEST_F(EngramBinaryTest, AdditionWithADigitPrimitiveRunsTheBoundFullAdder) {
  const std::string data = dir_.file("a.jsonl"), model = dir_.file("a.pt");
  ProgramResult p = run({"data", "gen", "--task", "addition-primitive", "--out", data, "--max-len",
                         "3", "--per-length", "2"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"train", "npi", "--task", "addition-primitive", "--data", data, "--out", model,
           "--steps", "2", "--hidden", "8"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"run", "--model", model, "--task", "addition-primitive", "--symbolic-primitives",
           "--input", "5+7", "--json"});
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j.at("primitive"), "fulladd");
  EXPECT_EQ(j.at("expected"), "12");
  p = run({"run", "--model", model, "--task", "addition-primitive", "--symbolic-primitives",
           "--primitive", "add", "--input", "5+7"});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("arity mismatch"), std::string::npos) << p.err;
  expect_one_error_line(run({"run", "--model", model, "--task", "addition", "--primitive",
                             "fulladd", "--symbolic-primitives", "--input", "5+7"}),
                        2);
}

TEST_F(EngramBinaryTest, CodeCorpusTbcnnTrainEvalEncodeClassify) {
  namespace fs = std::filesystem;
  const fs::path src = dir_.file("src");
  const char* bodies[] = {"def f(x):\n    return x + 1\n", "def g(a, b):\n    return a * b\n",
                          "def h():\n    for i in range(3):\n        print(i)\n",
                          "class C:\n    def m(self):\n        return self\n"};
  for (const char* cls : {"arith", "loops"}) {
    for (int i = 0; i < 8; ++i) {
      fs::create_directories(src / cls);
      std::ofstream(src / cls / ("f" + std::to_string(i) + ".py"))
          << bodies[(std::string(cls) == "arith" ? 0 : 2) + i % 2];
    }
  }
  const std::string corpus = dir_.file("c.corpus"), model = dir_.file("t.pt");
  ProgramResult p =
      run({"data", "code", "--lang", "python", "--src", src.string(), "--out", corpus});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("wrote 16 python samples in 2 classes"), std::string::npos) << p.out;
  p = run({"train", "tbcnn", "--corpus", corpus, "--out", model, "--steps", "30", "--channels",
           "16", "--embedding", "8"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"eval", "tbcnn", "--model", model, "--corpus", corpus, "--split", "train", "--json"});
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  for (const char* key : {"accuracy", "top5", "count"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j.at("accuracy"), 1.0) << "two easily told apart classes, seen in training";
  // A corpus of other classes has nothing to score: an error, not "accuracy 0 over 0 examples".
  const fs::path other = dir_.file("other");
  for (const char* cls : {"p", "q"}) {
    fs::create_directories(other / cls);
    for (int i = 0; i < 4; ++i)
      std::ofstream(other / cls / ("f" + std::to_string(i) + ".py")) << bodies[i];
  }
  const std::string other_corpus = dir_.file("other.corpus");
  ASSERT_EQ(
      run({"data", "code", "--lang", "python", "--src", other.string(), "--out", other_corpus})
          .code,
      0);
  p = run({"eval", "tbcnn", "--model", model, "--corpus", other_corpus, "--split", "train"});
  expect_one_error_line(p, 1);
  EXPECT_NE(p.err.find("of classes the model does not know (arith, loops)"), std::string::npos)
      << p.err;

  const std::string file = (src / "loops" / "f0.py").string();
  p = run({"encode", "--model", model, "--file", file});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out).at("vector").size(), 16u);
  p = run({"classify", "--model", model, "--file", file});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.out.rfind("loops", 0), 0u) << p.out;
  // A whole-file model reads no pivot: refused, not ignored (it printed the pivot's node type
  // beside a vector that did not depend on it).
  p = run({"encode", "--model", model, "--file", file, "--pivot", "2:5"});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("--pivot is for models of the masked and loop tasks"), std::string::npos)
      << p.err;
  expect_one_error_line(run({"classify", "--model", model, "--file", file, "--pivot", "2:5"}), 2);
  // A file with a parse error: a warning, and the command goes on.
  std::ofstream(dir_.file("bad.py")) << "def f(:\n    return )\n";
  p = run({"classify", "--model", model, "--file", dir_.file("bad.py")});
  EXPECT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.err.find("warning"), std::string::npos) << p.err;
  // Only a missing token, no ERROR node: a parse error all the same (it passed unwarned).
  std::ofstream(dir_.file("missing.py")) << "def f(:\n";
  p = run({"encode", "--model", model, "--file", dir_.file("missing.py")});
  EXPECT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.err.find("parse errors (0 unreadable regions, 1 missing tokens)"), std::string::npos)
      << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out).at("missing_nodes"), 1) << p.out;

  // The masked-statement task with the localized model needs a pivot to encode.
  const std::string localized = dir_.file("l.pt");
  p = run({"train", "tbcnn", "--corpus", corpus, "--out", localized, "--task", "masked", "--model",
           "localized", "--steps", "5", "--channels", "8", "--embedding", "4"});
  ASSERT_EQ(p.code, 0) << p.err;
  expect_one_error_line(run({"encode", "--model", localized, "--file", file}), 2);
  p = run({"encode", "--model", localized, "--file", file, "--pivot", "3:9"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out).at("pivot_type"), "expression_statement") << p.out;
  expect_one_error_line(run({"encode", "--model", localized, "--file", file, "--pivot", "x"}), 2);
  // A position in no node but the module: past the file's end, or a blank line. It was read as
  // the module itself (or, for this task, as "no statement there").
  p = run({"encode", "--model", localized, "--file", file, "--pivot", "999:1"});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("--pivot 999:1: no node of the file but the module itself (the position "
                       "is past its end)"),
            std::string::npos)
      << p.err;
  std::ofstream(dir_.file("blank.py")) << "a = 1\n\nb = 2\n";
  p = run({"encode", "--model", localized, "--file", dir_.file("blank.py"), "--pivot", "2:1"});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("--pivot 2:1: no node of the file but the module itself (a blank line"),
            std::string::npos)
      << p.err;
  // Model selection on the valid split.
  p = run({"train",
           "tbcnn",
           "--corpus",
           corpus,
           "--out",
           localized,
           "--task",
           "masked",
           "--model",
           "localized",
           "--steps",
           "6",
           "--channels",
           "8",
           "--embedding",
           "4",
           "--valid-every",
           "3",
           "--valid-statements",
           "2"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("the best of 2 scored"), std::string::npos) << p.out;
  expect_one_error_line(
      run({"train", "tbcnn", "--corpus", corpus, "--out", localized, "--valid-every", "-1"}), 2);

  // Bad input.
  expect_one_error_line(
      run({"data", "code", "--lang", "rust", "--src", src.string(), "--out", corpus}), 2);
  expect_one_error_line(
      run({"data", "code", "--lang", "python", "--src", dir_.file("none"), "--out", corpus}), 2);
  fs::create_directories(src / "empty");
  p = run({"data", "code", "--lang", "python", "--src", src.string(), "--out", dir_.file("e.c")});
  expect_one_error_line(p, 2);
  EXPECT_NE(p.err.find("empty"), std::string::npos) << p.err;
  expect_one_error_line(run({"eval", "tbcnn", "--model", dir_.file("none.pt"), "--corpus", corpus}),
                        1);
  expect_one_error_line(run({"encode", "--model", model, "--file", src.string()}), 1);
  expect_one_error_line(
      run({"train", "tbcnn", "--corpus", corpus, "--out", model, "--model", "localized"}), 2);
}

}  // namespace
}  // namespace engram
