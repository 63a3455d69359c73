#include "nn/Embedding.h"

#include "nn/detail/FunctionSupport.h"

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;

struct EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& indices,
                            const at::Tensor& weight) {
    TORCH_CHECK(weight.dim() == 2, "nn::embedding: weight must be [num, dim]");
    TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
                "nn::embedding: indices must be int64 or int32");
    detail::capture_runtime(ctx);
    detail::save(ctx, "indices", indices, memory::SavedKind::other);
    ctx->saved_data["num_weights"] = weight.size(0);
    detail::save(ctx, "weight", weight, memory::SavedKind::parameter);
    return at::embedding(weight, indices);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor indices = detail::load(ctx, "indices");
    const at::Tensor weight = detail::load(ctx, "weight");
    const int64_t num_weights = ctx->saved_data["num_weights"].toInt();
    const at::Tensor g = grad_outputs[0];
    detail::submit_weight_grad(
        ctx, WeightGradTask{"embedding", {weight}, [weight, indices, g, num_weights] {
                              detail::accumulate_grad(weight, at::embedding_dense_backward(
                                                                  g, indices, num_weights,
                                                                  /*padding_idx=*/-1,
                                                                  /*scale_grad_by_freq=*/false));
                            }});
    return {at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor embedding(const at::Tensor& indices, const at::Tensor& weight) {
  detail::gate_parameters({weight});
  detail::SavingScope saving({weight});
  return EmbeddingFunction::apply(indices, weight);
}

EmbeddingImpl::EmbeddingImpl(EmbeddingOptions options_) : options(options_) { reset(); }

void EmbeddingImpl::reset() {
  TORCH_CHECK(options.num_embeddings() > 0 && options.embedding_dim() > 0,
              "nn::Embedding: sizes must be positive");
  weight = register_parameter("weight",
                              torch::empty({options.num_embeddings(), options.embedding_dim()}));
  torch::NoGradGuard no_grad;
  weight.normal_(0, 1);  // as torch::nn::Embedding
}

at::Tensor EmbeddingImpl::forward(const at::Tensor& indices) {
  return nn::embedding(indices, weight);
}

}  // namespace engram::nn
