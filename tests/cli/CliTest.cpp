// The command line end to end, in-process: engram_main with captured output, as a user runs it.
#include "cli/Cli.h"
#include "cli/Command.h"

#include "datasets/TraceFile.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace engram::cli {
namespace {

using nlohmann::json;
using testing::read_file;
using testing::split_lines;
using testing::TempDir;
using testing::write_file;

struct Outcome {
  int code = -1;
  std::string out, err;
};

Outcome engram(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Outcome o;
  o.code = engram_main(args, out, err);
  o.out = out.str();
  o.err = err.str();
  return o;
}

std::string describe(const std::vector<std::string>& args, const Outcome& o) {
  std::string s = "engram";
  for (const auto& a : args) s += " " + a;
  return s + "\n  exit " + std::to_string(o.code) + "\n  stdout: " + o.out + "\n  stderr: " + o.err;
}

/// Runs `args` and expects exit code `code` with one error line on stderr and nothing on stdout.
Outcome expect_error(const std::vector<std::string>& args, int code, const std::string& needle) {
  const Outcome o = engram(args);
  EXPECT_EQ(o.code, code) << describe(args, o);
  EXPECT_EQ(o.err.rfind("engram: error: ", 0), 0u) << describe(args, o);
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << "one line: " << describe(args, o);
  EXPECT_EQ(o.err.back(), '\n') << describe(args, o);
  EXPECT_NE(o.err.find(needle), std::string::npos)
      << "expected '" << needle << "' in " << describe(args, o);
  EXPECT_EQ(o.out, "") << describe(args, o);
  return o;
}

class CliTest : public ::testing::Test {
 protected:
  Outcome expect_ok(const std::vector<std::string>& args) {
    const Outcome o = engram(args);
    EXPECT_EQ(o.code, 0) << describe(args, o);
    EXPECT_EQ(o.err, "") << describe(args, o);
    return o;
  }
  /// Small addition data and a tiny model trained on it for three steps.
  void make_model() {
    expect_ok({"data", "gen", "--task", "addition", "--out", data_, "--max-len", "3",
               "--per-length", "4", "--seed", "1"});
    expect_ok({"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--steps",
               "3", "--hidden", "16", "--batch", "4", "--threads", "1"});
  }

  TempDir dir_;
  std::string data_ = dir_.file("addition.jsonl");
  std::string model_ = dir_.file("addition.pt");
};

TEST_F(CliTest, DataGenTrainEvalRun) {
  Outcome o = expect_ok({"data", "gen", "--task", "addition", "--out", data_, "--max-len", "3",
                         "--per-length", "4", "--seed", "1"});
  EXPECT_EQ(o.out, "wrote 12 addition traces (lengths 1..3) to " + data_ + "\n");
  const auto set = datasets::read_trace_file(data_);
  EXPECT_EQ(set.task, "addition");
  EXPECT_EQ(set.traces.size(), 12u);

  const std::string metrics = dir_.file("metrics.jsonl");
  o = expect_ok({"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--steps",
                 "3", "--hidden", "16", "--threads", "1", "--metrics", metrics});
  EXPECT_EQ(o.out.rfind("trained addition NPI: 3 steps", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("wrote " + model_), std::string::npos) << o.out;
  const auto lines = split_lines(read_file(metrics));
  ASSERT_EQ(lines.size(), 1u) << "three steps, logged at the last";
  EXPECT_EQ(json::parse(lines[0]).at("step"), 3);

  // eval --json: one length gives an object...
  o = expect_ok({"eval", "npi", "--model", model_, "--task", "addition", "--length", "3", "--count",
                 "4", "--threads", "1", "--json"});
  const json one = json::parse(o.out);
  ASSERT_TRUE(one.is_object()) << o.out;
  for (const char* key : {"task", "length", "count", "correct", "accuracy", "trace_exact"}) {
    EXPECT_TRUE(one.contains(key)) << key << " missing in " << o.out;
  }
  EXPECT_EQ(one.at("task"), "addition");
  EXPECT_EQ(one.at("length"), 3);
  EXPECT_EQ(one.at("count"), 4);
  EXPECT_DOUBLE_EQ(one.at("accuracy").get<double>(), one.at("correct").get<int>() / 4.0);
  // ...two lengths a list.
  o = expect_ok({"eval", "npi", "--model", model_, "--task", "addition", "--length", "2,3",
                 "--count", "3", "--threads", "1", "--json"});
  const json two = json::parse(o.out);
  ASSERT_TRUE(two.is_array()) << o.out;
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].at("length"), 2);
  EXPECT_EQ(two[1].at("length"), 3);
  for (const auto& r : two) EXPECT_EQ(r.at("count"), 3);
  // The table.
  o = expect_ok({"eval", "npi", "--model", model_, "--task", "addition", "--length", "2", "--count",
                 "2", "--threads", "1"});
  EXPECT_EQ(o.out.rfind("task                length  count  accuracy  trace_exact  seconds\n", 0),
            0u)
      << o.out;
  EXPECT_NE(o.out.find("addition                 2      2"), std::string::npos) << o.out;

  // run --json: the generated program as a tree, and the result.
  o = expect_ok({"run", "--model", model_, "--task", "addition", "--input", "25+17", "--threads",
                 "1", "--json"});
  const json run = json::parse(o.out);
  EXPECT_EQ(run.at("task"), "addition");
  EXPECT_EQ(run.at("input"), "25+17");
  EXPECT_EQ(run.at("expected"), "42");
  EXPECT_TRUE(run.at("output").is_string());
  EXPECT_EQ(run.at("correct").get<bool>(), run.at("output") == "42" && !run.contains("error"));
  EXPECT_GE(run.at("steps").get<long>(), 1);
  EXPECT_EQ(run.at("program").at("program"), "ADD");
  EXPECT_TRUE(run.at("program").at("calls").is_array());

