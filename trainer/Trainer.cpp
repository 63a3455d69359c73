#include "trainer/Trainer.h"

#include "common/Errors.h"
#include "dist/Communicator.h"
#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "trainer/BatchSampler.h"
#include "trainer/DataParallel.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/ProgressBar.h"
#include "trainer/Stepper.h"
#include "trainer/Threads.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>

namespace engram::trainer {

/// The memory techniques' store as the layers' store while the session lasts.
struct TrainingSession::RuntimeScope {
  RuntimeScope(memory::ActivationStore* store, nn::GradScheduler* scheduler,
               nn::ReplicaSum* replicas)
      : guard(store, scheduler, replicas) {}
  nn::RuntimeGuard guard;
};

TrainingSession::TrainingSession(Workload& workload, const TrainingOptions& options,
                                 Workload* planning)
    : workload_(workload), options_(options) {
  validate(options_);
  const std::size_t n = workload.num_examples();
  if (n == 0) throw std::runtime_error("no training examples");
  set_compute_threads(options_.threads);
  memory_ = std::make_unique<MemoryTechniques>(options_.memory);
  if (memory_->uses_units()) {
    Workload& on = planning != nullptr ? *planning : workload;
    if (on.unit_names().empty()) {
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
  const int world = options_.world_size();
  sampler_ = std::make_unique<BatchSampler>(n, static_cast<std::size_t>(options_.batch) * world,
                                            options_.seed);
  stepper_ = std::make_unique<Stepper>(
      workload, StepperOptions{options_.learning_rate, options_.grad_clip});
  nn::GradScheduler* scheduler = nullptr;
  nn::ReplicaSum* replicas = nullptr;
  if (world > 1) {
    data_parallel_ = std::make_unique<DataParallel>(*options_.communicator, workload,
                                                    stepper_->parameters(), options_);
    scheduler = data_parallel_->scheduler();
    replicas = data_parallel_->replicas();
    stepper_->add_hooks(data_parallel_.get());
  }
  runtime_ = std::make_unique<RuntimeScope>(memory_->store(), scheduler, replicas);
}

TrainingSession::~TrainingSession() {
  runtime_.reset();
  stepper_.reset();
  data_parallel_.reset();
  if (memory_ && memory_->uses_units()) workload_.set_unit_runner(nullptr);
}

StepOutput TrainingSession::step() { return step(sampler_->next()); }

StepOutput TrainingSession::step(std::vector<std::size_t> indices) {
  ++steps_;
  if (!data_parallel_) return stepper_->step(std::move(indices));
  std::vector<double> denominators = workload_.loss_denominators(indices);
  StepOutput out = stepper_->step(data_parallel_->shard(indices), std::move(denominators));
  if (steps_ % options_.dist.check_every == 0) data_parallel_->check_replicas(steps_);
  return out;
}

namespace {

/// Data-parallel: the metrics of every rank made one. Each rank's loss is its share of the
/// global batch's (the global denominators), so losses add up; other metrics are averaged.
void combine_ranks(dist::Communicator& comm, std::map<std::string, double>& mean) {
  std::vector<double> values;
  for (const auto& [k, v] : mean) values.push_back(v);
  at::Tensor t = at::tensor(values, at::kDouble);
  comm.allreduce(t, "the logged metrics");
  const auto* sum = t.data_ptr<double>();
  std::size_t i = 0;
  for (auto& [k, v] : mean) {
    const bool is_loss = k == "loss" || k.size() > 5 && k.compare(k.size() - 5, 5, "_loss") == 0;
    v = is_loss ? sum[i] : sum[i] / comm.world_size();
    ++i;
  }
}

/// Data-parallel: the log callback (a validation, say) runs on the rank with the least tracked
/// memory in use, the others wait for its verdict; returns the callback's stop flag, `mean`
/// with the entries it added.
bool log_on_one_rank(dist::Communicator& comm, const LogCallback& on_log, long step,
                     std::map<std::string, double>& mean) {
  at::Tensor live = at::zeros({comm.world_size()}, at::kLong);
  if (auto* tracker = memory::MemoryTracker::installed())
    live[comm.rank()] = tracker->live_bytes();
  comm.allreduce(live, "the ranks' memory in use");
  const int evaluator = static_cast<int>(live.argmin().item<std::int64_t>());
  std::string verdict;
  if (comm.rank() == evaluator) {
    const bool stop = on_log(step, mean);
    verdict = nlohmann::json{{"stop", stop}, {"metrics", mean}}.dump();
  }
  const auto result = nlohmann::json::parse(comm.broadcast_text(verdict, evaluator));
  mean = result.at("metrics").get<std::map<std::string, double>>();
  return result.at("stop").get<bool>();
}

}  // namespace

TrainSummary train(Workload& workload, const TrainingOptions& options, const LogCallback& on_log) {
  TrainingSession session(workload, options);
  dist::Communicator* comm = session.data_parallel() != nullptr
                                 ? &session.data_parallel()->communicator()
                                 : nullptr;
  std::ofstream metrics;
  if (!options.metrics_path.empty() && options.writes_files()) {
    metrics.open(options.metrics_path, std::ios::out | std::ios::trunc);
    if (!metrics)
      throw std::runtime_error("cannot write metrics file '" + options.metrics_path + "'");
  }
  ProgressBar bar(options.steps, options.progress && options.writes_files());
  const long batch = static_cast<long>(session.sampler().batch_size());  // global

  std::map<std::string, double> sums;
  int logged = 0;
  TrainSummary summary;
  auto start = std::chrono::steady_clock::now();
  long examples = 0;
  for (long step = 1; step <= options.steps; ++step) {
    StepOutput out = session.step();
    examples += batch;
    const double loss = out.loss.item<double>();
    if (!std::isfinite(loss)) {
      throw std::runtime_error("training diverged: loss is " + std::to_string(loss) + " at step " +
                               std::to_string(step) + " (try a lower learning rate)");
    }
    summary.final_loss = loss;
    summary.steps = step;
    sums["loss"] += loss;
    for (const auto& [k, v] : out.metrics) sums[k] += v;
    ++logged;
    bar.update(step, loss);
    if (step % options.log_every == 0 || step == options.steps) {
      std::map<std::string, double> mean;
      for (const auto& [k, v] : sums) mean[k] = v / logged;
      const auto now = std::chrono::steady_clock::now();
      const double elapsed = std::chrono::duration<double>(now - start).count();
      bool stop = false;
      if (comm != nullptr) {
        combine_ranks(*comm, mean);
        summary.final_loss = mean["loss"];  // the global batch's, over the last log window
      }
      if (on_log) {
        stop = comm != nullptr ? log_on_one_rank(*comm, on_log, step, mean) : on_log(step, mean);
        start += std::chrono::steady_clock::now() - now;  // the callback's time is not training
      }
      if (metrics.is_open()) {
        nlohmann::json line{{"step", step}, {"seconds", elapsed}};
        for (const auto& [k, v] : mean) line[k] = v;
        metrics << line.dump() << '\n' << std::flush;
      }
      sums.clear();
      logged = 0;
      if (stop) break;
    }
  }
  bar.finish();
  if (comm != nullptr) {
    session.data_parallel()->check_replicas(summary.steps);
    comm->barrier();  // no rank leaves (closing the store) while another still trains
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.examples_per_second = summary.seconds > 0 ? examples / summary.seconds : 0;
  if (const auto* compressing = session.memory().compressing())
    summary.compressed_tensors = compressing->stats().compressed_tensors;
  return summary;
}

}  // namespace engram::trainer
