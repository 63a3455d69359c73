#include "cli/Flags.h"

#include "common/Errors.h"
#include "common/FileChecks.h"
#include "datasets/Task.h"
#include "parallel/DistOptions.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <map>

namespace engram::cli {

std::string flag_for(const FlagTable& flags, const std::string& field) {
  const auto it = flags.find(field);
  return it == flags.end() ? field : it->second;
}

std::string known_tasks() {
  std::string s;
  for (const auto& n : datasets::task_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) != 0; }

namespace {

/// Shows the bound default, or the given text of one that varies.
CLI::Option* with_default(CLI::Option* option, const std::string& varies) {
  if (varies.empty()) return option->capture_default_str();
  option->description(option->get_description() + " (default: " + varies + ")");
  return option;
}

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

/// A size in MiB above 0 and at most parallel::kMaxBucketMib (CLI::PositiveNumber's message
/// prints the largest double; past the bound the bytes overflowed a size_t).
CLI::Validator positive_mib() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          std::size_t end = 0;
          const double v = std::stod(text, &end);
          if (end == text.size() && v > 0 && v <= parallel::kMaxBucketMib) return "";
        } catch (const std::exception&) {
        }
        return "'" + text + "' is not a positive size in MiB up to 1048576 (1 TiB)";
      },
      "MiB");
}

}  // namespace

CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.size() <= 20 &&
            std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
        // 20 digits fit only up to 18446744073709551615.
        if (digits && (text.size() < 20 || text <= "18446744073709551615")) return "";
        return "'" + text + "' is not a seed: an integer from 0 to 18446744073709551615";
      },
      "SEED");
}

CLI::Option* add_device_flag(CLI::App* command, std::string& device, FlagTable& flags) {
  flags["device"] = "--device";
  return command
      ->add_option("--device", device,
                   "Where the model computes: cpu, cuda (the first visible GPU) or cuda:N")
      ->capture_default_str();
}