  // run as text: the call tree from the root, then the result.
  o = expect_ok(
      {"run", "--model", model_, "--task", "addition", "--input", "25+17", "--threads", "1"});
  const auto text = split_lines(o.out);
  ASSERT_GE(text.size(), 2u) << o.out;
  EXPECT_EQ(text[0], "ADD");
  const bool correct = run.at("correct").get<bool>();
  const std::string result_line = "result: " + run.at("output").get<std::string>();
  EXPECT_NE(std::find_if(text.begin(), text.end(),
                         [&](const std::string& line) { return line.rfind(result_line, 0) == 0; }),
            text.end())
      << o.out;
  EXPECT_NE(o.out.find(correct ? "(correct)" : "(WRONG, expected 42)"), std::string::npos) << o.out;
  if (run.contains("error")) {
    EXPECT_NE(o.out.find("stopped: " + run.at("error").get<std::string>()), std::string::npos);
  }

  EXPECT_EQ(dir_.entries(),
            (std::set<std::string>{"addition.jsonl", "addition.pt", "metrics.jsonl"}))
      << "no temporary files left";
}

TEST_F(CliTest, TrainingWithReluCompressionIsLossless) {
  expect_ok({"data", "gen", "--task", "addition", "--out", data_, "--max-len", "3", "--per-length",
             "4", "--seed", "1"});
  std::vector<double> losses[2];
  for (const int relu : {0, 1}) {
    const std::string metrics = dir_.file("metrics" + std::to_string(relu) + ".jsonl");
    std::vector<std::string> args{"train",    "npi",       "--task",  "addition", "--data",
                                  data_,      "--out",     model_,    "--steps",  "4",
                                  "--hidden", "16",        "--batch", "4",        "--threads",
                                  "1",        "--metrics", metrics,   "--memory"};
    args.push_back(relu ? "relu" : "none");
    args.insert(args.end(), {"--seed", "3"});
    expect_ok(args);
    for (const auto& line : split_lines(read_file(metrics))) {
      losses[relu].push_back(json::parse(line).at("loss").get<double>());
    }
  }
  ASSERT_FALSE(losses[0].empty());
  EXPECT_EQ(losses[0], losses[1]) << "bit-identical losses";
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--memory",
                "relu,zip"},
               2, "--memory has an unknown technique 'zip'");
}

// Recompute and swap of the NPI's units (encoder, core), with and without a budget: the same
// model bytes as training without them; bad combinations are usage errors.
TEST_F(CliTest, TrainingWithRecomputeAndSwapWritesTheSameModel) {
  expect_ok({"data", "gen", "--task", "addition", "--out", data_, "--max-len", "3", "--per-length",
             "4", "--seed", "1"});
  const auto train = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args{"train",   "npi", "--task",    "addition", "--data",   data_,
                                  "--out",   out,   "--steps",   "4",        "--hidden", "16",
                                  "--batch", "4",   "--threads", "1",        "--seed",   "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    return expect_ok(args);
  };
  const std::string plain = dir_.file("plain.pt");
  train(plain, {});
  for (const auto& extra :
       std::vector<std::vector<std::string>>{{"--memory", "recompute"},
                                             {"--memory", "swap", "--swap-bandwidth", "1e9"},
                                             {"--memory", "relu,recompute,swap"},
                                             {"--memory", "all", "--memory-budget", "100000000"}}) {
    const std::string out = dir_.file("m.pt");
    train(out, extra);
    EXPECT_EQ(read_file(out), read_file(plain)) << extra[1];
  }
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--memory",
                "recompute", "--impl", "torch"},
               2, "recompute and swap need impl engram");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--memory",
                "relu", "--memory-budget", "1000"},
               2, "--memory-budget needs recompute, swap or algo");
  // A device-memory cap: malformed, or on the CPU (whose bound is the budget), a usage error.
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_,
                "--memory-cap", "8 GB"},
               2, "--memory-cap must be bytes");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_,
                "--memory-cap", "8GiB"},
               2, "--memory-cap limits a device's memory, and the model is on the CPU");
  EXPECT_FALSE(std::filesystem::exists(model_));
  // Far below anything: the error names the smallest feasible budget, and nothing is written.
  const Outcome o = expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out",
                                  model_, "--memory", "swap", "--memory-budget", "1000"},
                                 2, "is below the smallest feasible budget");
  EXPECT_NE(o.err.find("memory budget 1000 bytes"), std::string::npos) << o.err;
  EXPECT_FALSE(std::filesystem::exists(model_));

  // A budget below the model's baseline (every unit kept): 2% above the smallest feasible one for
  // this model, which the error names (the margin: a swapped step's measured peak can move a
  // little with the I/O thread's timing). The planner must recompute or swap every unit to meet
  // it (each saves far more than the margin); the plan is printed, and the model is still the
  // plain run's.
  std::vector<std::string> too_low{"train",   "npi", "--task",    "addition", "--data",   data_,
                                   "--out",   model_, "--steps",  "4",        "--hidden", "16",
                                   "--batch", "4",    "--threads", "1",       "--seed",   "3",
                                   "--memory", "recompute,swap", "--memory-budget", "1000"};
  const Outcome low = expect_error(too_low, 2, "is below the smallest feasible budget");
  const std::string marker = "smallest feasible budget, ";
  const auto at = low.err.find(marker);
  ASSERT_NE(at, std::string::npos) << low.err;
  const long long smallest = std::stoll(low.err.substr(at + marker.size()));
  const long long budget = smallest + smallest / 50;
  const std::string tight = dir_.file("tight.pt");
  const Outcome planned =
      train(tight, {"--memory", "recompute,swap", "--memory-budget", std::to_string(budget)});
  EXPECT_EQ(read_file(tight), read_file(plain));
  const std::string& text = planned.out;
  EXPECT_NE(text.find("memory plan: budget " + std::to_string(budget) + " bytes"),
            std::string::npos)
      << text;
  const auto kept = text.find("every unit kept ");
  ASSERT_NE(kept, std::string::npos) << text;
  EXPECT_GT(std::stoll(text.substr(kept + 16)), budget) << "the budget is below the baseline";
  // Every unit's line names its choice; near the smallest budget none is kept.
  int units = 0;
  for (const auto& line : split_lines(text)) {
    if (line.rfind("  encoder", 0) != 0 && line.rfind("  core", 0) != 0) continue;
    ++units;
    EXPECT_EQ(line.find(" keep "), std::string::npos) << line;
  }
  EXPECT_GT(units, 0) << text;
}

