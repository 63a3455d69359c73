#include "trainer/Trainer.h"

#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "nn/StreamScheduler.h"
#include "trainer/BatchSampler.h"
#include "trainer/DataParallel.h"
#include "trainer/Device.h"
#include "trainer/MemoryCap.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/ProgressBar.h"
#include "trainer/Stepper.h"
#include "trainer/Threads.h"
#include "trainer/TrainingState.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

namespace engram::trainer {

/// The memory techniques' store as the layers' store while the session lasts.
struct TrainingSession::RuntimeScope {
  RuntimeScope(memory::ActivationStore* store, nn::GradScheduler* scheduler,
               nn::ReplicaSum* replicas, nn::ParameterGate* gate)
      : guard(store, scheduler, replicas, gate) {}
  nn::RuntimeGuard guard;
};

/// The session's device as the current one (a CUDA device's index) while the session lasts.
struct TrainingSession::DeviceScope {
  explicit DeviceScope(const c10::Device& device) : guard(device) {}
  c10::DeviceGuard guard;
};

void Workload::to_device(const c10::Device& device) {
  if (!device.is_cpu())
    throw std::invalid_argument("this model trains on the CPU only, not on " + device.str());
}

namespace {

/// Throws std::invalid_argument unless every parameter of `workload` lives on `device`.
void check_parameters_on(Workload& workload, const c10::Device& device) {
  std::size_t index = 0;
  for (const at::Tensor& p : workload.parameters()) {
    if (p.device() != device)
      throw std::invalid_argument("training on " + device.str() + ", but parameter " +
                                  std::to_string(index) + " of the model is on " +
                                  p.device().str());
    ++index;
  }
}

}  // namespace

TrainingSession::TrainingSession(Workload& workload, const TrainingOptions& options,
                                 Workload* planning)
    : workload_(workload), options_(options) {
  validate(options_);
  check_device_support(options_);
  const c10::Device device = resolve_device(job_device_name(options_));
  workload.to_device(device);
  check_parameters_on(workload, device);
  device_ = std::make_unique<DeviceScope>(device);
  if (!options_.memory.cap.empty()) {
    cap_bytes_ = resolve_memory_cap(options_.memory.cap, device_memory_bytes(device));
    if (chosen_techniques(options_.memory.techniques).plans() &&
        options_.memory.budget_bytes == 0) {
      std::vector<std::int64_t> parameter_bytes;
      for (const auto& p : workload.parameters())
        parameter_bytes.push_back(static_cast<std::int64_t>(p.nbytes()));
      const StepState state =
          step_state_bytes(parameter_bytes, options_.optimizer, options_.momentum);
      options_.memory.budget_bytes = activation_budget_under_cap(cap_bytes_, state);
      options_.memory.reserved_budget = reserved_budget_while_planning(cap_bytes_, state);
    }
  }
  if (options_.deterministic) make_deterministic();
  const std::size_t n = workload.num_examples();
  if (n == 0) throw std::runtime_error("no training examples");
  set_compute_threads(options_.threads);
  memory_ = std::make_unique<MemoryTechniques>(options_.memory);
  if (memory_->plans()) {
    Workload& on = planning != nullptr ? *planning : workload;
    if (memory_->uses_units() && on.unit_names().empty()) {
      throw InvalidOption("memory.techniques",
                          "recompute and swap act on a model cut into units, and this model is "
                          "not (relu applies to any model of nn/ layers)");
    }
    // Planned on the first batch of the training set's size (forward and backward passes only,
    // gradients reset after them), then every step runs under the plan.
    std::vector<std::size_t> first(std::min<std::size_t>(options_.batch, on.num_examples()));
    std::iota(first.begin(), first.end(), 0);
    memory_->plan(on, first);
    memory_->apply(workload);
  }
  if (cap_bytes_ > 0) {
    // After planning, whose measured steps run uncapped (a step with every unit kept among
    // them), and with the segments they left cached given back, so that only what the session
    // holds counts against the cap.
    release_cached_device_memory(device);
    cap_limit_ = std::make_unique<DeviceMemoryLimit>(device, cap_bytes_);
  }
  const int world = options_.world_size();
  Curriculum curriculum;
  if (options_.curriculum > 0) {
    curriculum.lengths = workload.example_lengths();
    if (curriculum.lengths.empty()) {
      throw InvalidOption("curriculum",
                          "orders examples by their length, and this model's examples have none "
                          "(the NPI's traces do)");
    }
    curriculum.steps = static_cast<std::size_t>(
        std::max(1.0, std::round(options_.curriculum * static_cast<double>(options_.steps))));
  }
  sampler_ = std::make_unique<BatchSampler>(n, static_cast<std::size_t>(options_.batch) * world,
                                            options_.seed, std::move(curriculum));
  stepper_ = std::make_unique<Stepper>(
      workload, StepperOptions{options_.learning_rate, options_.grad_clip,
                               chosen_techniques(options_.memory.techniques).reuse(),
                               options_.optimizer, options_.momentum});
  nn::GradScheduler* scheduler = nullptr;
  nn::ReplicaSum* replicas = nullptr;
  nn::ParameterGate* gate = nullptr;
  if (options_.job.distributed()) {
    Stepper* stepper = stepper_.get();
    data_parallel_ = std::make_unique<DataParallel>(
        workload, stepper_->parameters(), options_,
        [stepper](const std::vector<std::size_t>& which) { stepper->update_late(which); });
    scheduler = &data_parallel_->scheduler();
    replicas = data_parallel_->replicas();
    gate = data_parallel_->gate();
    stepper_->add_hooks(data_parallel_.get());
  }
  if (options_.ooo_threads == 2) {
    // The weight gradients on a second thread, which computes with one intra-op thread too.
    reordered_ = std::make_unique<nn::ThreadedScheduler>([] { set_compute_threads(1); });
    scheduler = reordered_.get();
  }
  if (options_.ooo_streams == 2) {
    reordered_ = std::make_unique<nn::StreamScheduler>();  // on the session's device, current now
    scheduler = reordered_.get();
  }
  runtime_ = std::make_unique<RuntimeScope>(memory_->store(), scheduler, replicas, gate);
}

TrainingSession::~TrainingSession() {
  runtime_.reset();
  reordered_.reset();  // its worker joined (or its stream waited for) before what it touches goes
  stepper_.reset();
  data_parallel_.reset();
  if (memory_ && memory_->plans()) {
    try {
      memory_->release(workload_);
    } catch (const std::exception&) {
      // Only a workload whose layers changed since planning; nothing to give back then.
    }
  }
}

StepOutput TrainingSession::step() { return step(sampler_->next()); }

void TrainingSession::settle() {
  if (data_parallel_) data_parallel_->settle();
}

StepOutput TrainingSession::step(std::vector<std::size_t> indices) {
  ++steps_;
  if (!data_parallel_) return stepper_->step(std::move(indices));
  std::vector<double> denominators = workload_.loss_denominators(indices);
  StepOutput out = stepper_->step(data_parallel_->shard(indices), std::move(denominators));
  data_parallel_->add_step_metrics(out.metrics);
  if (steps_ % options_.dist.check_every == 0) data_parallel_->check_replicas(steps_);
  return out;
}

namespace {

// The first SIGINT or SIGTERM of a run, and when it came (CLOCK_MONOTONIC, nanoseconds).
std::atomic<int> pending_signal{0};
std::atomic<std::int64_t> first_signal_ns{0};
static_assert(std::atomic<int>::is_always_lock_free &&
                  std::atomic<std::int64_t>::is_always_lock_free,
              "the signal handler may only touch lock-free atomics");

/// A second signal this soon after the first is the same request delivered twice: `timeout`
/// signals its child and then the child's process group, a terminal's Ctrl-C reaches torchrun's
/// workers and torchrun forwards a SIGTERM. Only a later one means "stop now".
constexpr std::int64_t kSameRequestNs = 1'000'000'000;

std::int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

extern "C" void note_signal(int signal) {
  const std::int64_t now = monotonic_ns();
  if (pending_signal.load() == 0) {
    first_signal_ns.store(now);
    pending_signal.store(signal);
    return;
  }
  if (now - first_signal_ns.load() < kSameRequestNs) return;
  // Stop now: the default action, once this handler returns (the signal is blocked until then).
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal, &default_action, nullptr);
  raise(signal);
}

/// While training runs, SIGINT and SIGTERM only note the signal (the loop stops after its step,
/// saving its state); a second one within kSameRequestNs is ignored, a later one acts as if there
/// were no handler. SA_RESTART keeps the libraries' blocking calls from failing with EINTR. The
/// previous handlers come back afterwards.
class SignalCatcher {
 public:
  SignalCatcher() {
    pending_signal = 0;
    struct sigaction action {};
    action.sa_handler = note_signal;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGINT);  // one handler at a time
    sigaddset(&action.sa_mask, SIGTERM);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~SignalCatcher() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

