#include "npi/NpiWorkload.h"

#include <algorithm>

namespace engram::npi {

std::vector<double> NpiWorkload::loss_denominators(const std::vector<std::size_t>& indices) const {
  const auto [steps, calls] = data_.count_steps(indices);
  return {static_cast<double>(steps), static_cast<double>(calls)};
}

void NpiWorkload::to_device(const c10::Device& device) {
  model_->to(device);
  device_ = device;
}

std::unique_ptr<trainer::Batch> NpiWorkload::make_batch(std::vector<std::size_t> indices) {
  auto batch = std::make_unique<NpiBatch>(data_.batch(indices));
  if (!device_.is_cpu()) {
    for (torch::Tensor* t : {&batch->features, &batch->programs, &batch->end_target,
                             &batch->callee_target, &batch->arg_targets, &batch->call_mask})
      *t = t->to(device_);
  }
  return batch;
}

trainer::StepOutput NpiWorkload::forward(const trainer::Batch& batch) {
  const auto& b = dynamic_cast<const NpiBatch&>(batch);
  namespace F = torch::nn::functional;
  model_->train();
  const NpiHeads out = model_->forward_packed(b.features, b.programs, b.batch_sizes, runner_);
  // Sums over the batch's steps (all of them; calls only) over the global batch's counts.
  const double steps = b.denominator(0, static_cast<double>(b.end_target.size(0)));
  const double calls =
      std::max(1.0, b.denominator(1, static_cast<double>(data_.count_steps(b.indices).second)));
  const auto end_loss = F::binary_cross_entropy_with_logits(
                            out.end_logit, b.end_target,
                            F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum)) /
                        steps;
  const auto program_loss =
      (F::cross_entropy(out.program_logits, b.callee_target,
                        F::CrossEntropyFuncOptions().reduction(torch::kNone)) *
       b.call_mask)
          .sum() /
      calls;
  const long arg_size = out.arg_logits.size(2);
  const auto arg_loss =
      (F::cross_entropy(out.arg_logits.reshape({-1, arg_size}), b.arg_targets.reshape({-1}),
                        F::CrossEntropyFuncOptions().reduction(torch::kNone))
           .view({-1, 3})
           .sum(1) *
       b.call_mask)
          .sum() /
      calls;
  trainer::StepOutput result;
  result.loss = end_loss + program_loss + arg_loss;
  {
    torch::NoGradGuard no_grad;
    // A step is wrong if any decision the interpreter would take differs from the reference.
    const auto end_wrong = (out.end_logit > 0).to(torch::kFloat) != b.end_target;
    const auto program_wrong = out.program_logits.argmax(1) != b.callee_target;
    const auto args_wrong = (out.arg_logits.argmax(2) != b.arg_targets).any(1);
    const auto wrong = end_wrong | ((program_wrong | args_wrong) & (b.call_mask > 0));
    result.metrics["step_error"] = wrong.to(torch::kFloat).mean().item<double>();
    result.metrics["end_loss"] = end_loss.item<double>();
    result.metrics["program_loss"] = program_loss.item<double>();
    result.metrics["arg_loss"] = arg_loss.item<double>();
  }
  return result;
}

}  // namespace engram::npi