TEST_F(CliTest, DataGenDefaultsDependOnTheTask) {
  const Outcome o = expect_ok({"data", "gen", "--task", "sort", "--out", data_, "--max-len", "3"});
  EXPECT_EQ(o.out, "wrote 128 sort traces (lengths 2..3) to " + data_ + "\n");
}

// A newcomer who gives no model options gets the model the claims use: for the sort tasks 64
// wide (npi::train_defaults), unless --hidden says otherwise.
TEST_F(CliTest, TrainNpiTakesThePerTaskDefaultsOfTheFlagsNotGiven) {
  expect_ok({"data", "gen", "--task", "sort-recursive", "--out", data_, "--max-len", "3",
             "--per-length", "2"});
  const auto hidden_of = [](const std::string& model) {
    // The checkpoint's header holds the model's configuration as an escaped JSON string.
    const std::string bytes = read_file(model);
    const std::string key = "\\\"hidden\\\":";
    const auto at = bytes.find(key);
    return at == std::string::npos ? -1 : std::stoi(bytes.substr(at + key.size(), 8));
  };
  expect_ok({"train", "npi", "--task", "sort-recursive", "--data", data_, "--out", model_,
             "--steps", "1"});
  EXPECT_EQ(hidden_of(model_), 64);
  expect_ok({"train", "npi", "--task", "sort-recursive", "--data", data_, "--out", model_,
             "--steps", "1", "--hidden", "16"});
  EXPECT_EQ(hidden_of(model_), 16);
  // The help says where defaults vary.
  const Outcome help = expect_ok({"help", "train", "npi"});
  EXPECT_NE(help.out.find("default: per task"), std::string::npos) << help.out;
  EXPECT_NE(expect_ok({"help", "train", "tbcnn"}).out.find("0.05 for bow"), std::string::npos);
}

// The training session's flags are registered once for every train command, and an invalid
// value the library reports by its field (InvalidOption) comes out naming the flag.
TEST_F(CliTest, EveryTrainCommandTakesTheTrainingFlags) {
  const std::vector<std::vector<std::string>> commands{
      {"train", "npi", "--task", "addition", "--data", data_, "--out", model_},
      {"train", "primitives", "--out", model_},
      {"train", "tbcnn", "--corpus", dir_.file("c.corpus"), "--out", model_}};
  for (const auto& command : commands) {
    const Outcome help = expect_ok({"help", command[0], command[1]});
    for (const char* flag : {"--steps", "--batch", "--lr", "--optimizer", "--momentum", "--clip",
                             "--seed", "--threads", "--metrics", "--log-every"}) {
      EXPECT_NE(help.out.find(flag), std::string::npos) << flag << " not in\n" << help.out;
    }
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"--lr", "-1"}, "engram: error: --lr must be a positive number\n"},
        {{"--batch", "0"}, "engram: error: --batch must be at least 1\n"},
        {{"--threads", "5000"}, "engram: error: --threads must be 0 (all cores) or between 1 and "
                                "1024\n"},
        {{"--log-every", "0"}, "engram: error: --log-every must be at least 1\n"},
        {{"--momentum", "1"}, "engram: error: --momentum must be at least 0 and below 1\n"}};
    for (const auto& [change, message] : cases) {
      std::vector<std::string> args = command;
      const std::vector<std::string> valid{"--steps",   "1", "--batch",     "2", "--lr",
                                           "0.1",       "--clip", "1",      "--seed", "3",
                                           "--threads", "1", "--log-every", "1", "--metrics",
                                           dir_.file("m.jsonl")};
      for (std::size_t i = 0; i < valid.size(); i += 2) {
        if (valid[i] != change[0]) args.insert(args.end(), {valid[i], valid[i + 1]});
      }
      args.insert(args.end(), change.begin(), change.end());
      const Outcome o = expect_error(args, 2, message);
      EXPECT_EQ(o.err, message);
    }
  }
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_,
                "--memory-budget", "-5", "--memory", "swap"},
               2, "--memory-budget must not be negative");
  expect_error({"train", "primitives", "--out", model_, "--memory", "relu"}, 2, "--memory");
  expect_error({"train", "primitives", "--out", model_, "--optimizer", "adagrad"}, 2,
               "--optimizer");
  EXPECT_TRUE(dir_.entries().empty()) << "usage errors write nothing";
}