TrainingFlags add_training_flags(CLI::App* command, trainer::TrainingOptions& options,
                                 const TrainingFlagsSpec& spec, FlagTable& flags) {
  TrainingFlags f;
  f.steps =
      with_default(command->add_option("--steps", options.steps, spec.steps), spec.steps_default);
  f.batch =
      with_default(command->add_option("--batch", options.batch, spec.batch), spec.batch_default);
  f.lr = with_default(command->add_option("--lr", options.learning_rate, "Learning rate"),
                      spec.lr_default);
  f.optimizer = command
                    ->add_option("--optimizer", options.optimizer,
                                 "adam, or sgd (with --momentum; as torch.optim.SGD)")
                    ->check(CLI::IsMember(trainer::optimizer_names()))
                    ->capture_default_str();
  f.momentum =
      command->add_option("--momentum", options.momentum, "SGD's momentum, in [0, 1); 0: plain SGD")
          ->capture_default_str();
  f.clip =
      command
          ->add_option("--clip", options.grad_clip, "Largest global gradient norm; 0: no clipping")
          ->capture_default_str();
  f.seed = command->add_option("--seed", options.seed, "Random seed (batches, initial weights)")
               ->check(seed_check())
               ->capture_default_str();
  f.threads = command->add_option("--threads", options.threads, "Intra-op threads, 0 for all cores")
                  ->capture_default_str();
  add_device_flag(command, options.device, flags);
  command->add_flag("--deterministic", options.deterministic,
                    "On CUDA, repeat bit for bit: cuDNN's and ATen's deterministic algorithms and "
                    "cuBLAS's fixed workspace (CPU runs repeat themselves either way); in a job "
                    "of 3 ranks or more, needs --ooo-k (with --grad-sync ooo) or --chunk (host) "
                    "given, not auto");
  flags["deterministic"] = "--deterministic";
  command
      ->add_option("--ooo-threads", options.ooo_threads,
                   "2: weight gradients on a second thread while the input-gradient chain goes "
                   "on (out-of-order backprop in one process; needs --threads 1)")
      ->capture_default_str();
  command
      ->add_option("--ooo-streams", options.ooo_streams,
                   "2: weight-gradient kernels on a second CUDA stream while the input-gradient "
                   "chain goes on (out-of-order backprop on one GPU)")
      ->capture_default_str();
  f.metrics =
      command->add_option("--metrics", options.metrics_path, "Write JSON-lines metrics here");
  f.log_every = command->add_option("--log-every", options.log_every, "Steps between metrics lines")
                    ->capture_default_str();
  command
      ->add_option("--checkpoint-every", options.checkpoint_every,
                   "Save the training state (model, optimizer, data order, generators) every N "
                   "steps; 0: only when SIGINT or SIGTERM stops training")
      ->capture_default_str();
  command->add_option("--checkpoint", options.checkpoint_path,
                      "Where the training state goes (default: the model's path + .ckpt)");
  command
      ->add_option("--curriculum", options.curriculum,
                   "Train the first SHARE of the steps shortest examples first, one more length "
                   "per equal part of them (0: no curriculum; the NPI's traces)")
      ->capture_default_str();
  command->add_flag("--resume", options.resume,
                    "Continue from the saved training state: the same command and options end "
                    "with the same model bytes as a run never stopped");
  flags.insert({{"steps", "--steps"},
                {"batch", "--batch"},
                {"checkpoint_every", "--checkpoint-every"},
                {"checkpoint_path", "--checkpoint"},
                {"resume", "--resume"},
                {"curriculum", "--curriculum"},
                {"learning_rate", "--lr"},
                {"optimizer", "--optimizer"},
                {"momentum", "--momentum"},
                {"grad_clip", "--clip"},
                {"seed", "--seed"},
                {"threads", "--threads"},
                {"ooo_threads", "--ooo-threads"},
                {"ooo_streams", "--ooo-streams"},
                {"metrics_path", "--metrics"},
                {"log_every", "--log-every"}});
  if (!spec.memory.empty()) {
    f.memory =
        command->add_option("--memory", options.memory.techniques, spec.memory)->delimiter(',');
    flags["memory.techniques"] = "--memory";
  }
  if (spec.memory_budget) {
    f.memory_budget = command->add_option(
        "--memory-budget", options.memory.budget_bytes,
        "Bound on a step's activation peak in bytes for recompute, swap and algo (the planner "
        "picks per unit and layer; 0: every unit)");
    f.swap_bandwidth = command->add_option(
        "--swap-bandwidth", options.memory.swap_bandwidth,
        "Throttle the swap spill file to this many bytes per second, at least 1e6 "
        "(0: no)");
    f.memory_cap = command->add_option(
        "--memory-cap", options.memory.cap,
        "On a GPU: what the device's allocator may hold while training, in bytes (8GiB) or as a "
        "fraction of the device (0.5); recompute, swap and algo are then planned to fit under it");
    flags["memory.budget_bytes"] = "--memory-budget";
    flags["memory.swap_bandwidth"] = "--swap-bandwidth";
    flags["memory.cap"] = "--memory-cap";
  }
  add_dist_flags(command, options.dist, flags);
  return f;
}

