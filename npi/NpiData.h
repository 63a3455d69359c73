#pragma once
/// \file
/// Execution traces as training tensors. Every invocation of a trace is an independent sequence
/// (each call starts from a fresh core state), so a batch of traces becomes one packed batch of
/// sequences: no padding, one LSTM call.

#include "datasets/Task.h"
#include "npi/NpiModel.h"
#include "trainer/Workload.h"

#include <utility>
#include <vector>

namespace engram::npi {

/// Column indices of the ones in a step's encoder input (see NpiConfig::feature_dim): one per
/// observation slot, then one per argument.
void feature_indices(const std::vector<int>& observation_sizes, int arg_size,
                     const std::vector<int>& observation, const datasets::Args& args, long* out);

/// One packed training batch (the trainer's Batch of an NPI step: `indices` are the traces).
struct NpiBatch : trainer::Batch {
  torch::Tensor features;       ///< [N, feature_dim] one-hot, packed order
  torch::Tensor programs;       ///< [N] running program
  torch::Tensor batch_sizes;    ///< [T]
  torch::Tensor end_target;     ///< [N] float, 1 at return steps
  torch::Tensor callee_target;  ///< [N] long
  torch::Tensor arg_targets;    ///< [N, 3] long
  torch::Tensor call_mask;      ///< [N] float, 1 at call steps
};

class NpiDataset {
 public:
  NpiDataset(const datasets::Task& task, const std::vector<datasets::Trace>& traces);
  std::size_t num_traces() const { return trace_first_.size(); }
  /// Each trace's problem length (the environment's length: digits, list elements).
  const std::vector<int>& trace_lengths() const { return trace_lengths_; }
  std::size_t num_steps() const { return static_cast<std::size_t>(programs_.size(0)); }
  /// All invocations of the given traces, packed.
  NpiBatch batch(const std::vector<std::size_t>& traces) const;
  /// {steps, call steps} in the given traces (what batch() would pack), without packing.
  std::pair<std::size_t, std::size_t> count_steps(const std::vector<std::size_t>& traces) const;
  /// A hash of what batch() of these traces packs: its invocations' lengths (sorted) and its
  /// call steps; equal for batches of equal shapes.
  std::uint64_t shape_signature(const std::vector<std::size_t>& traces) const;

 private:
  int feature_dim_;
  torch::Tensor active_;  ///< [S, slots + 3] feature indices
  torch::Tensor programs_, end_, callee_, args_;
  std::vector<long> inv_start_, inv_len_;
  std::vector<std::size_t> trace_first_, trace_count_;
  std::vector<std::size_t> trace_steps_, trace_calls_;  ///< per trace: steps, call steps
  std::vector<int> trace_lengths_;
};

}  // namespace engram::npi
