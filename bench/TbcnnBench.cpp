#include "bench/TbcnnBench.h"

#include "bench/BenchSupport.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "common/FileChecks.h"
#include "datasets/CodeTree.h"
#include "memory/CudaMemoryTracker.h"
#include "memory/MemoryTracker.h"
#include "tbcnn/Tbcnn.h"
#include "trainer/Device.h"

#include <tree_sitter/api.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

extern "C" {
const TSLanguage* tree_sitter_python(void);
const TSLanguage* tree_sitter_c(void);
const TSLanguage* tree_sitter_cpp(void);
}

namespace engram::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

/// The text files of `language` below `dir`, each read whole; `paths`: where each came from.
std::vector<std::string> read_sources(const std::string& dir, datasets::Language language,
                                      std::vector<std::filesystem::path>& paths) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InvalidOption("src_dir", "'" + dir + "' is not a directory");
  const auto suffixes = datasets::language_suffixes(language);
  paths.clear();
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool match = std::any_of(suffixes.begin(), suffixes.end(), [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    });
    if (entry.is_regular_file() && match) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> sources;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (datasets::is_text(buffer.str())) sources.push_back(buffer.str());
  }
  if (sources.empty())
    throw InvalidOption("src_dir", "'" + dir + "' has no source files of the language");
  return sources;
}

const TSLanguage* grammar(datasets::Language language) {
  switch (language) {
    case datasets::Language::kPython:
      return tree_sitter_python();
    case datasets::Language::kC:
      return tree_sitter_c();
    case datasets::Language::kCpp:
      return tree_sitter_cpp();
  }
  return nullptr;
}

/// Seconds of the fastest of `repeats` passes of `pass`.
template <typename F>
double fastest(int repeats, F pass) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    pass();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

}  // namespace

void run_tbcnn_bench(const TbcnnBenchOptions& options, std::ostream& out) {
  if (options.corpus_path.empty()) throw InvalidOption("corpus_path", "is required");
  if (options.steps < 1) throw InvalidOption("steps", "must be at least 1");
  if (options.repeats < 1) throw InvalidOption("repeats", "must be at least 1");
  const c10::Device device = trainer::resolve_device(options.device);  // before any work
  if (same_file(options.json_path, options.corpus_path))
    throw InvalidOption("json_path", "is the corpus file: writing it would destroy the corpus");
  if (!options.json_path.empty()) check_writable(options.json_path);  // fail before the work
  const auto language = datasets::parse_language(options.language);
  std::vector<std::filesystem::path> source_paths;
  const auto sources = read_sources(options.src_dir, language, source_paths);
  for (const auto& p : source_paths)
    if (same_file(options.json_path, p.string()))
      throw InvalidOption("json_path", "'" + options.json_path + "' is a source file of --src '" +
                                           options.src_dir + "': writing it would destroy it");
  std::size_t bytes = 0;
  for (const auto& s : sources) bytes += s.size();

  // Raw tree-sitter: parse and free, nothing else.
  TSParser* parser = ts_parser_new();
  ts_parser_set_language(parser, grammar(language));
  const double raw_seconds = fastest(options.repeats, [&] {
    for (const auto& s : sources) {
      TSTree* tree =
          ts_parser_parse_string(parser, nullptr, s.data(), static_cast<uint32_t>(s.size()));
      if (tree == nullptr) throw std::runtime_error("tree-sitter did not parse a file");
      ts_tree_delete(tree);
    }
  });
  ts_parser_delete(parser);
  // Engram's front end: the same parse plus the compact tree (named nodes, spans, identifiers).
  long engram_nodes = 0;
  const double engram_seconds = fastest(options.repeats, [&] {
    engram_nodes = 0;
    for (const auto& s : sources) engram_nodes += datasets::parse_code(language, s).size();
  });
  const double mb = static_cast<double>(bytes) / 1e6;

  // Training throughput and peak memory: host memory's on the CPU, the device's on CUDA.
  auto& tracker = memory::MemoryTracker::install();
  memory::CudaMemoryTracker* gpu =
      device.is_cuda() ? &memory::CudaMemoryTracker::install(device.index()) : nullptr;
  tracker.reset_peak();
  if (gpu != nullptr) gpu->reset_peak();
  const auto before = gpu != nullptr ? gpu->live_bytes() : tracker.live_bytes();
  ScratchDir dir("bench-tbcnn");
  tbcnn::TrainTbcnnOptions t = tbcnn::train_defaults(options.model);  // as `engram train tbcnn`
  t.corpus_path = options.corpus_path;
  t.out_path = dir.file("model.pt");
  t.training.steps = options.steps;
  t.training.batch = options.batch;
  t.training.threads = options.threads;
  t.training.seed = options.seed;
  t.training.device = options.device;
  const auto trained = tbcnn::train_tbcnn(t);
  const auto peak = (gpu != nullptr ? gpu->peak_bytes() : tracker.peak_bytes()) - before;

  json report{{"benchmark", "tbcnn"},
              {"machine", machine_json()},
              {"versions", versions_json()},
              {"config",
               {{"src", options.src_dir},
                {"language", options.language},
                {"files", sources.size()},
                {"bytes", bytes},
                {"corpus", options.corpus_path},
                {"model", options.model},
                {"steps", options.steps},
                {"batch", options.batch},
                {"threads", options.threads},
                {"device", trainer::describe_device(device)},
                {"repeats", options.repeats},
                {"seed", options.seed}}},
              {"parse",
               {{"raw_tree_sitter_mb_per_s", mb / raw_seconds},
                {"engram_mb_per_s", mb / engram_seconds},
                {"engram_over_raw_time", engram_seconds / raw_seconds},
                {"raw_seconds", raw_seconds},
                {"engram_seconds", engram_seconds},
                {"engram_named_nodes", engram_nodes}}},
              {"train",
               {{"trees_per_s", trained.trees_per_second},
                {"nodes_per_s", trained.nodes_per_second},
                {"seconds", trained.seconds},
                {"examples", trained.examples},
                {"peak_bytes", peak},
                {"peak_memory", device.is_cuda() ? "device" : "host"}}}};
  {
    AtomicFile file(options.json_path);
    file.stream() << report.dump(2) << "\n";
    file.commit();
  }
  out << "parse " << sources.size() << " files, " << fixed(mb, 1) << " MB: raw tree-sitter "
      << fixed(mb / raw_seconds, 2) << " MB/s, engram front end " << fixed(mb / engram_seconds, 2)
      << " MB/s (" << fixed(engram_seconds / raw_seconds, 2) << "x the time)\n"
      << "train " << options.model << ": " << fixed(trained.trees_per_second, 1) << " trees/s, "
      << fixed(trained.nodes_per_second, 0) << " nodes/s, peak " << fixed(peak / 1e6, 1)
      << " MB\nwrote " << options.json_path << "\n";
}

}  // namespace engram::bench
