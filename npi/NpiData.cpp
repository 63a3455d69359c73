#include "npi/NpiData.h"

#include <algorithm>
#include <numeric>

namespace engram::npi {

void feature_indices(const std::vector<int>& observation_sizes, int arg_size,
                     const std::vector<int>& observation, const datasets::Args& args, long* out) {
  long offset = 0;
  for (std::size_t k = 0; k < observation_sizes.size(); ++k) {
    out[k] = offset + observation[k];
    offset += observation_sizes[k];
  }
  for (int a = 0; a < datasets::kNumArgs; ++a) {
    out[observation_sizes.size() + a] = offset + args[a];
    offset += arg_size;
  }
}

NpiDataset::NpiDataset(const datasets::Task& task, const std::vector<datasets::Trace>& traces) {
  const auto sizes = task.observation_sizes();
  const int slots = static_cast<int>(sizes.size()) + datasets::kNumArgs;
  feature_dim_ = std::accumulate(sizes.begin(), sizes.end(), 0) + 3 * task.arg_size();
  std::size_t steps = 0;
  for (const auto& t : traces) {
    for (const auto& inv : t.invocations) steps += inv.steps.size();
  }
  const auto s = static_cast<long>(steps);
  active_ = torch::empty({s, slots}, torch::kLong);
  programs_ = torch::empty({s}, torch::kLong);
  end_ = torch::empty({s}, torch::kFloat);
  callee_ = torch::empty({s}, torch::kLong);
  args_ = torch::empty({s, 3}, torch::kLong);
  auto* active = active_.data_ptr<long>();
  auto* programs = programs_.data_ptr<long>();
  auto* end = end_.data_ptr<float>();
  auto* callee = callee_.data_ptr<long>();
  auto* args = args_.data_ptr<long>();
  long row = 0;
  for (const auto& t : traces) {
    trace_first_.push_back(inv_start_.size());
    trace_count_.push_back(t.invocations.size());
    trace_lengths_.push_back(task.make_environment(t.input)->length());
    trace_steps_.push_back(0);
    trace_calls_.push_back(0);
    for (const auto& inv : t.invocations) {
      inv_start_.push_back(row);
      inv_len_.push_back(static_cast<long>(inv.steps.size()));
      for (const auto& step : inv.steps) {
        feature_indices(sizes, task.arg_size(), step.observation, inv.args, active + row * slots);
        programs[row] = inv.program;
        end[row] = step.end ? 1.f : 0.f;
        ++trace_steps_.back();
        if (!step.end) ++trace_calls_.back();
        callee[row] = step.end ? 0 : step.callee;
        for (int a = 0; a < 3; ++a) args[row * 3 + a] = step.end ? 0 : step.callee_args[a];
        ++row;
      }
    }
  }
}

std::pair<std::size_t, std::size_t> NpiDataset::count_steps(
    const std::vector<std::size_t>& traces) const {
  std::size_t steps = 0, calls = 0;
  for (auto t : traces) {
    steps += trace_steps_.at(t);
    calls += trace_calls_.at(t);
  }
  return {steps, calls};
}

std::uint64_t NpiDataset::shape_signature(const std::vector<std::size_t>& traces) const {
  std::vector<long> lengths;
  for (auto t : traces) {
    for (std::size_t i = 0; i < trace_count_.at(t); ++i)
      lengths.push_back(inv_len_[trace_first_[t] + i]);
  }
  std::sort(lengths.begin(), lengths.end());
  lengths.push_back(static_cast<long>(count_steps(traces).second));
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the numbers
  for (long v : lengths) {
    for (int b = 0; b < 8; ++b) {
      hash ^= static_cast<std::uint64_t>(v >> (8 * b)) & 0xffu;
      hash *= 1099511628211ull;
    }
  }
  return hash;
}

NpiBatch NpiDataset::batch(const std::vector<std::size_t>& traces) const {
  std::vector<long> invs;
  for (auto t : traces) {
    for (std::size_t i = 0; i < trace_count_.at(t); ++i) invs.push_back(trace_first_[t] + i);
  }
  std::stable_sort(invs.begin(), invs.end(),
                   [&](long a, long b) { return inv_len_[a] > inv_len_[b]; });
  const long max_len = invs.empty() ? 0 : inv_len_[invs.front()];
  std::vector<long> order;
  std::vector<long> batch_sizes;
  for (long t = 0; t < max_len; ++t) {
    long running = 0;
    for (long inv : invs) {
      if (inv_len_[inv] <= t) break;
      order.push_back(inv_start_[inv] + t);
      ++running;
    }
    batch_sizes.push_back(running);
  }
  const auto index =
      torch::from_blob(order.data(), {static_cast<long>(order.size())}, torch::kLong);
  NpiBatch b;
  b.indices = traces;
  const auto active = active_.index_select(0, index);
  b.features = torch::zeros({index.size(0), feature_dim_}).scatter_(1, active, 1.0);
  b.programs = programs_.index_select(0, index);
  b.batch_sizes = torch::tensor(batch_sizes, torch::kLong);
  b.end_target = end_.index_select(0, index);
  b.callee_target = callee_.index_select(0, index);
  b.arg_targets = args_.index_select(0, index);
  b.call_mask = 1.0 - b.end_target;
  return b;
}

}  // namespace engram::npi