  /// The signal noted, or 0; data-parallel: any rank's, the same on every rank.
  int pending(DataParallel* dp) const {
    const int signal = pending_signal;
    return dp == nullptr ? signal : dp->agreed_signal(signal);
  }

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

const char* signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

/// Resuming: the metrics file keeps its first `lines` lines (those of the steps the state
/// covers), rewritten atomically; the run then appends.
void keep_metrics_lines(const std::string& path, long lines) {
  // Only a regular file can be cut back: /dev/stdout or a pipe would be read from (waiting on
  // the terminal, or on this process's own output), so its lines are only appended to.
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return;
  std::ifstream in(path);
  std::ostringstream kept;
  std::string line;
  for (long i = 0; i < lines && std::getline(in, line); ++i) kept << line << '\n';
  in.close();
  AtomicFile file(path);
  file.stream() << kept.str();
  file.commit();
}

}  // namespace

TrainSummary train(Workload& workload, const TrainingOptions& options, const LogCallback& on_log) {
  if (options.writes_files() && !options.checkpoint_path.empty()) {
    // A signal may ask for the state at any step: fail now, not when training is lost.
    check_writable(options.checkpoint_path);
  }
  TrainingSession session(workload, options);
  DataParallel* dp = session.data_parallel();  // nullptr in one process
  LoopState loop;
  if (options.resume) {
    loop = load_training_state(options.checkpoint_path, session);
    if (loop.step > options.steps)
      throw InvalidOption("steps", "is " + std::to_string(options.steps) + ", fewer than the " +
                                       std::to_string(loop.step) + " steps the training state '" +
                                       options.checkpoint_path + "' has done");
  }
  const bool writes = options.writes_files();
  std::ofstream metrics;
  if (!options.metrics_path.empty() && writes) {
    if (options.resume) keep_metrics_lines(options.metrics_path, loop.metrics_lines);
    metrics.open(options.metrics_path,
                 std::ios::out | (options.resume ? std::ios::app : std::ios::trunc));
    if (!metrics)
      throw std::runtime_error("cannot write metrics file '" + options.metrics_path + "'");
  }
  ProgressBar bar(options.steps, options.progress && writes);
  const long batch = static_cast<long>(session.sampler().batch_size());  // global
  const SignalCatcher signals;
  // The state after `step`, written by the rank that writes files (the others wait for it).
  auto save_state = [&](long step, double elapsed) {
    session.settle();  // out-of-order backprop's late updates belong to this step
    if (writes) {
      LoopState state = loop;
      state.step = step;
      state.seconds = elapsed;
      save_training_state(options.checkpoint_path, session, state);
    }
    if (dp != nullptr) dp->barrier();
  };

  TrainSummary summary;
  summary.steps = loop.step;
  auto start = std::chrono::steady_clock::now();
  long examples = 0;
  for (long step = loop.step + 1; step <= options.steps; ++step) {
    StepOutput out = session.step();
    examples += batch;
    const double loss = out.loss.item<double>();
    if (!std::isfinite(loss)) {
      throw std::runtime_error("training diverged: loss is " + std::to_string(loss) + " at step " +
                               std::to_string(step) + " (try a lower learning rate)");
    }
    summary.final_loss = loss;
    summary.steps = step;
    loop.sums["loss"] += loss;
    for (const auto& [k, v] : out.metrics) loop.sums[k] += v;
    ++loop.logged;
    bar.update(step, loss);
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = loop.seconds + std::chrono::duration<double>(now - start).count();
    bool stop = false;
    if (step % options.log_every == 0 || step == options.steps) {
      std::map<std::string, double> mean;
      for (const auto& [k, v] : loop.sums) mean[k] = v / loop.logged;
      if (dp != nullptr) {
        dp->combine_metrics(mean);
        summary.final_loss = mean["loss"];  // the global batch's, over the last log window
      }
      if (on_log) {
        session.settle();  // a validation sees the parameters after this step
        stop = dp != nullptr ? dp->log_on_one_rank(on_log, step, mean) : on_log(step, mean);
        start += std::chrono::steady_clock::now() - now;  // the callback's time is not training
      }
      if (metrics.is_open()) {
        nlohmann::json line{{"step", step}, {"seconds", elapsed}};
        for (const auto& [k, v] : mean) line[k] = v;
        errno = 0;
        metrics << line.dump() << '\n' << std::flush;
        if (!metrics)  // a full disk: the log would end in half a line, and the run say nothing
          throw std::runtime_error("cannot write metrics file '" + options.metrics_path +
                                   "' at step " + std::to_string(step) +
                                   (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
        ++loop.metrics_lines;
      }
      loop.sums.clear();
      loop.logged = 0;
    }
    if (!options.checkpoint_path.empty() && options.checkpoint_every > 0 &&
        step % options.checkpoint_every == 0) {
      save_state(step, elapsed);
    }
    if (const int signal = signals.pending(dp)) {
      std::string what = std::string("interrupted by ") + signal_name(signal) + " after step " +
                         std::to_string(step) + " of " + std::to_string(options.steps);
      if (!options.checkpoint_path.empty()) {
        save_state(step, elapsed);
        what += "; its state is in '" + options.checkpoint_path + "' (the same command with " +
                "--resume continues)";
      }
      bar.finish();
      throw Interrupted(signal, what);
    }
    if (stop) break;
  }
  bar.finish();
  if (dp != nullptr) {
    dp->check_replicas(summary.steps);
    dp->barrier();  // no rank leaves (closing the store) while another still trains
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.examples_per_second = summary.seconds > 0 ? examples / summary.seconds : 0;
  if (const auto* compressing = session.memory().compressing())
    summary.compressed_tensors = compressing->stats().compressed_tensors;
  if (session.memory().plans()) summary.memory_plan = session.memory().explain();
  return summary;
}

}  // namespace engram::trainer
