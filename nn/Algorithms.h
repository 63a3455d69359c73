#pragma once
/// \file
/// Layers whose algorithm can be replaced by another that computes the same result with less
/// workspace (lower-memory algorithm replacement, trainer/MemoryTechniques.h, technique "algo").
/// No torch here: a workload lists its replaceable layers (trainer::Workload::algorithm_layers)
/// and the planner measures and sets them through this interface.
///
/// \code
///   engram::nn::AlgorithmLayer& conv = ...;        // nn::Conv2dImpl is one
///   conv.algorithms();                           // {"default", "im2col", "direct"}
///   auto costs = conv.measure_algorithms(2);     // on the shape of its last forward's input
///   conv.set_algorithm("direct");                // from the next forward on
/// \endcode

#include <cstdint>
#include <string>
#include <vector>

namespace engram::nn {

/// One algorithm of a layer, measured in isolation on the input shape of the layer's last
/// forward (memory/MemoryTracker.h counts the bytes).
struct AlgorithmCost {
  std::string algorithm;
  /// The most bytes the algorithm held at once beyond its inputs and its results, in forward or
  /// in backward (input gradient, weight and bias gradients).
  std::int64_t workspace_bytes = 0;
  double forward_ms = 0, backward_ms = 0;
  /// Largest absolute difference of its output and gradients from the default algorithm's on
  /// the same random input and output gradient (0 for the default itself).
  double max_abs_diff = 0;
  /// The same over the largest absolute value of the default's tensor, the largest of the
  /// output's and the gradients' (float32 sums in another order: around 1e-6).
  double max_rel_diff = 0;
};

class AlgorithmLayer {
 public:
  virtual ~AlgorithmLayer() = default;
  /// The algorithms it can run, the default first.
  virtual std::vector<std::string> algorithms() const = 0;
  /// The one it runs now.
  virtual std::string algorithm() const = 0;
  /// Runs `name` (one of algorithms()) from the next forward on; throws std::invalid_argument
  /// for another name.
  virtual void set_algorithm(const std::string& name) = 0;
  /// Measures every algorithm (one warm-up run, then the median of `repeats` timed runs) on a
  /// random input of the shape its last forward saw. Throws std::logic_error before any
  /// forward, and when no memory tracker is installed.
  virtual std::vector<AlgorithmCost> measure_algorithms(int repeats) = 0;
};

/// A workload's replaceable layer and its name in the model (e.g. "stage1.0.conv1").
struct NamedAlgorithmLayer {
  std::string name;
  AlgorithmLayer* layer = nullptr;
};

}  // namespace engram::nn
