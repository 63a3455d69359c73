#include "cli/Cli.h"

#include "cli/Command.h"
#include "cli/Version.h"
#include "common/Errors.h"
#include "common/OneLine.h"

#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <new>
#include <string>
#include <system_error>

namespace engram::cli {
namespace {

/// A command group (`data`, `train`, ...) that needs one of its commands.
CLI::App& add_group(CLI::App& app, const std::string& name, const std::string& description) {
  CLI::App* group = app.add_subcommand(name, description);
  group->require_subcommand(1);
  return *group;
}

/// Every command, in the order `engram help` lists them.
std::vector<Command> register_commands(CLI::App& app) {
  CLI::App& data = add_group(app, "data", "Training data");
  CLI::App& train = add_group(app, "train", "Train a model");
  CLI::App& eval = add_group(app, "eval", "Evaluate a model");
  std::vector<Command> commands{
      register_data_gen(data),       register_data_code(data),
      register_data_stdlib(data),    register_train_npi(train),
      register_train_primitives(train), register_train_tbcnn(train),
      register_eval_npi(eval),       register_eval_tbcnn(eval),
      register_eval_primitives(eval), register_run(app),
      register_encode(app),          register_classify(app),
      register_demo(app),            register_synth(app)};
  CLI::App& bench = add_group(app, "bench", "Benchmarks that write JSON");
  commands.push_back(register_bench_npi(bench));
  commands.push_back(register_bench_memory(bench));
  commands.push_back(register_bench_tbcnn(bench));
  commands.push_back(register_bench_dp(bench));
  commands.push_back(register_bench_streams(bench));
  commands.push_back(register_bench_scale(bench));
  commands.push_back(register_help(app));
  return commands;
}

/// A whole number in decimal digits (an optional sign; none for an unsigned option) within 64
/// bits, with leading zeros dropped. CLI11 reads integers with strtoll's base 0, so that "010"
/// was eight, "0x10" sixteen, a number past 64 bits silently the largest one and "-1" of an
/// unsigned option 2^64 - 1; the option's own type bounds it further, as before.
CLI::Validator decimal_integer(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& text) -> std::string {
        const bool negative = !text.empty() && text[0] == '-';
        const std::size_t first = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
        const bool digits = first < text.size() &&
                            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(first),
                                        text.end(), [](char c) { return c >= '0' && c <= '9'; });
        const std::string unsigned_range = "' is not a whole number from 0 to 18446744073709551615";
        if (is_unsigned && digits && negative) return "'" + text + unsigned_range;
        if (!digits) return "'" + text + "' is not a whole number in decimal digits";
        const std::size_t nonzero = text.find_first_not_of('0', first);
        const std::string number =
            (negative ? "-" : "") + (nonzero == std::string::npos ? "0" : text.substr(nonzero));
        const char* end = number.data() + number.size();
        std::errc error;
        if (is_unsigned) {
          unsigned long long value = 0;
          error = std::from_chars(number.data(), end, value).ec;
        } else {
          long long value = 0;
          error = std::from_chars(number.data(), end, value).ec;
        }
        if (error != std::errc())
          return "'" + text +
                 (is_unsigned ? unsigned_range : "' is not a whole number within 64 bits");
        text = number;
        return "";
      },
      "");
}

/// decimal_integer() on every integer option of `app` and its commands, before the option's own
/// checks (a transform: CLI11 keeps a check from changing the text).
void decimal_integers_only(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag: it takes no value
    const std::string type = option->get_type_name();
    const std::string base = type.substr(0, type.find(':'));
    if (base == "INT" || base == "UINT") option->transform(decimal_integer(base == "UINT"));
  }
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    decimal_integers_only(*sub);
}

/// CLI11 reports an unknown first word only as "a subcommand is required"; this names it.
bool is_unknown_command(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return false;
  const auto known = app.get_subcommands([](const CLI::App*) { return true; });
  return std::none_of(known.begin(), known.end(),
                      [&](const CLI::App* sub) { return sub->get_name() == args[0]; });
}

/// Parses; returns an exit code when parsing ends the run (help, a parse error), else -1.
int parse(CLI::App& app, const std::vector<std::string>& args, std::ostream& out,
          std::ostream& err) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForVersion&) {
    out << version_text();
    return 0;
  } catch (const CLI::CallForHelp&) {
    // help() descends to the innermost subcommand that was named, with its full usage line.
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "engram: error: " << e.what() << " (see `engram help`)\n";
    return 2;
  }
  return -1;
}

/// Runs `command`, mapping exceptions to exit codes: usage errors 2 (an invalid option named by
/// the flag that fills it), training interrupted by a signal 128 + signal, anything else 1.
int run(const Command& command, std::ostream& out, std::ostream& err) {
  try {
    return command.run(out, err);
  } catch (const InvalidOption& e) {
    err << "engram: error: " << flag_for(command.flags, e.option()) << " " << e.problem() << "\n";
    return 2;
  } catch (const UsageError& e) {
    err << "engram: error: " << e.what() << "\n";
    return 2;
  } catch (const Interrupted& e) {
    err << "engram: " << e.what() << "\n";
    return 128 + e.signal();
  } catch (const std::bad_alloc&) {
    err << "engram: error: out of memory: the options ask for more than this machine can "
           "allocate (std::bad_alloc)\n";
    return 1;
  } catch (const c10::Error& e) {
    // torch's own error: its message without the C++ stack trace torch appends (a bug of ours
    // or an input no check caught), on one line with the cause its later lines give.
    err << "engram: error: " << one_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "engram: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int engram_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "engram: train neural programs on execution traces and code encoders on syntax "
      "trees, and query them",
      "engram"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");
  // The text is computed only when the flag is given: it asks the CUDA runtime for GPUs.
  app.add_flag_callback("--version", [] { throw CLI::CallForVersion(); },
                        "Engram's commit, LibTorch's version, the CUDA, cuDNN and NCCL versions "
                        "compiled in, and the GPUs visible");
  const std::vector<Command> commands = register_commands(app);
  decimal_integers_only(app);
  if (is_unknown_command(app, args)) {
    err << "engram: error: unknown command '" << args[0] << "' (see `engram help`)\n";
    return 2;
  }
  if (const int code = parse(app, args, out, err); code >= 0) return code;
  for (const Command& command : commands) {
    if (command.app->parsed()) return run(command, out, err);
  }
  err << "engram: error: no command given (see `engram help`)\n";
  return 2;
}

}  // namespace engram::cli