// Every integer option reads decimal digits: CLI11 alone read "010" as octal eight, "0x10" as
// sixteen and a number past 64 bits as the largest one, without a word.
TEST_F(CliTest, IntegerOptionsAreDecimal) {
  const std::string out = dir_.file("t.jsonl");
  const Outcome ten = expect_ok({"data", "gen", "--task", "addition", "--out", out, "--max-len",
                                 "1", "--per-length", "010"});
  EXPECT_NE(ten.out.find("wrote 10 addition traces"), std::string::npos) << ten.out;
  const std::string seeded = read_file(out);
  expect_ok({"data", "gen", "--task", "addition", "--out", out, "--max-len", "1", "--per-length",
             "10", "--seed", "010"});
  const std::string seed_ten = read_file(out);
  expect_ok({"data", "gen", "--task", "addition", "--out", out, "--max-len", "1", "--per-length",
             "10", "--seed", "10"});
  EXPECT_EQ(seed_ten, read_file(out)) << "--seed 010 is seed 10";
  EXPECT_NE(seeded, seed_ten) << "the seed matters to the traces";
  expect_error({"data", "gen", "--task", "addition", "--out", out, "--per-length", "0x10"}, 2,
               "--per-length: '0x10' is not a whole number in decimal digits");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_,
                "--memory", "swap", "--memory-budget", "99999999999999999999"},
               2, "--memory-budget: '99999999999999999999' is not a whole number within 64 bits");
  expect_error({"data", "gen", "--task", "addition", "--out", out, "--per-length", "1e3"}, 2,
               "--per-length: '1e3' is not a whole number in decimal digits");
}

