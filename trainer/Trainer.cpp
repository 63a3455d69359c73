#include "trainer/Trainer.h"

#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "trainer/FusedAdam.h"
#include "trainer/ProgressBar.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>

namespace engram::trainer {

StepOutput run_step_forward_backward(Workload& workload, const std::vector<std::size_t>& batch) {
  StepOutput out;
  {
    memory::PhaseGuard phase(memory::Phase::forward);
    memory::SpanGuard span("forward", "phase");
    out = workload.forward(batch);
  }
  memory::PhaseGuard phase(memory::Phase::backward);
  memory::SpanGuard span("backward", "phase");
  out.loss.backward();
  // Weight gradients a scheduler held back (nn/GradScheduler.h) are due before the optimizer.
  nn::current_runtime().scheduler->finish();
  return out;
}

TrainSummary train(Workload& workload, const TrainerOptions& options) {
  const std::size_t n = workload.num_examples();
  if (n == 0) throw std::runtime_error("no training examples");
  if (options.steps < 0) throw std::invalid_argument("steps must be non-negative");
  if (options.log_every < 1) throw std::invalid_argument("log_every must be at least 1");
  const std::size_t batch = std::min<std::size_t>(std::max(1, options.batch_size), n);

  auto params = workload.parameters();
  std::optional<FusedAdam> optimizer_holder;
  {
    memory::TagGuard tag(memory::Tag::optimizer_state);  // FusedAdam allocates its moments here
    optimizer_holder.emplace(params, options.learning_rate);
  }
  FusedAdam& optimizer = *optimizer_holder;

  std::ofstream metrics;
  if (!options.metrics_path.empty()) {
    metrics.open(options.metrics_path, std::ios::out | std::ios::trunc);
    if (!metrics)
      throw std::runtime_error("cannot write metrics file '" + options.metrics_path + "'");
  }
  ProgressBar bar(options.steps, options.progress);

  std::mt19937_64 rng(options.seed);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::size_t cursor = 0;

  std::map<std::string, double> sums;
  int logged = 0;
  TrainSummary summary;
  auto start = std::chrono::steady_clock::now();
  long examples = 0;
  for (long step = 1; step <= options.steps; ++step) {
    std::vector<std::size_t> indices;
    indices.reserve(batch);
    while (indices.size() < batch) {
      if (cursor == n) {
        std::shuffle(order.begin(), order.end(), rng);
        cursor = 0;
      }
      indices.push_back(order[cursor++]);
    }
    optimizer.zero_grad();
    StepOutput out = run_step_forward_backward(workload, indices);
    {
      memory::PhaseGuard phase(memory::Phase::optimizer);
      memory::SpanGuard span("optimizer", "phase");
      if (options.grad_clip > 0) torch::nn::utils::clip_grad_norm_(params, options.grad_clip);
      optimizer.step();
    }
    examples += static_cast<long>(batch);

    const double loss = out.loss.item<double>();
    if (!std::isfinite(loss)) {
      throw std::runtime_error("training diverged: loss is " + std::to_string(loss) + " at step " +
                               std::to_string(step) + " (try a lower --lr)");
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
      if (options.on_log) {
        stop = options.on_log(step, mean);
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
  return summary;
}

}  // namespace engram::trainer
