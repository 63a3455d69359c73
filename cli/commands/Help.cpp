// engram help [command...]: the help of a command, as `engram COMMAND... --help` prints it.
#include "cli/Command.h"
#include "common/Errors.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {
namespace {

int run_help(const CLI::App& app, const std::vector<std::string>& topic, std::ostream& out) {
  const CLI::App* target = &app;
  std::string usage = app.get_name();
  for (const auto& name : topic) {
    const CLI::App* next = nullptr;
    try {
      next = target->get_subcommand(name);
    } catch (const CLI::OptionNotFound&) {
      throw UsageError("no command '" + name + "' (see `engram help`)");
    }
    target = next;
    usage += " " + name;
  }
  // Not target->help(): it descends into parsed subcommands, so on the app it would describe the
  // `help` command itself.
  out << target->get_formatter()->make_help(target, usage, CLI::AppFormatMode::Normal);
  return 0;
}

}  // namespace

Command register_help(CLI::App& app) {
  auto topic = std::make_shared<std::vector<std::string>>();
  CLI::App* help =
      app.add_subcommand("help", "Show help for a command, e.g. `engram help train npi`");
  help->add_option("command", *topic, "Command to describe");
  CLI::App* root = &app;
  return {help,
          [root, topic](std::ostream& out, std::ostream&) { return run_help(*root, *topic, out); },
          {}};
}

}  // namespace engram::cli
