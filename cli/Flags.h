#pragma once
/// \file
/// Flags that several commands share, registered by one function each: the training session's
/// (trainer::TrainingOptions) for every `engram train ...`, and the primitive binding's
/// (primitives::BindingRequest) for `data gen`, `eval npi` and `run`.

#include "cli/Command.h"
#include "primitives/Binding.h"
#include "trainer/TrainingOptions.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace engram::cli {

/// "addition, addition-primitive, sort, ..." for help texts.
std::string known_tasks();

/// Draw progress bars only when stderr is a terminal.
bool stderr_is_terminal();

/// What a train command offers of the shared training flags, with its own help texts. A help
/// text's default is shown from the bound value unless a `*_default` text is given (a default
/// that varies, e.g. "per task: 8, 1 for sort").
struct TrainingFlagsSpec {
  std::string steps = "Optimizer steps";
  std::string batch = "Examples per step";
  std::string steps_default, batch_default, lr_default;
  /// --memory's help; empty: the command has no --memory.
  std::string memory;
  bool memory_budget = false;  ///< --memory-budget and --swap-bandwidth
};

/// The options the shared training flags were registered as, to tell which ones the user gave.
struct TrainingFlags {
  CLI::Option *steps = nullptr, *batch = nullptr, *lr = nullptr, *optimizer = nullptr,
              *momentum = nullptr, *clip = nullptr, *seed = nullptr, *threads = nullptr,
              *metrics = nullptr, *log_every = nullptr, *memory = nullptr,
              *memory_budget = nullptr, *swap_bandwidth = nullptr, *memory_cap = nullptr;

  /// Every field of `options` whose flag was not given takes its value from `defaults`.
  void fill_unset(const trainer::TrainingOptions& defaults,
                  trainer::TrainingOptions& options) const;
};

/// Adds --steps, --batch, --lr, --optimizer, --momentum, --clip, --seed, --threads, --device,
/// --deterministic, --metrics, --log-every, as the
/// spec says --memory, --memory-budget and --swap-bandwidth, and the data-parallel flags
/// (add_dist_flags), bound to `options`, and their entries to `flags`.
TrainingFlags add_training_flags(CLI::App* command, trainer::TrainingOptions& options,
                                 const TrainingFlagsSpec& spec, FlagTable& flags);

/// Adds the data-parallel flags (--dist-backend, --dist-timeout, --grad-sync, --bucket-mb,
/// --first-bucket-mb, --link-bandwidth, --link-latency, --dist-check-every) bound to `options`.
/// add_training_flags calls it.
void add_dist_flags(CLI::App* command, parallel::DistOptions& options, FlagTable& flags);

/// Adds --device (cpu, cuda or cuda:N; trainer/Device.h) bound to `device`, and its entry (the
/// options' field "device") to `flags`. Every command that computes with a model has it: train,
/// eval, run, encode, classify, bench and demo. The name is checked when the command runs: a GPU
/// this process does not see is a usage error naming what is missing, before any work.
CLI::Option* add_device_flag(CLI::App* command, std::string& device, FlagTable& flags);

/// Adds --ooo-k (a number of layers, or auto: -1) bound to `k`: out-of-order backprop's deferred
/// layers (parallel::DistOptions::ooo_k), for training and for `bench dp`.
CLI::Option* add_ooo_k_flag(CLI::App* command, long& k, const std::string& help);
/// Adds --chunk (layers per chunk, 1 or more, or auto: -1) bound to `layers`: host-side
/// accumulation's chunk (parallel::DistOptions::chunk_layers), for training and for `bench dp`.
CLI::Option* add_chunk_flag(CLI::App* command, long& layers, const std::string& help);

/// Where this process stands in a data-parallel job: torchrun's environment (RANK, WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT, ...; parallel/DistOptions.h), the only place Engram reads it; one
/// process when WORLD_SIZE is unset or 1. InvalidOption naming a malformed variable. The job is
/// joined by the session that trains (trainer/DataParallel.h) or the benchmark that measures it.
parallel::DistEnv read_job_environment();

/// The primitive flags of a command and what they were bound to.
struct PrimitiveFlags {
  primitives::BindingRequest request;
  CLI::Option *primitive = nullptr, *library = nullptr, *symbolic = nullptr, *k = nullptr,
              *init = nullptr;

  /// The request, with which flags were given.
  primitives::BindingRequest given() const;
};

/// Adds --primitive, --k, --init and, for commands that run programs, --primitives and
/// --symbolic-primitives, and their entries to `flags`.
void add_primitive_flags(CLI::App* command, PrimitiveFlags& primitive, bool runs_programs,
                         FlagTable& flags);

/// Checks a --seed before CLI11 converts it: an integer in 0..2^64-1. CLI11 turned "-1" and
/// numbers past 2^64 into 2^64-1 without a word.
CLI::Validator seed_check();

/// A file a command reads or writes, as its flag names it.
struct FileFlag {
  std::string flag;
  std::string path;  ///< empty: not given, skipped
};

/// Throws UsageError when an output names the same file (common/FileChecks.h) as an input, which
/// writing it would destroy ("--out 'a.jsonl' is the file --data reads"), or as another output.
void refuse_overwriting(const std::vector<FileFlag>& inputs, const std::vector<FileFlag>& outputs);

/// The training flags' outputs (--metrics, --checkpoint: given, or with
/// `checkpoint_beside_model` trainer::default_checkpoint_path) beside the model file `out_path`
/// (`out_flag`).
std::vector<FileFlag> training_outputs(const std::string& out_flag, const std::string& out_path,
                                       const trainer::TrainingOptions& options,
                                       bool checkpoint_beside_model = true);

}  // namespace engram::cli
