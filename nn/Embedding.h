#pragma once
/// \file
/// Embedding lookup as an autograd Function of nn/: rows of a weight table by index. It saves the
/// indices only; the weight gradient (a scatter-add of the output gradient into the table's rows)
/// is the scheduler's task, and there is no input gradient.
///
/// \code
///   engram::nn::Embedding table(engram::nn::EmbeddingOptions(10, 64));
///   at::Tensor rows = table(indices);            // indices int64 [...] -> [..., 64]
/// \endcode
///
/// Parameters and initialization as torch::nn::Embedding (weight [num, dim] from N(0, 1)).

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace engram::nn {

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TORCH_ARG(int64_t, num_embeddings);
  TORCH_ARG(int64_t, embedding_dim);
};

/// weight[indices]; throws c10::Error for an index out of range.
at::Tensor embedding(const at::Tensor& indices, const at::Tensor& weight);

class EmbeddingImpl : public torch::nn::Cloneable<EmbeddingImpl> {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(EmbeddingOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& indices);

  EmbeddingOptions options;
  at::Tensor weight;  ///< [num_embeddings, embedding_dim]
};
TORCH_MODULE(Embedding);

}  // namespace engram::nn
