#include "datasets/TraceFile.h"

#include "common/AtomicFile.h"
#include "datasets/ListTask.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace engram::datasets {
namespace {

using nlohmann::json;
using testing::read_file;
using testing::split_lines;
using testing::TempDir;
using testing::write_file;

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

void expect_same_traces(const TraceSet& a, const TraceSet& b) {
  ASSERT_EQ(a.traces.size(), b.traces.size());
  for (std::size_t i = 0; i < a.traces.size(); ++i) {
    EXPECT_TRUE(a.traces[i] == b.traces[i]) << "trace " << i << " of '" << a.traces[i].input << "'";
  }
}

void expect_same_set(const TraceSet& a, const TraceSet& b) {
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.options.min_length, b.options.min_length);
  EXPECT_EQ(a.options.max_length, b.options.max_length);
  EXPECT_EQ(a.options.per_length, b.options.per_length);
  EXPECT_EQ(a.options.traces, b.options.traces);
  EXPECT_EQ(a.options.seed, b.options.seed);
  expect_same_traces(a, b);
}

TEST(GenerateTraces, PerLengthTracesOfEveryLengthDeterministicInTheSeed) {
  const Task& task = task_by_name("addition");
  const GenerateOptions options{2, 5, 3, 42};
  const TraceSet set = generate_traces(task, options);
  EXPECT_EQ(set.task, "addition");
  ASSERT_EQ(set.traces.size(), 12u);
  for (std::size_t i = 0; i < set.traces.size(); ++i) {
    const auto& trace = set.traces[i];
    EXPECT_EQ(task.make_environment(trace.input)->length(), 2 + static_cast<int>(i / 3));
    EXPECT_EQ(trace.output, task.solve(trace.input));
  }
  const TraceSet again = generate_traces(task, options);
  expect_same_set(set, again);
  const TraceSet other = generate_traces(task, {2, 5, 3, 43});
  bool differs = false;
  for (std::size_t i = 0; i < set.traces.size(); ++i) {
    differs |= set.traces[i].input != other.traces[i].input;
  }
  EXPECT_TRUE(differs) << "another seed gives other problems";
}

TEST(GenerateTraces, TracesInAllAreSpreadEvenlyOverTheLengths) {
  // 7 over the 5 lengths 1..5: no two lengths more than one apart, 7 in all.
  GenerateOptions options{1, 5, 32, 3};
  options.traces = 7;
  EXPECT_EQ(traces_per_length(options), (std::vector<int>{1, 1, 2, 1, 2}));
  options.traces = 3;  // fewer than the lengths: every other length or so
  EXPECT_EQ(traces_per_length(options), (std::vector<int>{0, 1, 0, 1, 1}));
  const Task& task = task_by_name("addition");
  options.traces = 7;
  const TraceSet set = generate_traces(task, options);
  ASSERT_EQ(set.traces.size(), 7u);
  EXPECT_EQ(task.make_environment(set.traces.back().input)->length(), 5);
  // A multiple of the lengths draws the same traces as that many per length.
  options.traces = 10;
  const GenerateOptions per_length{1, 5, 2, 3};
  expect_same_traces(generate_traces(task, options), generate_traces(task, per_length));
  options.traces = -1;
  ENGRAM_EXPECT_THROW_WITH(generate_traces(task, options), UsageError, "traces");
}

TEST(TraceFile, TheCountTracesWereDrawnByIsWrittenAndReadBack) {
  TempDir dir;
  const std::string path = dir.path() + "/t.jsonl";
  GenerateOptions options{1, 4, 32, 9};
  options.traces = 6;
  write_trace_file(path, generate_traces(task_by_name("addition"), options));
  const json header = json::parse(split_lines(read_file(path)).front());
  EXPECT_EQ(header.at("traces"), 6);
  EXPECT_FALSE(header.contains("per_length"));
  const TraceSet back = read_trace_file(path);
  EXPECT_EQ(back.options.traces, 6);
  EXPECT_EQ(back.traces.size(), 6u);
}

TEST(GenerateTraces, InvalidOptionsAreUsageErrors) {
  const Task& sort = task_by_name("sort");
  ENGRAM_EXPECT_THROW_WITH(generate_traces(sort, {1, 4, 2, 1}), UsageError, "at least 2");
  EXPECT_THROW(generate_traces(sort, {4, 3, 2, 1}), UsageError);
  EXPECT_THROW(generate_traces(sort, {2, 3, 0, 1}), UsageError);
}

