#pragma once
/// \file
/// One `engram` command: the CLI11 subcommand it registered, the function that runs it once its
/// options are parsed, and the table that names its flags for the errors the libraries throw.
///
/// Each command lives in its own file under cli/commands/ and has the shape of a binding: a
/// register function adds the subcommand and binds its flags to a plain options struct (owned by
/// the returned run function); the run function checks what the command line alone can check,
/// calls the library, and prints. engram_main (cli/Cli.cpp) registers every command, parses,
/// runs the one parsed and maps exceptions to exit codes.
///
/// \code
///   Command register_demo(CLI::App& app) {
///     auto options = std::make_shared<DemoOptions>();
///     CLI::App* sub = app.add_subcommand("demo", "...");
///     sub->add_option("--dir", options->dir, "...");
///     auto run = [options](std::ostream& out, std::ostream&) { return run_demo(*options, out); };
///     return {sub, run, {{"dir", "--dir"}}};
///   }
/// \endcode

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace engram::cli {

/// Field of a library's options struct (InvalidOption::option(), e.g. "learning_rate") -> the
/// flag that fills it ("--lr").
using FlagTable = std::map<std::string, std::string>;

struct Command {
  CLI::App* app = nullptr;
  /// Runs the parsed command; returns the exit code. Throws what the library throws.
  std::function<int(std::ostream& out, std::ostream& err)> run;
  FlagTable flags;
};

/// The flag for `field` in `flags`, or the field itself when the table has none.
std::string flag_for(const FlagTable& flags, const std::string& field);

// One per command, in cli/commands/. Each adds its subcommand to `parent` (the app, or the
// `data`, `train`, `eval` or `bench` group).
Command register_data_gen(CLI::App& parent);
Command register_data_code(CLI::App& parent);
Command register_data_stdlib(CLI::App& parent);
Command register_train_npi(CLI::App& parent);
Command register_train_primitives(CLI::App& parent);
Command register_train_tbcnn(CLI::App& parent);
Command register_eval_npi(CLI::App& parent);
Command register_eval_tbcnn(CLI::App& parent);
Command register_eval_primitives(CLI::App& parent);
Command register_run(CLI::App& parent);
Command register_encode(CLI::App& parent);
Command register_classify(CLI::App& parent);
Command register_demo(CLI::App& parent);
Command register_synth(CLI::App& parent);
Command register_bench_npi(CLI::App& parent);
Command register_bench_memory(CLI::App& parent);
Command register_bench_tbcnn(CLI::App& parent);
Command register_bench_dp(CLI::App& parent);
Command register_bench_streams(CLI::App& parent);
Command register_bench_scale(CLI::App& parent);
/// `engram help [command...]`: describes a command of `app` (the root).
Command register_help(CLI::App& app);

}  // namespace engram::cli