void add_dist_flags(CLI::App* command, parallel::DistOptions& d, FlagTable& flags) {
  const std::string group = "Data-parallel (under torchrun, or WORLD_SIZE > 1)";
  command
      ->add_option("--dist-backend", d.backend,
                   "Collectives backend: nccl (CUDA tensors; host ones over Gloo beside it), "
                   "gloo (host and CUDA tensors), or auto: nccl when each rank has a GPU of its "
                   "own, gloo otherwise")
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}))
      ->capture_default_str()
      ->group(group);
  command
      ->add_option("--dist-timeout", d.timeout_seconds,
                   "Seconds a rank waits for the others (rendezvous, a collective) before it "
                   "fails naming the rank that stopped answering")
      ->capture_default_str()
      ->group(group);
  command
      ->add_option_function<std::string>(
          "--grad-sync",
          [&d](const std::string& name) { d.grad_sync = parallel::grad_sync_from_name(name); },
          "Gradient exchange: overlap (buckets all-reduced as backward fills them, the "
          "default), after (one all-reduce after backward), ooo (out-of-order backprop: the "
          "first --ooo-k layers' weight gradients after the input-gradient chain, their "
          "exchange overlapping the next forward; needs --clip 0), none (no exchange: a "
          "compute-only baseline, replicas drift apart)")
      ->check(CLI::IsMember(parallel::grad_sync_names()))
      ->group(group);
  add_ooo_k_flag(command, d.ooo_k,
                 "With --grad-sync ooo: how many layers nearest the input are updated late, or "
                 "auto (chosen from the first step's measured per-layer compute and "
                 "communication; the default)")
      ->group(group);
  add_chunk_flag(command, d.chunk_layers,
                 "With --grad-sync host: layers per chunk, or auto (searched on the first steps: "
                 "1, 2, 4, ... while a step gets faster; the default)")
      ->group(group);
  // Sizes in MiB (as DDP's bucket_cap_mb), kept in bytes.
  const auto add_mib = [&](const char* name, std::size_t& bytes, const char* help) {
    command
        ->add_option_function<double>(
            name, [&bytes](double mib) { bytes = parallel::bytes_of_mib(mib); }, help)
        ->check(positive_mib())
        ->group(group);
  };
  add_mib("--bucket-mb", d.bucket_bytes,
          "Gradient bucket size in MiB (default 25, as PyTorch DDP)");
  add_mib("--first-bucket-mb", d.first_bucket_bytes,
          "Size of the first bucket (the last layers') in MiB (default 1)");
  command
      ->add_option("--link-bandwidth", d.link_bandwidth,
                   "Emulate a link of this many bytes per second on the wire (TCP payload: 95.6% "
                   "of it; 0: the real link)")
      ->capture_default_str()
      ->group(group);
  command->add_option("--link-latency", d.link_latency, "Emulated latency per collective, seconds")
      ->capture_default_str()
      ->group(group);
  command
      ->add_flag("--sync-bn", d.sync_batch_norm,
                 "Batch norm over the global batch (as torch.nn.SyncBatchNorm); off, as in DDP, "
                 "each rank normalises its own")
      ->group(group);
  command
      ->add_option("--dist-check-every", d.check_every,
                   "Steps between checks that every rank holds the same parameters")
      ->capture_default_str()
      ->group(group);
  flags.insert({{"dist.backend", "--dist-backend"},
                {"dist.timeout_seconds", "--dist-timeout"},
                {"dist.grad_sync", "--grad-sync"},
                {"dist.ooo_k", "--ooo-k"},
                {"dist.chunk_layers", "--chunk"},
                {"dist.bucket_bytes", "--bucket-mb"},
                {"dist.first_bucket_bytes", "--first-bucket-mb"},
                {"dist.link_bandwidth", "--link-bandwidth"},
                {"dist.link_latency", "--link-latency"},
                {"dist.check_every", "--dist-check-every"}});
}

namespace {

/// --NAME taking a count (at least `least`) or auto (-1).
CLI::Option* add_count_or_auto(CLI::App* command, const std::string& name, long& value, long least,
                               const std::string& help) {
  return command
      ->add_option_function<std::string>(
          name, [&value](const std::string& v) { value = v == "auto" ? -1 : std::stol(v); }, help)
      ->check([least](const std::string& v) -> std::string {
        if (v == "auto") return "";
        if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos ||
            std::stol(v) < least)
          return "must be a number of layers" + std::string(least > 0 ? " (1 or more)" : "") +
                 " or auto, not '" + v + "'";
        return "";
      });
}

}  // namespace

CLI::Option* add_chunk_flag(CLI::App* command, long& layers, const std::string& help) {
  return add_count_or_auto(command, "--chunk", layers, 1, help);
}

CLI::Option* add_ooo_k_flag(CLI::App* command, long& k, const std::string& help) {
  return add_count_or_auto(command, "--ooo-k", k, 0, help);
}

