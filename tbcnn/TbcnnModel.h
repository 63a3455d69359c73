#pragma once
/// \file
/// The tree-based convolutional neural network of Mou et al. (2016) on the layers of nn/ (so the
/// memory techniques apply: its ReLU outputs go through the activation store), its localized
/// variant, and the bag-of-node-types baseline.
///
///   x_p   = E_type[type_p] (+ mean of E_token over p's identifier sub-tokens, --identifiers)
///           (+ E_pivot[p is the pivot], whole-tree model on the masked-statement task)
///   layer:  y_p = f(W_t x_p + sum_{c in window(p)} (eta_l(c) W_l + eta_r(c) W_r) x_c + b)
///           (localized: + (eta_l(p) U_l + eta_r(p) U_r) x_parent(p) where the window has it)
///           f = relu (default) or tanh; windows and eta as in tbcnn/TreeBatch.h
///           --residual: x <- f(y) + x after every layer but the first (same width)
///   tbcnn:      v = max over the tree's nodes of the last layer (dynamic max pooling)
///   localized:  v = the last layer at the pivot (the localized windows of tbcnn/TreeBatch.h)
///   bow:        v = the tree's node-type frequencies;  logits = W_out v + b_out for all three
///
/// Heavy header (torch): tbcnn sources and tests only; users go through tbcnn/Tbcnn.h.

#include "nn/Embedding.h"
#include "nn/Linear.h"
#include "tbcnn/TreeBatch.h"

#include <torch/torch.h>

#include <string>
#include <vector>

namespace engram::tbcnn {

struct TbcnnConfig {
  std::string model = "tbcnn";  ///< "tbcnn", "localized" or "bow"
  /// "classify" (a class per file), "masked" (statement kinds) or "loop" (the class of a file
  /// at the loop of its last function: the high-order function the loop computes)
  std::string task = "classify";
  std::string language = "python";
  std::vector<std::string> vocabulary;  ///< node types; the masked task adds "<mask>" last
  std::vector<std::string> classes;
  int embedding = 64;     ///< node vector width
  int channels = 128;     ///< convolution output width
  int layers = 2;         ///< convolution layers
  bool residual = false;  ///< x_{l+1} = f(conv(x_l)) + x_l for every layer but the first
  std::string activation = "relu";
  bool identifiers = false;  ///< add hashed identifier sub-token embeddings
  int buckets = 8192;        ///< identifier sub-token hash buckets
  bool pivot_flag = false;   ///< whole-tree model: mark the pivot by an input embedding

  bool localized() const { return model == "localized"; }
  std::string to_json() const;
  /// Throws FormatError.
  static TbcnnConfig from_json(const std::string& text);
};

/// Throws InvalidOption ("model", "activation") unless `model` is tbcnn, localized or bow and
/// `activation` relu or tanh: what a model can be built from, checked before any file is read.
void check_model_and_activation(const std::string& model, const std::string& activation);

class TbcnnModelImpl : public torch::nn::Module {
 public:
  /// Throws UsageError for an unknown model or activation.
  explicit TbcnnModelImpl(TbcnnConfig config);
  /// [B, classes]
  torch::Tensor forward(const TreeBatch& batch);
  /// The tree (or pivot) vector v before the classifier: [B, channels] ([B, vocabulary] for bow).
  torch::Tensor encode(const TreeBatch& batch);
  /// The classifier on vectors from encode(): [B, classes]; forward(b) is classify(encode(b)).
  torch::Tensor classify(const torch::Tensor& vectors);
  const TbcnnConfig& config() const { return config_; }

 private:
  TbcnnConfig config_;
  nn::Embedding types_{nullptr}, tokens_{nullptr}, pivot_{nullptr};
  std::vector<nn::Linear> top_, left_, right_;
  std::vector<nn::Linear> up_left_, up_right_;  ///< localized: the parent term (U_l, U_r)
  nn::Linear out_{nullptr};
};
TORCH_MODULE(TbcnnModel);

}  // namespace engram::tbcnn
