#include "datasets/CodeCorpus.h"

#include "common/AtomicFile.h"
#include "common/FileChecks.h"
#include "common/Hash.h"
#include "common/RemoveOnInterrupt.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

namespace engram::datasets {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kCorpusVersion = 1;
constexpr std::size_t kMaxWarnings = 20;

bool has_suffix(const std::string& name, const std::vector<std::string>& suffixes) {
  for (const auto& suffix : suffixes) {
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  }
  return false;
}

/// Child lists from parents (pre-order: every parent precedes its children).
void rebuild_children(CodeTree& tree) {
  const int n = tree.size();
  std::vector<int> count(n, 0);
  for (int i = 1; i < n; ++i) ++count[tree.parent[i]];
  tree.child_begin.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) tree.child_begin[i + 1] = tree.child_begin[i] + count[i];
  tree.child_list.assign(tree.child_begin[n], 0);
  std::vector<int> next(tree.child_begin.begin(), tree.child_begin.end() - 1);
  for (int i = 1; i < n; ++i) tree.child_list[next[tree.parent[i]]++] = i;
}

std::string read_bytes(const fs::path& path) {
  refuse_folder(path.string(), "source file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path.string() + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

/// A JSON number that must be an integer in [low, high]; FormatError otherwise.
long integer_in(const json& value, long low, long high, const char* what) {
  if (!value.is_number_integer()) throw FormatError(std::string(what) + " is not an integer");
  const auto v = value.get<std::int64_t>();
  if (v < low || v > high) throw FormatError(std::string(what) + " is out of range");
  return static_cast<long>(v);
}

}  // namespace

std::string split_name(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kValid:
      return "valid";
    case Split::kTest:
      return "test";
  }
  return "?";
}

Split parse_split(const std::string& name) {
  if (name == "train") return Split::kTrain;
  if (name == "valid") return Split::kValid;
  if (name == "test") return Split::kTest;
  throw InputError("unknown split '" + name + "' (known: train, valid, test)");
}

Split split_of(const std::string& relative_path) {
  const auto bucket = fnv1a(relative_path) % 10;
  return bucket < 6 ? Split::kTrain : bucket < 8 ? Split::kValid : Split::kTest;
}

std::vector<std::size_t> CodeCorpus::indices(Split split) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].split == split) out.push_back(i);
  }
  return out;
}

CodeCorpus build_corpus(const CorpusOptions& options) {
  if (options.max_nodes < 0) throw InvalidOption("max_nodes", "must be 0 (no limit) or more");
  const fs::path root(options.src_dir);
  std::error_code ec;
  if (options.src_dir.empty() || !fs::is_directory(root, ec)) {
    throw InputError("source directory '" + options.src_dir + "' does not exist");
  }
  CodeCorpus corpus;
  corpus.language = options.language;
  corpus.vocabulary = node_type_names(options.language);
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) corpus.classes.push_back(entry.path().filename().string());
  }
  std::sort(corpus.classes.begin(), corpus.classes.end());
  if (corpus.classes.empty()) {
    throw InputError("'" + options.src_dir +
                     "' has no class folders (expected one folder per class, one file per sample)");
  }
  const auto suffixes = language_suffixes(options.language);
  CorpusReport& report = corpus.report;
  auto warn = [&](const std::string& line) {
    if (report.warnings.size() < kMaxWarnings) report.warnings.push_back(line);
  };
  for (std::size_t label = 0; label < corpus.classes.size(); ++label) {
    const fs::path dir = root / corpus.classes[label];
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file() && has_suffix(entry.path().filename().string(), suffixes))
        files.push_back(entry.path());
    }
    if (files.empty()) {
      throw InputError("class folder '" + dir.string() + "' has no " +
                       language_name(options.language) + " files");
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      ++report.files;
      const std::string relative = fs::relative(file, root).string();
      const std::string bytes = read_bytes(file);
      if (!is_text(bytes)) {
        ++report.skipped_not_text;
        warn("skipped " + relative + ": binary or not UTF-8");
        continue;
      }
      CodeSample sample;
      try {
        sample.tree = parse_code(options.language, bytes, options.max_nodes);
      } catch (const TooManyNodes&) {
        ++report.skipped_too_large;
        warn("skipped " + relative + ": more than " + std::to_string(options.max_nodes) + " nodes");
        continue;
      }
      const bool errors = sample.tree.error_nodes + sample.tree.missing_nodes > 0;
      if (errors && options.skip_errors) {
        ++report.skipped_errors;
        warn("skipped " + relative + ": parse errors");
        continue;
      }
      report.with_errors += errors ? 1 : 0;
      report.error_nodes += sample.tree.error_nodes;
      sample.path = relative;
      sample.label = static_cast<int>(label);
      sample.split = split_of(fs::relative(file, dir).string());
      corpus.samples.push_back(std::move(sample));
      ++report.kept;
    }
  }
  return corpus;
}