class TraceFileTest : public ::testing::Test {
 protected:
  /// A valid file of `task` traces; returns its lines.
  std::vector<std::string> write_valid(const std::string& task_name = "addition") {
    set_ = generate_traces(task_by_name(task_name), {2, 3, 2, 7});
    write_trace_file(path_, set_);
    return split_lines(read_file(path_));
  }
  /// Expects read_trace_file to throw FormatError whose message holds `needle`.
  void expect_format_error(const std::string& content, const std::string& needle) {
    write_file(path_, content);
    ENGRAM_EXPECT_THROW_WITH(read_trace_file(path_), FormatError, needle);
    ENGRAM_EXPECT_THROW_WITH(read_trace_file(path_), FormatError, path_);
  }

  TempDir dir_;
  std::string path_ = dir_.file("traces.jsonl");
  TraceSet set_;
};

TEST_F(TraceFileTest, RoundTripGivesBackTheSameTraces) {
  for (const std::string task : task_names()) {
    SCOPED_TRACE(task);
    write_valid(task);
    expect_same_set(read_trace_file(path_), set_);
    EXPECT_EQ(dir_.entries(), std::set<std::string>{"traces.jsonl"}) << "no temporary files";
  }
}

TEST_F(TraceFileTest, FirstLineIsTheHeaderThenOneTracePerLine) {
  const auto lines = write_valid();
  ASSERT_EQ(lines.size(), 1 + set_.traces.size());
  const json header = json::parse(lines[0]);
  EXPECT_EQ(header.at("format"), "engram-traces");
  EXPECT_EQ(header.at("version"), 1);
  EXPECT_EQ(header.at("task"), "addition");
  EXPECT_EQ(header.at("count"), set_.traces.size());
  const json first = json::parse(lines[1]);
  EXPECT_EQ(first.at("input"), set_.traces[0].input);
  EXPECT_EQ(first.at("output"), set_.traces[0].output);
  EXPECT_EQ(first.at("invocations").size(), set_.traces[0].invocations.size());
}

TEST_F(TraceFileTest, BlankLinesAreIgnored) {
  auto lines = write_valid();
  lines.insert(lines.begin() + 2, "");
  lines.push_back("");
  write_file(path_, join_lines(lines));
  expect_same_set(read_trace_file(path_), set_);
}

TEST_F(TraceFileTest, MissingFileIsARuntimeErrorNamingIt) {
  ENGRAM_EXPECT_THROW_WITH(read_trace_file(path_), std::runtime_error, path_);
}

TEST_F(TraceFileTest, NotJson) {
  expect_format_error("hello world\n", "not valid JSON");
  expect_format_error("", "empty file");
}

TEST_F(TraceFileTest, WrongHeader) {
  auto lines = write_valid();
  expect_format_error("{\"format\":\"something-else\",\"version\":1}\n",
                      "not an engram trace file");
  expect_format_error("[1,2,3]\n", "not an engram trace file");
  // A trace line where the header should be.
  expect_format_error(join_lines({lines[1], lines[2]}), "not an engram trace file");
  json header = json::parse(lines[0]);
  header["version"] = 2;
  lines[0] = header.dump();
  expect_format_error(join_lines(lines), "version 2");
}

TEST_F(TraceFileTest, HeaderFieldsOfTheWrongTypeOrMissing) {
  const auto lines = write_valid();
  const json header = json::parse(lines[0]);
  auto with = [&](const char* key, const json& value) {
    json h = header;
    if (value.is_discarded()) {
      h.erase(key);
    } else {
      h[key] = value;
    }
    auto copy = lines;
    copy[0] = h.dump();
    return join_lines(copy);
  };
  const json missing(json::value_t::discarded);
  expect_format_error(with("version", missing), "version");
  expect_format_error(with("version", "1"), "version");
  expect_format_error(with("task", 5), "task");
  expect_format_error(with("count", "many"), "count");
  expect_format_error(with("seed", "x"), "seed");
}

TEST_F(TraceFileTest, UnknownTask) {
  auto lines = write_valid();
  json header = json::parse(lines[0]);
  header["task"] = "multiply";
  lines[0] = header.dump();
  expect_format_error(join_lines(lines), "unknown task 'multiply'");
}

TEST_F(TraceFileTest, TracesOfAnotherTaskDoNotValidate) {
  // Sort traces under an addition header: 3 observation slots instead of 4.
  const auto sort_lines = write_valid("sort");
  auto lines = write_valid("addition");
  lines[1] = sort_lines[1];
  expect_format_error(join_lines(lines), ":2:");
}

