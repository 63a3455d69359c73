// engram data stdlib: Python's standard library as a folder-per-class tree.
#include "cli/Command.h"
#include "datasets/CodeCorpus.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {
namespace {

int run_data_stdlib(const datasets::StdlibOptions& so, std::ostream& out) {
  const auto report = datasets::write_stdlib_functions(so);
  if (so.modules) {
    out << "wrote " << report.modules << " modules (" << report.functions << " functions) in "
        << report.classes.size() << " classes to " << so.out_dir << ":";
  } else {
    out << "wrote " << report.functions << " functions of " << report.files << " modules in "
        << report.classes.size() << " classes to " << so.out_dir << ":";
  }
  for (const auto& [pkg, count] : report.classes) out << " " << pkg << " " << count;
  out << "\n";
  return 0;
}

}  // namespace

Command register_data_stdlib(CLI::App& parent) {
  auto so = std::make_shared<datasets::StdlibOptions>();
  CLI::App* stdlib = parent.add_subcommand(
      "stdlib",
      "Write the functions of Python's standard library, one file each, labelled by "
      "top-level package (folder-per-class layout for `data code`)");
  stdlib->add_option("--out", so->out_dir, "Folder to create")->required();
  stdlib->add_option("--lib", so->lib_dir, "The standard library")->capture_default_str();
  stdlib->add_option("--min-files", so->min_files, "Files a package needs to be a class")
      ->capture_default_str();
  stdlib
      ->add_option("--min-functions", so->min_functions, "Functions a package needs to be a class")
      ->capture_default_str();
  stdlib->add_flag("--modules", so->modules,
                   "Write the classes' modules whole, one file each, instead of their functions");
  return {stdlib, [so](std::ostream& out, std::ostream&) { return run_data_stdlib(*so, out); },
          {{"out_dir", "--out"},
           {"lib_dir", "--lib"},
           {"min_files", "--min-files"},
           {"min_functions", "--min-functions"}}};
}

}  // namespace engram::cli