void write_corpus(const std::string& path, const CodeCorpus& corpus) {
  AtomicFile file(path, /*binary=*/false);
  auto& out = file.stream();
  json header{{"format", "engram-corpus"},
              {"version", kCorpusVersion},
              {"language", language_name(corpus.language)},
              {"count", corpus.samples.size()},
              {"classes", corpus.classes},
              {"vocabulary", corpus.vocabulary},
              {"report",
               {{"files", corpus.report.files},
                {"kept", corpus.report.kept},
                {"with_errors", corpus.report.with_errors},
                {"error_nodes", corpus.report.error_nodes},
                {"skipped_errors", corpus.report.skipped_errors},
                {"skipped_not_text", corpus.report.skipped_not_text},
                {"skipped_too_large", corpus.report.skipped_too_large}}}};
  out << header.dump() << "\n";
  for (const auto& s : corpus.samples) {
    json ident = json::object();
    for (int i = 0; i < s.tree.size(); ++i) {
      if (!s.tree.identifier[i].empty()) ident[std::to_string(i)] = s.tree.identifier[i];
    }
    json line{{"path", s.path},
              {"label", s.label},
              {"split", split_name(s.split)},
              {"type", s.tree.type},
              {"parent", s.tree.parent},
              {"ident", ident},
              {"errors", s.tree.error_nodes},
              {"missing", s.tree.missing_nodes}};
    out << line.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  file.commit();
}

CodeCorpus read_corpus(const std::string& path) {
  refuse_folder(path, "corpus file");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("corpus file '" + path + "' not found");
  CodeCorpus corpus;
  std::string line;
  long number = 0;
  auto fail = [&](const std::string& what) -> FormatError {
    return FormatError("'" + path + "' line " + std::to_string(number) + ": " + what);
  };
  try {
    ++number;
    if (!std::getline(in, line)) throw fail("empty file, not a corpus");
    const json header = json::parse(line);
    if (header.value("format", "") != "engram-corpus") throw fail("not an engram corpus");
    if (header.at("version").get<int>() != kCorpusVersion) throw fail("unsupported version");
    corpus.language = parse_language(header.at("language").get<std::string>());
    corpus.classes = header.at("classes").get<std::vector<std::string>>();
    corpus.vocabulary = header.at("vocabulary").get<std::vector<std::string>>();
    const auto& r = header.at("report");
    constexpr long kBig = 1L << 40;
    corpus.report.files = integer_in(r.at("files"), 0, kBig, "report.files");
    corpus.report.kept = integer_in(r.at("kept"), 0, kBig, "report.kept");
    corpus.report.with_errors = integer_in(r.at("with_errors"), 0, kBig, "report.with_errors");
    corpus.report.error_nodes = integer_in(r.at("error_nodes"), 0, kBig, "report.error_nodes");
    corpus.report.skipped_errors =
        integer_in(r.at("skipped_errors"), 0, kBig, "report.skipped_errors");
    corpus.report.skipped_not_text =
        integer_in(r.at("skipped_not_text"), 0, kBig, "report.skipped_not_text");
    corpus.report.skipped_too_large =
        integer_in(r.at("skipped_too_large"), 0, kBig, "report.skipped_too_large");
    const auto count = static_cast<std::size_t>(integer_in(header.at("count"), 0, kBig, "count"));
    const int vocab = static_cast<int>(corpus.vocabulary.size());
    while (std::getline(in, line)) {
      ++number;
      const json j = json::parse(line);
      CodeSample s;
      s.path = j.at("path").get<std::string>();
      s.label = static_cast<int>(
          integer_in(j.at("label"), 0, static_cast<long>(corpus.classes.size()) - 1, "label"));
      s.split = parse_split(j.at("split").get<std::string>());
      s.tree.language = corpus.language;
      for (const auto& t : j.at("type"))
        s.tree.type.push_back(static_cast<int>(integer_in(t, 0, vocab - 1, "node type")));
      for (const auto& p : j.at("parent"))
        s.tree.parent.push_back(static_cast<int>(integer_in(p, -1, 1L << 30, "parent")));
      s.tree.error_nodes = static_cast<int>(integer_in(j.at("errors"), 0, 1L << 30, "errors"));
      s.tree.missing_nodes = static_cast<int>(integer_in(j.at("missing"), 0, 1L << 30, "missing"));
      const int n = s.tree.size();
      if (s.label < 0 || s.label >= static_cast<int>(corpus.classes.size()))
        throw fail("label out of range");
      if (n == 0 || static_cast<int>(s.tree.parent.size()) != n || s.tree.parent[0] != -1)
        throw fail("malformed tree");
      for (int i = 0; i < n; ++i) {
        if (s.tree.type[i] < 0 || s.tree.type[i] >= vocab) throw fail("node type out of range");
        if (i > 0 && (s.tree.parent[i] < 0 || s.tree.parent[i] >= i))
          throw fail("a parent does not precede its child");
      }
      s.tree.identifier.assign(n, "");
      for (const auto& [key, text] : j.at("ident").items()) {
        const bool digits =
            !key.empty() && key.size() <= 9 &&
            std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
        const int i = digits ? std::stoi(key) : -1;
        if (i < 0 || i >= n) throw fail("identifier of a node out of range");
        s.tree.identifier[i] = text.get<std::string>();
      }
      s.tree.start.assign(n, {});
      s.tree.end.assign(n, {});
      rebuild_children(s.tree);
      corpus.samples.push_back(std::move(s));
    }
    if (corpus.samples.size() != count) {
      throw fail("holds " + std::to_string(corpus.samples.size()) + " samples, its header says " +
                 std::to_string(count) + " (truncated?)");
    }
  } catch (const json::exception& e) {
    throw fail(std::string("malformed JSON: ") + e.what());
  } catch (const FormatError& e) {
    const std::string what = e.what();
    if (what.rfind("'" + path + "'", 0) == 0) throw;
    throw fail(what);
  } catch (const InputError& e) {
    throw fail(e.what());
  }
  return corpus;
}

StdlibReport write_stdlib_functions(const StdlibOptions& options) {
  const fs::path lib(options.lib_dir);
  std::error_code ec;
  if (!fs::is_directory(lib, ec)) {
    throw InputError("Python library directory '" + options.lib_dir + "' does not exist");
  }
  if (options.out_dir.empty()) throw InvalidOption("out_dir", "is required");
  if (options.min_files < 1) throw InvalidOption("min_files", "must be at least 1");
  if (options.min_functions < 1) throw InvalidOption("min_functions", "must be at least 1");
  fs::path out = fs::path(options.out_dir).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "gen/" -> "gen"
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec))) {
    throw InputError("'" + options.out_dir + "' exists and is not an empty folder");
  }
  // Its folder before the library is read, not a filesystem error after.
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    throw std::runtime_error("cannot create '" + options.out_dir + "': '" + parent.string() +
                             "' is not a folder");
  static const std::vector<std::string> excluded{"test",          "tests",         "idlelib",
                                                 "site-packages", "dist-packages", "__pycache__"};
  auto is_excluded = [&](const std::string& name) {
    return std::find(excluded.begin(), excluded.end(), name) != excluded.end();
  };
  struct Function {
    std::string name, text;
  };
  std::map<std::string, std::vector<Function>> by_package;
  std::map<std::string, long> files_of;
  std::map<std::string, std::vector<Function>> modules_of;  // options.modules: whole files
  StdlibReport report;
  std::vector<fs::path> packages;
  for (const auto& entry : fs::directory_iterator(lib)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && !is_excluded(name) && name.find('-') == std::string::npos &&
        fs::exists(entry.path() / "__init__.py"))
      packages.push_back(entry.path());
  }
  std::sort(packages.begin(), packages.end());
  for (const auto& package : packages) {
    const std::string pkg = package.filename().string();
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(package);
         it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory() && is_excluded(it->path().filename().string())) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && it->path().extension() == ".py") files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const std::string source = read_bytes(file);
      if (!is_text(source)) continue;
      ++files_of[pkg];
      ++report.files;
      const CodeTree tree = parse_code(Language::kPython, source);
      std::vector<std::size_t> line_start{0};
      for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\n') line_start.push_back(i + 1);
      }
      std::string module = fs::relative(file, lib).string();
      module = module.substr(0, module.size() - 3);
      std::replace(module.begin(), module.end(), '/', '.');
      if (options.modules) modules_of[pkg].push_back({module, source});
      for (int i = 0; i < tree.size(); ++i) {
        if (node_type_name(Language::kPython, tree.type[i]) != "function_definition") continue;
        std::string name = "function";
        for (int c : tree.children(i)) {
          if (!tree.identifier[c].empty()) {
            name = tree.identifier[c];
            break;
          }
        }
        const std::size_t from = line_start[tree.start[i].line] + tree.start[i].column;
        const std::size_t to = line_start[tree.end[i].line] + tree.end[i].column;
        // Dedent by the definition's column, so methods and nested functions parse alone.
        const std::string indent(static_cast<std::size_t>(tree.start[i].column), ' ');
        std::string text;
        std::size_t pos = from;
        bool first = true;
        while (pos < to) {
          const std::size_t eol = std::min(source.find('\n', pos), to);
          std::string line_text = source.substr(pos, eol - pos);
          if (!first && line_text.compare(0, indent.size(), indent) == 0)
            line_text = line_text.substr(indent.size());
          text += line_text + "\n";
          first = false;
          pos = eol + 1;
        }
        by_package[pkg].push_back(
            {module + "__" + name + "_L" + std::to_string(tree.start[i].line + 1), text});
      }
    }
  }
  const fs::path staging = out.string() + ".tmp.partial";
  fs::remove_all(staging, ec);
  const RemoveOnInterrupt remove_staging(staging.string(), /*folder=*/true, out.string());
  for (const auto& [pkg, functions] : by_package) {
    if (files_of[pkg] < options.min_files ||
        static_cast<long>(functions.size()) < options.min_functions) {
      report.too_small.push_back(pkg);
      continue;
    }
    fs::create_directories(staging / pkg, ec);
    if (ec) {
      fs::remove_all(staging, ec);
      throw std::runtime_error("cannot create '" + (staging / pkg).string() + "'");
    }
    const auto& written = options.modules ? modules_of[pkg] : functions;
    // Two sources can give one name (module m's g__h and module m__g's h; pk/sub/q.py and
    // pk/sub.q.py): the later ones get _2, _3, ... rather than overwrite the first.
    std::set<std::string> taken;
    for (const auto& f : written) {
      std::string name = f.name;
      for (int n = 2; !taken.insert(name).second; ++n) name = f.name + "_" + std::to_string(n);
      std::ofstream file(staging / pkg / (name + ".py"), std::ios::binary);
      file << f.text;
      file.close();
      if (!file) {
        fs::remove_all(staging, ec);
        throw std::runtime_error("cannot write '" + (staging / pkg / name).string() + ".py'");
      }
    }
    report.classes.emplace_back(pkg, static_cast<long>(written.size()));
    report.functions += static_cast<long>(functions.size());
    if (options.modules) report.modules += static_cast<long>(written.size());
  }
  if (report.classes.empty()) {
    fs::remove_all(staging, ec);
    throw InputError("no package of '" + options.lib_dir + "' has " +
                     std::to_string(options.min_files) + " files and " +
                     std::to_string(options.min_functions) + " functions");
  }
  fs::remove(out, ec);  // an empty folder, if any
  fs::rename(staging, out);
  return report;
}

bool corpus_reads(const std::string& src_dir, Language language, const std::string& path) {
  const fs::path rest = normal_path(path).lexically_relative(normal_path(src_dir));
  if (rest.empty() || *rest.begin() == ".." || std::distance(rest.begin(), rest.end()) < 2)
    return false;  // outside, or beside the class folders
  return has_suffix(rest.filename().string(), language_suffixes(language));
}

CodeTree remap_types(const CodeTree& tree, const std::vector<std::string>& vocabulary) {
  std::map<std::string, int> index;
  for (std::size_t i = 0; i < vocabulary.size(); ++i)
    index.emplace(vocabulary[i], static_cast<int>(i));
  const auto error = index.find("ERROR");
  const int fallback = error == index.end() ? 0 : error->second;
  CodeTree out = tree;
  for (int& t : out.type) {
    const auto it = index.find(node_type_name(tree.language, t));
    t = it == index.end() ? fallback : it->second;
  }
  return out;
}

}  // namespace engram::datasets