parallel::DistEnv read_job_environment() {
  const parallel::DistEnv env =
      parallel::env_from([](const char* name) { return std::getenv(name); });
  // A peer rank that dies closes its sockets; writing to one then must fail with EPIPE, which
  // the communicator reports naming the rank, not kill this rank by SIGPIPE (exit 141).
  if (env.distributed()) std::signal(SIGPIPE, SIG_IGN);
  return env;
}

void TrainingFlags::fill_unset(const trainer::TrainingOptions& defaults,
                               trainer::TrainingOptions& options) const {
  if (!given(steps)) options.steps = defaults.steps;
  if (!given(batch)) options.batch = defaults.batch;
  if (!given(lr)) options.learning_rate = defaults.learning_rate;
  if (!given(optimizer)) options.optimizer = defaults.optimizer;
  if (!given(momentum)) options.momentum = defaults.momentum;
  if (!given(clip)) options.grad_clip = defaults.grad_clip;
  if (!given(seed)) options.seed = defaults.seed;
  if (!given(threads)) options.threads = defaults.threads;
  if (!given(metrics)) options.metrics_path = defaults.metrics_path;
  if (!given(log_every)) options.log_every = defaults.log_every;
  if (!given(memory)) options.memory.techniques = defaults.memory.techniques;
  if (!given(memory_budget)) options.memory.budget_bytes = defaults.memory.budget_bytes;
  if (!given(swap_bandwidth)) options.memory.swap_bandwidth = defaults.memory.swap_bandwidth;
  if (!given(memory_cap)) options.memory.cap = defaults.memory.cap;
}

void add_primitive_flags(CLI::App* command, PrimitiveFlags& p, bool runs_programs,
                         FlagTable& flags) {
  auto& r = p.request;
  r.runs_programs = runs_programs;
  p.primitive = command->add_option(
      "--primitive", r.primitive,
      "High-order tasks: the primitive the program applies, e.g. double or gt(5) (see `engram "
      "help run`)");
  if (runs_programs) {
    p.library = command->add_option("--primitives", r.library,
                                    "Primitive library from `engram train primitives` (neural)");
    p.symbolic = command->add_flag(
        "--symbolic-primitives", r.symbolic,
        "Apply the exact functions instead of networks, to tell control-flow errors from "
        "primitive errors");
  }
  p.k = command->add_option("--k", r.k,
                            std::string("High-order tasks: values lie in 0..K-1 (default 10") +
                                (runs_programs ? "; with --primitives the library's K)" : ")"));
  p.init = command->add_option("--init", r.init, "fold, scan: the accumulator's initial value (0)");
  flags.insert({{"primitive", "--primitive"},
                {"library", "--primitives"},
                {"symbolic", "--symbolic-primitives"},
                {"k", "--k"},
                {"init", "--init"}});
}

primitives::BindingRequest PrimitiveFlags::given() const {
  primitives::BindingRequest r = request;
  r.primitive_given = cli::given(primitive);
  r.library_given = cli::given(library);
  r.symbolic_given = cli::given(symbolic);
  r.k_given = cli::given(k);
  r.init_given = cli::given(init);
  return r;
}

void refuse_overwriting(const std::vector<FileFlag>& inputs, const std::vector<FileFlag>& outputs) {
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const FileFlag& out = outputs[o];
    for (const FileFlag& in : inputs)
      if (same_file(out.path, in.path))
        throw UsageError(out.flag + " '" + out.path + "' is the file " + in.flag +
                         " reads: writing it would destroy it");
    for (std::size_t e = 0; e < o; ++e)
      if (same_file(out.path, outputs[e].path))
        throw UsageError(outputs[e].flag + " and " + out.flag + " both name '" + out.path + "'");
  }
}

std::vector<FileFlag> training_outputs(const std::string& out_flag, const std::string& out_path,
                                       const trainer::TrainingOptions& options,
                                       bool checkpoint_beside_model) {
  const std::string checkpoint = options.checkpoint_path.empty() && checkpoint_beside_model
                                     ? trainer::default_checkpoint_path(out_path)
                                     : options.checkpoint_path;
  return {{out_flag, out_path}, {"--metrics", options.metrics_path}, {"--checkpoint", checkpoint}};
}

}  // namespace engram::cli
