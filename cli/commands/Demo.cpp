// engram demo: the whole NPI workflow on addition (cli/Demo.h).
#include "cli/Command.h"
#include "cli/Flags.h"
#include "cli/Demo.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {

Command register_demo(CLI::App& parent) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* demo = parent.add_subcommand("demo",
                                         "Generate data, train a small addition model, evaluate "
                                         "it far beyond its training lengths and query it");
  demo->add_option("--dir", options->dir, "Working directory for the demo's files")
      ->capture_default_str();
  demo->add_option("--threads", options->threads, "Intra-op threads, 0 for all cores")
      ->capture_default_str();
  demo->add_flag("--resume", options->resume,
                 "Continue the training an interrupt stopped, from its state in --dir");
  FlagTable flags{{"dir", "--dir"}, {"threads", "--threads"}, {"resume", "--resume"}};
  add_device_flag(demo, options->device, flags);
  return {demo, [options](std::ostream& out, std::ostream&) { return run_demo(*options, out); },
          flags};
}

}  // namespace engram::cli
