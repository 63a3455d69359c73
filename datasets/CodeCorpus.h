#pragma once
/// \file
/// Corpora of parsed source files for code classification, in the POJ-104 layout: a directory with
/// one folder per class, each file in it one sample. Files are parsed with tree-sitter
/// (datasets/CodeTree.h) and split 60/20/20 into train/valid/test within each class,
/// deterministically (by a hash of the file's path, so adding a file moves no other). The node-type
/// vocabulary (the grammar's type names) is stored with the corpus, so a model trained on it maps
/// the types of any new file the same way.
///
/// Files that do not parse are kept with their ERROR nodes counted (or skipped with
/// `skip_errors`); non-UTF-8 and binary files are skipped with a warning; trees above `max_nodes`
/// are skipped and counted.
///
/// \code
///   using namespace engram::datasets;
///   CorpusOptions o;  o.language = Language::kPython;  o.src_dir = "poj/";
///   CodeCorpus corpus = build_corpus(o);          // throws InputError for an empty class folder
///   write_corpus("poj.corpus", corpus);           // atomic
///   CodeCorpus back = read_corpus("poj.corpus");  // FormatError if malformed
/// \endcode

#include "datasets/CodeTree.h"

#include <cstdint>
#include <string>
#include <vector>

namespace engram::datasets {

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };
std::string split_name(Split split);
/// "train", "valid", "test"; throws InputError otherwise.
Split parse_split(const std::string& name);
/// The split of a file, from a hash of its path relative to the class folder: 60/20/20.
Split split_of(const std::string& relative_path);

struct CorpusOptions {
  Language language = Language::kPython;
  std::string src_dir;
  long max_nodes = 20000;    ///< larger trees are skipped (0: no limit)
  bool skip_errors = false;  ///< skip files with parse errors instead of keeping them
};

struct CodeSample {
  std::string path;  ///< relative to the source directory, e.g. "json/decoder__scanstring.py"
  int label = 0;     ///< index into CodeCorpus::classes
  Split split = Split::kTrain;
  CodeTree tree;
};

/// What building the corpus met, for the user.
struct CorpusReport {
  long files = 0;                     ///< files seen with one of the language's suffixes
  long kept = 0;                      ///< samples in the corpus
  long with_errors = 0;               ///< kept samples whose tree has ERROR or MISSING nodes
  long error_nodes = 0;               ///< ERROR nodes over the kept samples
  long skipped_errors = 0;            ///< skipped for parse errors (skip_errors)
  long skipped_not_text = 0;          ///< skipped: binary or not UTF-8
  long skipped_too_large = 0;         ///< skipped: more than max_nodes nodes
  std::vector<std::string> warnings;  ///< one line per skipped file (the first 20)
};

struct CodeCorpus {
  Language language = Language::kPython;
  std::vector<std::string> classes;     ///< folder names, sorted
  std::vector<std::string> vocabulary;  ///< node-type names; a tree's type indexes it
  std::vector<CodeSample> samples;
  CorpusReport report;

  /// Indices of the samples in `split`.
  std::vector<std::size_t> indices(Split split) const;
};

/// Throws InputError for a missing directory, one without class folders, an empty class folder
/// (no file of the language), or an unknown language.
CodeCorpus build_corpus(const CorpusOptions& options);

/// JSON lines: a header {"format":"engram-corpus",...,"classes":[..],"vocabulary":[..]}, then a
/// sample per line {"path","label","split","type":[..],"parent":[..],"ident":{"node":"text"},
/// "errors":n}. Written atomically.
void write_corpus(const std::string& path, const CodeCorpus& corpus);
/// Throws std::runtime_error if missing, FormatError if malformed or of another grammar.
CodeCorpus read_corpus(const std::string& path);

/// The built-in real-code task: the functions of Python's standard library, one file each, in the
/// folder-per-class layout, labelled by top-level package.
struct StdlibOptions {
  std::string lib_dir = "/usr/lib/python3.11";
  std::string out_dir;
  int min_files = 3;        ///< a package needs this many .py files to be a class
  int min_functions = 150;  ///< and this many functions
  bool modules = false;     ///< write whole modules (one file each) instead of functions
};

struct StdlibReport {
  long files = 0;      ///< modules read (in packages, tests excluded)
  long functions = 0;  ///< functions in the classes' packages (written, unless modules)
  long modules = 0;    ///< modules written (modules only)
  std::vector<std::pair<std::string, long>> classes;  ///< package and the files written for it
  std::vector<std::string> too_small;                 ///< packages that are not classes
};

/// Writes out_dir/<package>/<module path>__<function>_L<line>.py for every function definition
/// (methods and nested functions included, dedented) in the packages of lib_dir, without the
/// test/ and tests/ folders, idlelib/, site-packages/ and dist-packages/. Top-level modules are no
/// package. With `modules`, writes out_dir/<package>/<module path>.py, each module of the same
/// classes whole (the masked-statement task's statements in the context of their file). Throws
/// InputError if lib_dir is missing or out_dir exists and is not empty; writes into
/// a temporary folder renamed into place at the end.
StdlibReport write_stdlib_functions(const StdlibOptions& options);

/// Whether build_corpus over `src_dir` would read `path` as a source: a file with one of the
/// language's suffixes inside a class folder (both paths compared made absolute and normal).
/// Files beside the class folders are never read.
bool corpus_reads(const std::string& src_dir, Language language, const std::string& path);

/// A tree of a file parsed outside any corpus, with its types mapped to `vocabulary` by name
/// (names it lacks map to the vocabulary's ERROR entry).
CodeTree remap_types(const CodeTree& tree, const std::vector<std::string>& vocabulary);

}  // namespace engram::datasets
