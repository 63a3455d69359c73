#include "primitives/PrimitiveWorkload.h"

namespace engram::primitives {

void PrimitiveWorkload::to_device(const c10::Device& device) {
  net_->to(device);
  inputs_ = examples_.inputs.to(device);
  targets_ = examples_.targets.to(device);
}

trainer::StepOutput PrimitiveWorkload::forward(const trainer::Batch& b) {
  const std::vector<std::size_t>& batch = b.indices;
  net_->train();
  std::vector<int64_t> rows(batch.begin(), batch.end());
  const auto index = torch::tensor(rows, torch::kLong).to(inputs_.device());
  const auto logits = net_->forward(inputs_.index_select(0, index));
  const auto targets = targets_.index_select(0, index);
  trainer::StepOutput out;
  out.loss = torch::nn::functional::cross_entropy(
                 logits, targets,
                 torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
             b.denominator(0, static_cast<double>(batch.size()));
  {
    torch::NoGradGuard no_grad;
    out.metrics["error"] = (logits.argmax(1) != targets).to(torch::kFloat).mean().item<double>();
  }
  return out;
}

long PrimitiveWorkload::count_correct() {
  torch::NoGradGuard no_grad;
  net_->eval();
  long correct = 0;
  const long total = targets_.size(0);
  constexpr long kChunk = 65536;
  for (long start = 0; start < total; start += kChunk) {
    const long len = std::min(kChunk, total - start);
    const auto logits = net_->forward(inputs_.narrow(0, start, len));
    correct += (logits.argmax(1) == targets_.narrow(0, start, len)).sum().item<long>();
  }
  return correct;
}

}  // namespace engram::primitives