TEST_F(CliTest, InvalidOptionsNameTheirFlag) {
  EXPECT_EQ(flag_for({{"learning_rate", "--lr"}}, "learning_rate"), "--lr");
  EXPECT_EQ(flag_for({{"learning_rate", "--lr"}}, "no_such_field"), "no_such_field");
  make_model();
  expect_error({"eval", "npi", "--model", model_, "--task", "addition", "--length", "3", "--count",
                "0"},
               2, "engram: error: --count must be at least 1");
  expect_error({"eval", "npi", "--model", model_, "--task", "addition", "--length", "3",
                "--threads", "-3"},
               2, "engram: error: --threads must be 0");
  expect_error({"run", "--model", model_, "--task", "addition", "--input", "1+2", "--threads",
                "2000"},
               2, "engram: error: --threads must be 0");
  expect_error({"data", "gen", "--task", "addition", "--out", data_, "--per-length", "0"}, 2,
               "engram: error: --per-length must be at least 1");
  expect_error({"data", "gen", "--task", "addition", "--out", data_, "--min-len", "5", "--max-len",
                "3"},
               2, "engram: error: --max-len is below the shortest length");
  // Checked before any file is read: a missing corpus does not turn a bad model into exit 1.
  expect_error({"train", "tbcnn", "--corpus", dir_.file("absent.corpus"), "--out",
                dir_.file("t.pt"), "--model", "foo"},
               2, "engram: error: --model must be tbcnn, localized or bow, not 'foo'");
  expect_error({"train", "tbcnn", "--corpus", dir_.file("absent.corpus"), "--out",
                dir_.file("t.pt"), "--activation", "sigmoid"},
               2, "engram: error: --activation must be relu or tanh");
  // The bag of node types has no convolutions: their options were silently ignored.
  expect_error({"train", "tbcnn", "--corpus", dir_.file("absent.corpus"), "--out",
                dir_.file("t.pt"), "--model", "bow", "--layers", "3"},
               2, "engram: error: --layers is not used by the bow model");
  expect_error({"train", "tbcnn", "--corpus", dir_.file("absent.corpus"), "--out",
                dir_.file("t.pt"), "--model", "bow", "--identifiers"},
               2, "engram: error: --identifiers is not used by the bow model");
  // Out-of-order backprop updates the first layers during the next forward: no global clip.
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", dir_.file("o.pt"),
                "--grad-sync", "ooo"},
               2, "engram: error: --clip must be 0 with --grad-sync ooo");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", dir_.file("o.pt"),
                "--grad-sync", "ooo", "--clip", "0", "--ooo-k", "some"},
               2, "engram: error: --ooo-k: must be a number of layers or auto, not 'some'");
  // Bench and eval options are usage errors (2), not failures (1).
  expect_error({"bench", "npi", "--json", dir_.file("b.json"), "--steps", "0"}, 2,
               "engram: error: --steps must be at least 1");
  expect_error({"bench", "npi", "--json", dir_.file("b.json"), "--hidden", "0"}, 2,
               "engram: error: --hidden must be between 1 and 8192");
  expect_error({"bench", "tbcnn", "--json", dir_.file("b.json"), "--corpus", dir_.file("c"),
                "--repeats", "0"},
               2, "engram: error: --repeats must be at least 1");
  expect_error({"bench", "tbcnn", "--json", dir_.file("b.json"), "--corpus", dir_.file("c"),
                "--src", dir_.file("nowhere")},
               2, "engram: error: --src '");
  {
    // --json naming one of the files --src times the parsing of is refused before it is read over.
    std::filesystem::create_directories(dir_.file("src/pkg"));
    const std::string source = dir_.file("src/pkg/f.py");
    std::ofstream(source) << "def f(x):\n    return x\n";
    expect_error({"bench", "tbcnn", "--json", dir_.file("src/pkg/../pkg/f.py"), "--corpus",
                  dir_.file("c"), "--src", dir_.file("src")},
                 2, "' is a source file of --src '");
    EXPECT_EQ(read_file(source), "def f(x):\n    return x\n");
  }
  expect_error({"bench", "memory", "--workload", "vgg", "--json", dir_.file("b.json")}, 2,
               "engram: error: --workload must be one of");
  expect_error({"bench", "memory", "--workload", "npi", "--json", dir_.file("b.json"), "--steps",
                "0"},
               2, "engram: error: --steps must be at least 1");
  expect_error({"eval", "tbcnn", "--model", model_, "--corpus", dir_.file("c"), "--statements",
                "0"},
               2, "engram: error: --statements must be at least 1");
  expect_error({"eval", "tbcnn", "--model", model_, "--corpus", dir_.file("c"), "--split",
                "dev"},
               2, "unknown split 'dev'");
  expect_error({"eval", "primitives", "--model", model_, "--threads", "-1"}, 2,
               "engram: error: --threads must be 0");
  // Values that were taken without a word: a negative limit became the default, a huge clip
  // failed in torch's float conversion, a byte-per-second spill file never finished a step.
  expect_error(
      {"run", "--model", model_, "--task", "addition", "--input", "1+2", "--max-steps", "-1"}, 2,
      "engram: error: --max-steps must be at least 1, or 0 for the default");
  expect_error({"eval", "npi", "--model", model_, "--task", "addition", "--length", "3",
                "--max-depth", "-5"},
               2, "engram: error: --max-depth must be at least 1, or 0 for the default");
  expect_error({"eval", "npi", "--model", model_, "--task", "addition", "--length", "10000",
                "--count", "100000000"},
               2, "engram: error: --count times each length must be at most 1e8");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", dir_.file("o.pt"),
                "--clip", "1e39"},
               2, "engram: error: --clip must be a non-negative float32 number");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", dir_.file("o.pt"),
                "--memory", "swap", "--swap-bandwidth", "1"},
               2, "engram: error: --swap-bandwidth must be 0 (unthrottled) or at least 1e6");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--port", "-5"}, 2,
               "engram: error: --port must be 0 (a free one) or a TCP port in 1..65534");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--port", "70000"}, 2,
               "engram: error: --port must be 0");
  expect_error({"train", "primitives", "--out", dir_.file("p.lib"), "--primitive", "double,double"},
               2, "engram: error: --primitive names 'double' twice");
  expect_error({"data", "code", "--lang", "python", "--src", dir_.file("src"), "--out",
                dir_.file("x.corpus"), "--max-nodes", "-1"},
               2, "engram: error: --max-nodes must be 0 (no limit) or more");
  expect_error(
      {"data", "stdlib", "--lib", dir_.path(), "--out", dir_.file("std"), "--min-files", "-1"}, 2,
      "engram: error: --min-files must be at least 1");
  // bench sizes far beyond use were torch allocation errors with stack traces; a given --batch 0
  // took the default batch, a --budget below one byte meant no budget.
  expect_error(
      {"bench", "memory", "--workload", "npi", "--json", dir_.file("b.json"), "--hidden", "200000"},
      2, "engram: error: --hidden must be between 1 and 8192");
  expect_error({"bench", "memory", "--workload", "resnet", "--json", dir_.file("b.json"), "--width",
                "100000"},
               2, "engram: error: --width must be between 1 and 1024");
  expect_error(
      {"bench", "memory", "--workload", "npi", "--json", dir_.file("b.json"), "--batch", "0"}, 2,
      "--batch");
  expect_error({"bench", "memory", "--workload", "npi", "--json", dir_.file("b.json"),
                "--techniques", "none,recompute", "--budget", "0.5"},
               2, "engram: error: --budget must be a whole number of bytes from 1");
  expect_error({"bench", "memory", "--workload", "npi", "--json", dir_.file("b.json"),
                "--techniques", "none,recompute", "--budget", "99999999999999999999"},
               2, "engram: error: --budget must be a whole number of bytes from 1");
  expect_error({"bench", "npi", "--json", dir_.file("b.json"), "--hidden", "200000"}, 2,
               "engram: error: --hidden must be between 1 and 8192");
  // Each of bench dp's checks names its own flag (a bad --npi-batch was named --resnet-batch).
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--npi-batch", "0"}, 2,
               "engram: error: --npi-batch must be between 1 and 65536");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--hidden", "0"}, 2,
               "engram: error: --hidden must be between 1 and 8192");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--first-bucket-mb", "0"}, 2,
               "engram: error: --first-bucket-mb must be a positive size");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--dist-backend", "nccl"}, 2,
               "engram: error: --dist-backend is nccl, which sums CUDA tensors only");
  // The traces' folder before the ranks' work (a missing one failed after every row was measured).
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--trace", dir_.file("nowhere")}, 1,
               "engram: error: cannot write traces into '" + dir_.file("nowhere") +
                   "': no such folder");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--trace", data_}, 1,
               "': it is not a folder");
  // synth's options before its --recognizer tbcnn model is read (a missing model was named first).
  expect_error({"synth", "--source", dir_.file("f.py"), "--function", "f", "--k", "1",
                "--recognizer", "tbcnn", "--tbcnn-model", dir_.file("missing.pt")},
               2, "engram: error: --k must lie in 2..1000");
  // A bucket past 1 TiB: its bytes overflowed a size_t (an undefined conversion).
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_,
                "--bucket-mb", "1e14"},
               2, "--bucket-mb: '1e14' is not a positive size in MiB up to 1048576 (1 TiB)");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--bucket-mb", "1e14"}, 2,
               "engram: error: --bucket-mb must be a positive size up to 1048576 MiB (1 TiB)");
  // Traces are held in memory until the file is written: past 1e7 the machine ran out of it.
  expect_error({"data", "gen", "--task", "addition", "--out", dir_.file("t.jsonl"), "--max-len",
                "5", "--per-length", "2000000000"},
               2, "--per-length asks for 10000000000 traces in all: at most 1e7");
  expect_error({"data", "gen", "--task", "addition", "--out", dir_.file("t.jsonl"), "--traces",
                "10000001"},
               2, "--traces asks for 10000001 traces in all: at most 1e7");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("t.jsonl")));
  // bench scale reads its profile and writes its predictions: one file for both is refused.
  write_file(dir_.file("profile.json"), "{}");
  expect_error({"bench", "scale", "--from", dir_.file("profile.json"), "--json",
                dir_.file("profile.json")},
               2, "--json '" + dir_.file("profile.json") + "' is the file --from reads");
  EXPECT_EQ(read_file(dir_.file("profile.json")), "{}");
  // The DDP peer's launcher is checked before Engram's rows are measured, not after them.
  const std::string no_python = dir_.file("no-such-python3");
  expect_error(
      {"bench", "dp", "--json", dir_.file("b.json"), "--torchrun", "", "--python", no_python}, 2,
      "engram: error: --python is '" + no_python + "', which is not an executable file");
  expect_error({"bench", "dp", "--json", dir_.file("b.json"), "--torchrun", no_python}, 2,
               "engram: error: --torchrun is '" + no_python + "', which is not an executable");
  expect_error({"bench", "memory", "--workload", "resnet", "--json", dir_.file("b.json"),
                "--python", no_python},
               2, "engram: error: --python is '" + no_python + "', which is not an executable");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("b.json")));
}

