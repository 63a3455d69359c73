#pragma once
/// \file
/// Training a primitive network (primitives/PrimitiveNet.h) as a trainer::Workload: examples are
/// the rows of its domain (all_examples); the loss is the cross-entropy of the exact results, the
/// metric "error" the fraction of the batch whose argmax is wrong. count_correct() scores the whole
/// domain, which the training loop's on_log checks to stop once the network is exact.
///
/// \code
///   auto config = engram::primitives::PrimitiveNetConfig::for_family("add", 10);
///   engram::primitives::PrimitiveNet net(config);
///   const auto examples = engram::primitives::all_examples(config);
///   engram::primitives::PrimitiveWorkload workload(net, examples);  // keeps a reference
///   engram::trainer::train(workload, options);
///   bool exact = workload.count_correct() == static_cast<long>(workload.num_examples());
/// \endcode
///
/// Heavy header (torch): include it from primitives sources and tests only; users go through
/// primitives/Primitives.h.

#include "primitives/PrimitiveNet.h"
#include "trainer/Workload.h"

namespace engram::primitives {

/// Training a primitive network as a trainer::Workload: examples are the domain's inputs.
class PrimitiveWorkload final : public trainer::Workload {
 public:
  PrimitiveWorkload(PrimitiveNet net, const Examples& examples)
      : net_(std::move(net)),
        examples_(examples),
        inputs_(examples.inputs),
        targets_(examples.targets) {}
  std::vector<at::Tensor> parameters() override { return net_->parameters(); }
  /// The network there, with a copy of the examples (the whole domain, small).
  void to_device(const c10::Device& device) override;
  std::size_t num_examples() const override {
    return static_cast<std::size_t>(examples_.targets.size(0));
  }
  trainer::StepOutput forward(const trainer::Batch& batch) override;
  /// Examples whose argmax equals the exact result, over the whole domain.
  long count_correct();

 private:
  PrimitiveNet net_;
  const Examples& examples_;
  /// The examples where the network is: examples_'s own tensors on the CPU.
  at::Tensor inputs_, targets_;
};

}  // namespace engram::primitives
