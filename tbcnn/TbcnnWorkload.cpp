#include "tbcnn/TbcnnWorkload.h"

namespace engram::tbcnn {

trainer::StepOutput TbcnnWorkload::forward(const trainer::Batch& b) {
  const std::vector<std::size_t>& batch = b.indices;
  model_->train();
  const auto logits = model_->forward(batch_of(examples_, batch, model_->config()));
  std::vector<int64_t> labels;
  for (auto i : batch) labels.push_back(examples_.labels[i]);
  const auto target = torch::tensor(labels, torch::kLong).to(logits.device());
  trainer::StepOutput out;
  out.loss =
      torch::nn::functional::cross_entropy(
          logits, target, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
      b.denominator(0, static_cast<double>(batch.size()));
  {
    torch::NoGradGuard no_grad;
    out.metrics["error"] = (logits.argmax(1) != target).to(torch::kFloat).mean().item<double>();
  }
  return out;
}

}  // namespace engram::tbcnn
