#pragma once
/// \file
/// The network of one learned primitive, built from the layers of nn/: an embedding table per
/// input (x; y for binary primitives; the carry for the full adder; the parameter c for families
/// such as gt(c)), concatenated, two ReLU layers and a classifier over the results (K values,
/// false/true for predicates, 0..2K-1 for the full adder).
///
///   e = [E_x[x], E_y[y], E_c[c]]      (the inputs the primitive has)
///   z = W3 relu(W2 relu(W1 e + b1) + b2) + b3,   result = argmax z
///
/// Trained on every input of the domain (datasets/Primitive.h gives the exact values), so
/// "exact on the whole domain" is something the training loop checks and stops on.
///
/// \code
///   auto config = engram::primitives::PrimitiveNetConfig::for_family("add", 10);
///   engram::primitives::PrimitiveNet net(config);
///   auto examples = engram::primitives::all_examples(config);   // 100 pairs and their sums
///   auto logits = net->forward(examples.inputs);               // [100, 10]
/// \endcode
///
/// Heavy header (torch): include it from primitives sources and tests only; users go through
/// primitives/Primitives.h.

#include "datasets/Primitive.h"
#include "nn/Embedding.h"
#include "nn/Linear.h"

#include <torch/torch.h>

#include <string>
#include <vector>

namespace engram::primitives {

struct PrimitiveNetConfig {
  std::string family;  ///< catalog family, e.g. "gt"
  datasets::PrimitiveKind kind = datasets::PrimitiveKind::kUnary;
  bool has_parameter = false;
  int min_parameter = 0;
  int k = 10;          ///< domain size
  int embedding = 32;  ///< width of each input's embedding
  int hidden = 256;    ///< width of the two hidden layers

  /// x, then y (binary, full adder), then the carry (full adder), then the parameter.
  int num_inputs() const;
  /// K; 2 for predicates; 2K for the full adder.
  int num_outputs() const;
  /// The default configuration of a catalog family for domain k; InputError for an unknown one.
  static PrimitiveNetConfig for_family(const std::string& family, int k);
};

/// Every input of the domain with its exact result, in a fixed order.
struct Examples {
  torch::Tensor inputs;   ///< [M, num_inputs] int64
  torch::Tensor targets;  ///< [M] int64
};
Examples all_examples(const PrimitiveNetConfig& config);

class PrimitiveNetImpl : public torch::nn::Module {
 public:
  explicit PrimitiveNetImpl(PrimitiveNetConfig config);
  /// `inputs` [N, num_inputs] int64 -> logits [N, num_outputs].
  torch::Tensor forward(const torch::Tensor& inputs);
  const PrimitiveNetConfig& config() const { return config_; }

 private:
  PrimitiveNetConfig config_;
  std::vector<nn::Embedding> tables_;
  nn::Linear hidden1_{nullptr}, hidden2_{nullptr}, out_{nullptr};
};
TORCH_MODULE(PrimitiveNet);

}  // namespace engram::primitives