TEST_F(TraceFileTest, TruncatedFileIsACountMismatch) {
  auto lines = write_valid();
  lines.pop_back();
  expect_format_error(join_lines(lines), "truncated");
  // Cut in the middle of the last line: that line is not JSON.
  const std::string content = read_file(path_);
  expect_format_error(content.substr(0, content.size() - 20), "not valid JSON");
  // Only the header.
  expect_format_error(lines[0] + "\n", "truncated");
}

TEST_F(TraceFileTest, HeaderWithZeroCountAndNoTraces) {
  auto lines = write_valid();
  json header = json::parse(lines[0]);
  header["count"] = 0;
  expect_format_error(header.dump() + "\n", "no traces");
}

TEST_F(TraceFileTest, OutOfRangeObservationNamesTheLine) {
  auto lines = write_valid();
  json trace = json::parse(lines[2]);
  trace["invocations"][0][4][0][0] = 11;  // observation slot 0 has 11 values: 0..10
  lines[2] = trace.dump();
  expect_format_error(join_lines(lines), ":3:");
  expect_format_error(join_lines(lines), "observation value 11 outside [0, 11)");
}

TEST_F(TraceFileTest, AnInputOutsideTheTasksDomainIsTheFilesErrorNamingTheLine) {
  // MAP traces over 0..19 (data gen --k 20) read as map's default domain 0..9: the first input
  // with a value above 9 is named with its line, as a format error (exit 1), where training
  // reported a usage error (exit 2) naming no file.
  Binding b;
  b.primitive = make_symbolic_primitive(parse_primitive("double"), 20);
  const auto map20 = bind_task("map", b);
  TraceSet set;
  set.task = "map";
  set.options = {1, 1, 1, 1};
  set.traces.push_back(map20->teach("4"));
  set.traces.push_back(map20->teach("17"));
  write_trace_file(path_, set);
  ENGRAM_EXPECT_THROW_WITH(read_trace_file(path_), FormatError, path_ + ":3: input '17'");
  ENGRAM_EXPECT_THROW_WITH(read_trace_file(path_), FormatError, "outside the domain 0..9");
}

TEST_F(TraceFileTest, OtherMalformedTraces) {
  const auto valid = write_valid();
  auto edit = [&](auto change) {
    auto lines = valid;
    json trace = json::parse(lines[1]);
    change(trace);
    lines[1] = trace.dump();
    return join_lines(lines);
  };
  expect_format_error(edit([](json& t) { t.erase("output"); }), "no 'output'");
  expect_format_error(edit([](json& t) { t["input"] = 5; }), "must be strings");
  expect_format_error(edit([](json& t) { t["invocations"] = json::array(); }), "non-empty");
  expect_format_error(edit([](json& t) { t["invocations"][0][0] = 99; }), "program 99");
  expect_format_error(edit([](json& t) { t["invocations"][0][0] = 4; }), "ACT");
  expect_format_error(edit([](json& t) { t["invocations"][0][1] = 10; }), "argument 10");
  expect_format_error(edit([](json& t) { t["invocations"][0][4][0][0] = "5"; }), "not an integer");
  expect_format_error(edit([](json& t) { t["invocations"][0][4][0].erase(0); }),
                      "wrong number of fields");
  expect_format_error(edit([](json& t) { t["invocations"][0][4][0][5] = 99; }), "callee 99");
  expect_format_error(edit([](json& t) { t["invocations"][0][4] = json::array(); }), "no steps");
  expect_format_error(edit([](json& t) { t["invocations"].erase(t["invocations"].size() - 1); }),
                      "does not match");
  expect_format_error(edit([](json& t) {
                        auto& steps = t["invocations"][0][4];
                        steps.erase(steps.size() - 1);
                      }),
                      "return step");
  expect_format_error(edit([](json& t) { t = json::array({1, 2}); }), "JSON object");
}

TEST_F(TraceFileTest, AFailedWriteLeavesNoFile) {
  const std::string bad = dir_.file("no-such-dir/traces.jsonl");
  EXPECT_THROW(write_trace_file(bad, generate_traces(task_by_name("addition"), {1, 1, 1, 1})),
               std::runtime_error);
  EXPECT_TRUE(dir_.entries().empty());
}

}  // namespace
}  // namespace engram::datasets