TEST_F(CliTest, Help) {
  // `engram help` describes the whole program, as `engram --help` does.
  Outcome o = expect_ok({"help"});
  EXPECT_NE(o.out.find("Usage: engram [OPTIONS] SUBCOMMAND"), std::string::npos) << o.out;
  for (const char* command : {"data", "train", "eval", "run", "help"}) {
    EXPECT_NE(o.out.find("\n  " + std::string(command) + " "), std::string::npos)
        << command << " not listed in\n"
        << o.out;
  }
  EXPECT_EQ(expect_ok({"--help"}).out, o.out);
  // `engram help train npi` describes that command, as `engram train npi --help` does.
  o = expect_ok({"help", "train", "npi"});
  EXPECT_NE(o.out.find("Usage: engram train npi [OPTIONS]"), std::string::npos) << o.out;
  for (const char* option : {"--task", "--data", "--out", "--steps", "--hidden", "--lr"}) {
    EXPECT_NE(o.out.find(option), std::string::npos) << option << " not in\n" << o.out;
  }
  EXPECT_EQ(expect_ok({"train", "npi", "--help"}).out, o.out);
  o = expect_ok({"run", "--help"});
  EXPECT_NE(o.out.find("Usage: engram run [OPTIONS]"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--input"), std::string::npos) << o.out;
  EXPECT_EQ(expect_ok({"help", "run"}).out, o.out);
  for (const char* grammar : {"Program expressions", "fold(primitive, INIT, expr)", "gt(5)",
                              "--primitives", "--symbolic-primitives"}) {
    EXPECT_NE(o.out.find(grammar), std::string::npos) << grammar << " not in\n" << o.out;
  }
  o = expect_ok({"--help-all"});
  EXPECT_NE(o.out.find("--max-depth"), std::string::npos) << o.out;
  expect_error({"help", "nosuch"}, 2, "nosuch");
}

TEST_F(CliTest, UsageErrorsExitWithTwo) {
  expect_error({}, 2, "engram help");
  expect_error({"frobnicate"}, 2, "unknown command 'frobnicate'");
  expect_error({"data", "gen", "--task", "addition", "--out", data_, "--bogus"}, 2, "--bogus");
  expect_error({"train", "npi", "--task", "addition"}, 2, "--data");
  expect_error(
      {"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--steps", "many"},
      2, "many");
  // Data-parallel flags, checked before joining any job.
  const std::vector<std::string> train{"train", "npi", "--task", "addition", "--data", data_,
                                       "--out", model_};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = train;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_error(with({"--grad-sync", "sometimes"}), 2, "--grad-sync");
  expect_error(with({"--bucket-mb", "0"}), 2, "--bucket-mb");
  expect_error(with({"--dist-timeout", "0"}), 2, "--dist-timeout");
  expect_error(with({"--link-bandwidth", "-5"}), 2, "--link-bandwidth");
  expect_error(with({"--dist-backend", "mpi"}), 2, "--dist-backend");
  // Unknown task, wherever it is named.
  expect_error({"data", "gen", "--task", "multiply", "--out", data_}, 2, "unknown task 'multiply'");
  expect_error({"run", "--model", model_, "--task", "multiply", "--input", "1+2"}, 2, "multiply");
  expect_error({"eval", "npi", "--model", model_, "--task", "multiply", "--length", "3"}, 2,
               "multiply");
  // Malformed problems and values, reported before any file is opened.
  expect_error({"run", "--model", model_, "--task", "addition", "--input", "12+"}, 2, "'12+'");
  expect_error({"run", "--model", model_, "--task", "sort", "--input", "3,,1"}, 2, "'3,,1'");
  expect_error({"eval", "npi", "--model", model_, "--task", "addition", "--length", "0"}, 2,
               "--length");
  expect_error({"data", "gen", "--task", "sort", "--out", data_, "--min-len", "1"}, 2, "--min-len");
  // Past the reference programs' length bound (these crashed with SIGSEGV before it existed).
  expect_error({"eval", "npi", "--model", model_, "--task", "addition", "--length", "99999999"}, 2,
               "--length 99999999");
  expect_error({"data", "gen", "--task", "addition", "--out", data_, "--max-len", "30000"}, 2,
               "--max-len 30000");
  expect_error({"eval", "npi", "--model", model_, "--task", "sort", "--length", "5000"}, 2,
               "--length 5000");
  // Bounds that used to hang (100000 threads) or print a torch stack trace (a 160 GB allocation).
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--threads",
                "100000"},
               2, "--threads");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--hidden",
                "100000"},
               2, "--hidden");
  expect_error(
      {"train", "npi", "--task", "addition", "--data", data_, "--out", model_, "--steps", "0"}, 2,
      "--steps");
  expect_error({"bench", "npi", "--json", data_, "--batch", "0"}, 2, "--batch");
  // Seeds CLI11 clamped to 2^64-1 without a word.
  expect_error({"data", "gen", "--task", "addition", "--out", data_, "--seed", "-1"}, 2,
               "--seed: '-1' is not a whole number from 0 to 18446744073709551615");
  expect_error(
      {"data", "gen", "--task", "addition", "--out", data_, "--seed", "18446744073709551616"}, 2,
      "--seed: '18446744073709551616' is not a whole number from 0 to 18446744073709551615");
  expect_error(with({"--seed", "-3"}), 2, "'-3' is not a whole number from 0 to");
  // The demo checks its options before it writes (it made its folder and traces first).
  expect_error({"demo", "--dir", dir_.file("demo/sub"), "--threads", "-1"}, 2,
               "engram: error: --threads must be 0");
  expect_error({"demo", "--dir", ""}, 2, "engram: error: --dir must name a folder");
  EXPECT_TRUE(dir_.entries().empty()) << "usage errors write nothing";
}

