// engram data code: a folder-per-class source tree parsed into a corpus.
#include "cli/Command.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "datasets/CodeCorpus.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {
namespace {

struct DataCode {
  datasets::CorpusOptions corpus;
  std::string language, out;
};

int run_data_code(DataCode& c, std::ostream& out, std::ostream& err) {
  c.corpus.language = datasets::parse_language(c.language);
  if (!c.corpus.src_dir.empty() &&
      datasets::corpus_reads(c.corpus.src_dir, c.corpus.language, c.out))
    throw UsageError("--out '" + c.out + "' is a source file of --src '" + c.corpus.src_dir +
                     "': the corpus would replace or join the sources it is made from");
  check_writable(c.out);  // before parsing every source, not after
  const auto corpus = datasets::build_corpus(c.corpus);
  datasets::write_corpus(c.out, corpus);
  const auto& r = corpus.report;
  for (const auto& w : r.warnings) err << "engram: warning: " << w << "\n";
  out << "wrote " << r.kept << " " << c.language << " samples in " << corpus.classes.size()
      << " classes (train " << corpus.indices(datasets::Split::kTrain).size() << ", valid "
      << corpus.indices(datasets::Split::kValid).size() << ", test "
      << corpus.indices(datasets::Split::kTest).size() << ") to " << c.out << "; "
      << r.with_errors << " with parse errors (" << r.error_nodes << " ERROR nodes), skipped "
      << r.skipped_errors << " for errors, " << r.skipped_not_text << " not text, "
      << r.skipped_too_large << " above --max-nodes\n";
  return 0;
}

}  // namespace

Command register_data_code(CLI::App& parent) {
  auto c = std::make_shared<DataCode>();
  CLI::App* code = parent.add_subcommand(
      "code",
      "Parse a folder-per-class source tree into a corpus (tree-sitter ASTs, 60/20/20 split)");
  code->add_option("--lang", c->language, "Language: python, c, cpp")->required();
  code->add_option("--src", c->corpus.src_dir,
                   "Folder with one folder per class, one file per sample")
      ->required();
  code->add_option("--out", c->out, "Corpus file to write")->required();
  code->add_option("--max-nodes", c->corpus.max_nodes,
                   "Skip (and count) larger trees; 0: no limit")
      ->capture_default_str();
  code->add_flag("--skip-errors", c->corpus.skip_errors,
                 "Skip files with parse errors instead of keeping them with ERROR nodes");
  return {code,
          [c](std::ostream& out, std::ostream& err) { return run_data_code(*c, out, err); },
          {{"src_dir", "--src"}, {"max_nodes", "--max-nodes"}, {"language", "--lang"}}};
}

}  // namespace engram::cli
