#include "trainer/Trainer.h"

#include "common/Errors.h"
#include "nn/Runtime.h"
#include "trainer/BatchSampler.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/ProgressBar.h"
#include "trainer/Stepper.h"
#include "trainer/Threads.h"

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
  explicit RuntimeScope(memory::ActivationStore* store) : guard(store, nullptr) {}
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
  runtime_ = std::make_unique<RuntimeScope>(memory_->store());
  sampler_ = std::make_unique<BatchSampler>(n, static_cast<std::size_t>(options_.batch),
                                            options_.seed);
  stepper_ = std::make_unique<Stepper>(
      workload, StepperOptions{options_.learning_rate, options_.grad_clip});
}

TrainingSession::~TrainingSession() {
  stepper_.reset();
  runtime_.reset();
  if (memory_ && memory_->uses_units()) workload_.set_unit_runner(nullptr);
}

StepOutput TrainingSession::step() { return stepper_->step(sampler_->next()); }

StepOutput TrainingSession::step(std::vector<std::size_t> indices) {
  return stepper_->step(std::move(indices));
}

TrainSummary train(Workload& workload, const TrainingOptions& options, const LogCallback& on_log) {
  TrainingSession session(workload, options);
  std::ofstream metrics;
  if (!options.metrics_path.empty()) {
    metrics.open(options.metrics_path, std::ios::out | std::ios::trunc);
    if (!metrics)
      throw std::runtime_error("cannot write metrics file '" + options.metrics_path + "'");
  }
  ProgressBar bar(options.steps, options.progress);
  const long batch = static_cast<long>(session.sampler().batch_size());

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
      if (on_log) {
        stop = on_log(step, mean);
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
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.examples_per_second = summary.seconds > 0 ? examples / summary.seconds : 0;
  if (const auto* compressing = session.memory().compressing())
    summary.compressed_tensors = compressing->stats().compressed_tensors;
  return summary;
}

}  // namespace engram::trainer