TEST_F(CliTest, PrimitiveUsageErrorsExitWithTwo) {
  const std::string prims = dir_.file("p.pt");
  // Primitive options on a task without primitives, unknown or mismatched primitives.
  expect_error({"data", "gen", "--task", "addition", "--out", data_, "--primitive", "double"}, 2,
               "--primitive applies to the tasks with primitives");
  expect_error({"data", "gen", "--task", "map", "--out", data_, "--primitive", "tripple"}, 2,
               "column 1: unknown primitive 'tripple'");
  expect_error({"data", "gen", "--task", "fold", "--out", data_, "--primitive", "even"}, 2,
               "arity mismatch: fold applies a binary primitive, but 'even' is predicate");
  expect_error({"data", "gen", "--task", "filter", "--out", data_, "--primitive", "gt(10)"}, 2,
               "the parameter must lie in 0..9");
  expect_error({"data", "gen", "--task", "fold", "--out", data_, "--init", "10"}, 2,
               "--init 10 is outside the domain 0..9");
  expect_error({"data", "gen", "--task", "map", "--out", data_, "--k", "1"}, 2, "K must lie in");
  // Checked before the input's values are (it said "outside the domain 0..-6").
  expect_error({"run", "--program", "map(square, xs)", "--models", dir_.path(), "--input", "0",
                "--k", "-5", "--symbolic-primitives"},
               2, "--k must lie in 2..1000");
  expect_error({"data", "gen", "--task", "map", "--out", data_, "--init", "3"}, 2,
               "--init applies to fold and scan, not map");
  expect_error(
      {"eval", "npi", "--model", model_, "--task", "map", "--length", "3", "--symbolic-primitives"},
      2, "--primitive is required for map");
  expect_error({"eval", "npi", "--model", model_, "--task", "map", "--length", "3", "--primitive",
                "double", "--symbolic-primitives", "--primitives", prims},
               2, "not both");
  // --program: what it needs and what it excludes.
  expect_error({"run", "--program", "map(double, xs)", "--input", "1"}, 2, "--models");
  expect_error({"run", "--program", "map(double, xs)", "--input", "1", "--models", dir_.path()}, 2,
               "--primitives (learned networks) or the symbolic primitives are required");
  expect_error({"run", "--program", "map(double, xs)", "--input", "1", "--models", dir_.path(),
                "--symbolic-primitives", "--init", "2"},
               2, "--init does not apply to a program");
  expect_error({"run", "--program", "map(double, xs)", "--input", "1", "--models", dir_.path(),
                "--symbolic-primitives", "--task", "map"},
               2, "no --task or --model");
  expect_error({"run", "--program", "map(double, xs)", "--input", "1;2", "--models", dir_.path(),
                "--symbolic-primitives"},
               2, "reads only xs, but --input has a ';' at column 2");
  expect_error(
      {"run", "--program", "xs", "--input", "1", "--models", dir_.path(), "--symbolic-primitives"},
      2, "applies no function");
  expect_error({"run", "--input", "1"}, 2, "--task and --model");
  expect_error({"train", "primitives", "--out", prims, "--add"}, 2, "--add needs the families");
  expect_error({"train", "primitives", "--out", prims, "--add", "--primitive", "div"}, 2,
               "no primitive library");
  EXPECT_TRUE(dir_.entries().empty()) << "usage errors write nothing";
}

TEST_F(CliTest, RuntimeErrorsExitWithOne) {
  // Missing files.
  expect_error({"run", "--model", model_, "--task", "addition", "--input", "1+2"}, 1, model_);
  expect_error({"eval", "npi", "--model", model_, "--task", "addition", "--length", "3"}, 1,
               model_);
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", model_}, 1, data_);

  make_model();
  // A model of another task.
  expect_error({"run", "--model", model_, "--task", "sort", "--input", "3,1,2"}, 1,
               "task 'addition'");
  expect_error({"eval", "npi", "--model", model_, "--task", "sort-recursive", "--length", "3"}, 1,
               "task 'addition'");
  // Data of another task.
  expect_error({"train", "npi", "--task", "sort", "--data", data_, "--out", dir_.file("s.pt")}, 1,
               "addition");

  // Corrupt files.
  const std::string bad_model = dir_.file("bad.pt");
  write_file(bad_model, "not a model at all\n");
  expect_error({"run", "--model", bad_model, "--task", "addition", "--input", "1+2"}, 1, bad_model);
  std::string bytes = read_file(model_);
  bytes[bytes.size() / 2] ^= 0x20;
  write_file(bad_model, bytes);
  expect_error({"run", "--model", bad_model, "--task", "addition", "--input", "1+2"}, 1, "corrupt");
  const std::string bad_data = dir_.file("bad.jsonl");
  write_file(bad_data, read_file(data_).substr(0, read_file(data_).size() / 2));
  expect_error(
      {"train", "npi", "--task", "addition", "--data", bad_data, "--out", dir_.file("x.pt")}, 1,
      bad_data);

  // A folder where a file belongs (it read as an empty file, or failed in the stream library
  // naming nothing), and one where the model is to go (it trained first, then failed).
  const std::string folder = dir_.file("folder.pt");
  std::filesystem::create_directory(folder);
  expect_error({"run", "--model", folder, "--task", "addition", "--input", "1+2"}, 1,
               "model file '" + folder + "' is a folder, not a file");
  expect_error({"train", "npi", "--task", "addition", "--data", folder, "--out", dir_.file("y.pt")},
               1, "data file '" + folder + "' is a folder, not a file");
  expect_error({"train", "npi", "--task", "addition", "--data", data_, "--out", folder}, 1,
               "cannot write '" + folder + "': it is a folder");
  expect_error({"train", "tbcnn", "--corpus", folder, "--out", dir_.file("t.pt")}, 1,
               "corpus file '" + folder + "' is a folder, not a file");
}

