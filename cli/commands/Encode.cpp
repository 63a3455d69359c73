// engram encode and engram classify: a source file through a trained TBCNN.
#include "cli/Command.h"
#include "cli/Flags.h"
#include "tbcnn/Tbcnn.h"

#include <CLI/CLI.hpp>

#include <iomanip>
#include <memory>

namespace engram::cli {
namespace {

const FlagTable kFlags{{"model_path", "--model"},
                       {"file", "--file"},
                       {"pivot", "--pivot"},
                       {"function", "--function"},
                       {"threads", "--threads"},
                       {"device", "--device"}};

/// Both kinds of parse error: a region the parser could not read (ERROR) and a token it had to
/// insert (MISSING: `def f(:` has no ERROR node, only a missing ')').
void warn_parse_errors(const tbcnn::EncodeOptions& enc, int error_nodes, int missing_nodes,
                       std::ostream& err) {
  if (error_nodes + missing_nodes > 0)
    err << "engram: warning: " << enc.file << " has " << error_nodes + missing_nodes
        << " parse errors (" << error_nodes << " unreadable regions, " << missing_nodes
        << " missing tokens)\n";
}

int run_encode(const tbcnn::EncodeOptions& enc, std::ostream& out, std::ostream& err) {
  const auto r = tbcnn::encode_file(enc);
  warn_parse_errors(enc, r.error_nodes, r.missing_nodes, err);
  out << tbcnn::encode_json(r) << "\n";
  return 0;
}

int run_classify(const tbcnn::EncodeOptions& enc, std::ostream& out, std::ostream& err) {
  const auto r = tbcnn::classify_file(enc);
  warn_parse_errors(enc, r.error_nodes, r.missing_nodes, err);
  for (const auto& [name, p] : r.top)
    out << std::left << std::setw(24) << name << std::right << std::fixed << std::setprecision(4)
        << p << "\n";
  return 0;
}

/// --model, --file, --pivot and --threads.
void add_file_flags(CLI::App* sub, tbcnn::EncodeOptions& enc, const std::string& pivot_help) {
  sub->add_option("--model", enc.model_path, "TBCNN model file")->required();
  sub->add_option("--file", enc.file, "Source file")->required();
  sub->add_option("--pivot", enc.pivot, pivot_help);
  sub->add_option("--function", enc.function,
                  "Loop-task models: the loop of this function (default: the file's last)");
  sub->add_option("--threads", enc.threads, "Intra-op threads")->capture_default_str();
  FlagTable ignored;  // kFlags names --device
  add_device_flag(sub, enc.device, ignored);
}

}  // namespace

Command register_encode(CLI::App& parent) {
  auto enc = std::make_shared<tbcnn::EncodeOptions>();
  CLI::App* sub = parent.add_subcommand("encode", "Print a source file's TBCNN vector as JSON");
  add_file_flags(sub, *enc,
                 "LINE:COL (1-based) of the subtree to encode (localized and masked models)");
  return {sub,
          [enc](std::ostream& out, std::ostream& err) { return run_encode(*enc, out, err); },
          kFlags};
}

Command register_classify(CLI::App& parent) {
  auto enc = std::make_shared<tbcnn::EncodeOptions>();
  CLI::App* sub = parent.add_subcommand("classify", "Print a source file's most probable classes");
  add_file_flags(sub, *enc,
                 "LINE:COL (1-based), for masked-task models (loop-task models find the loop)");
  return {sub,
          [enc](std::ostream& out, std::ostream& err) { return run_classify(*enc, out, err); },
          kFlags};
}

}  // namespace engram::cli