TEST_F(CliTest, AnOutputThatWouldDestroyAnInputIsAUsageError) {
  // Each of these ran and exited 0, the trace file becoming a model or metrics, the corpus the
  // vectors, a source file the corpus.
  expect_ok(
      {"data", "gen", "--task", "addition", "--out", data_, "--max-len", "2", "--per-length", "2"});
  const std::string traces = read_file(data_);
  const std::vector<std::string> train{"train",  "npi", "--task",  "addition",
                                       "--data", data_, "--steps", "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = train;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_error(with({"--out", data_}), 2, "--out '" + data_ + "' is the file --data reads");
  // Another spelling of the same path is the same file.
  const std::string dotted = dir_.path() + "/./" + std::filesystem::path(data_).filename().string();
  expect_error(with({"--out", dir_.file("m.pt"), "--metrics", dotted}), 2,
               "--metrics '" + dotted + "' is the file --data reads");
  expect_error(with({"--out", dir_.file("m.pt"), "--metrics", dir_.file("m.pt")}), 2,
               "--out and --metrics both name");
  expect_error(with({"--out", dir_.file("m.pt"), "--checkpoint", dir_.file("m.pt")}), 2,
               "--out and --checkpoint both name");
  EXPECT_EQ(read_file(data_), traces);
  expect_error(
      {"train", "tbcnn", "--corpus", dir_.file("c.corpus"), "--out", dir_.file("c.corpus")}, 2,
      "--out '" + dir_.file("c.corpus") + "' is the file --corpus reads");
  expect_error(
      {"train", "primitives", "--out", dir_.file("p.lib"), "--metrics", dir_.file("p.lib")}, 2,
      "--out and --metrics both name");
  expect_error({"eval", "tbcnn", "--model", dir_.file("t.pt"), "--corpus", dir_.file("c.corpus"),
                "--vectors", dir_.file("c.corpus")},
               2, "--vectors '" + dir_.file("c.corpus") + "' is the file --corpus reads");
  std::filesystem::create_directories(dir_.file("src/a"));
  write_file(dir_.file("src/a/f1.py"), "def f():\n    return 1\n");
  expect_error({"data", "code", "--lang", "python", "--src", dir_.file("src"), "--out",
                dir_.file("src/a/f1.py")},
               2, "is a source file of --src");
  EXPECT_EQ(read_file(dir_.file("src/a/f1.py")), "def f():\n    return 1\n");
  // Beside the class folders a corpus is never read as a source: allowed.
  expect_ok({"data", "code", "--lang", "python", "--src", dir_.file("src"), "--out",
             dir_.file("src/c.corpus")});
  // Benchmarks too: the JSON over the corpus it measures, or over the trace beside it.
  expect_error({"bench", "tbcnn", "--corpus", data_, "--json", data_}, 2,
               "engram: error: --json is the corpus file");
  expect_error({"bench", "memory", "--workload", "npi", "--json", dir_.file("b.json"), "--trace",
                dir_.file("b.json")},
               2, "engram: error: --trace is the file the JSON goes to");
  EXPECT_EQ(read_file(data_), traces);
  EXPECT_EQ(dir_.entries(), (std::set<std::string>{"addition.jsonl", "src"}));
}

TEST_F(CliTest, AFailedTrainLeavesNoFiles) {
  expect_ok(
      {"data", "gen", "--task", "addition", "--out", data_, "--max-len", "2", "--per-length", "2"});
  std::filesystem::create_directory(dir_.file("sub"));
  const auto before = dir_.entries();
  // Each case changes one flag of a run that works (CLI11 refuses a flag given twice, so the
  // flag is replaced, not repeated) and fails for its own reason: 2 for an invalid option, 1 for
  // a runtime failure.
  const std::vector<std::tuple<std::string, std::string, int>> failing{
      {"--data", dir_.file("absent.jsonl"), 1},
      {"--task", "sort", 1},  // traces of another task
      {"--steps", "0", 2},
      {"--lr", "-1", 2},
      {"--threads", "-2", 2},
      {"--out", dir_.file("no-such-dir/model.pt"), 1},
      {"--out", dir_.file("sub"), 1},  // a directory: the rename fails after the file was written
  };
  for (const auto& [flag, value, code] : failing) {
    std::vector<std::string> args{"train",   "npi",      "--task",    "addition", "--data",
                                  data_,     "--out",    model_,      "--steps",  "2",
                                  "--hidden", "8",       "--threads", "1",        "--lr",
                                  "0.002"};
    const auto at = std::find(args.begin(), args.end(), flag);
    ASSERT_NE(at, args.end()) << flag;
    *(at + 1) = value;
    const Outcome o = engram(args);
    EXPECT_EQ(o.code, code) << describe(args, o);
    EXPECT_EQ(dir_.entries(), before) << describe(args, o);
  }
}

}  // namespace
}  // namespace engram::cli
