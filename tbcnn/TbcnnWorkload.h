#pragma once
/// \file
/// The TBCNN as a trainer::Workload: examples are trees (whole files, or files with one statement
/// masked, tbcnn/TbcnnData.h); the loss is the cross-entropy of the model's classes, the metric
/// "error" the fraction of the batch whose best class is wrong.
///
/// \code
///   engram::tbcnn::TbcnnModel model(config);
///   const auto train = engram::tbcnn::make_examples(corpus, engram::datasets::Split::kTrain,
///                                                   config, /*statements_per_file=*/3);
///   engram::tbcnn::TbcnnWorkload workload(model, train);   // keeps a reference to `train`
///   engram::trainer::train(workload, options);
/// \endcode
///
/// Heavy header (torch): tbcnn sources and tests only; users go through tbcnn/Tbcnn.h.

#include "tbcnn/TbcnnData.h"
#include "tbcnn/TbcnnModel.h"
#include "trainer/Workload.h"

namespace engram::tbcnn {

class TbcnnWorkload final : public trainer::Workload {
 public:
  TbcnnWorkload(TbcnnModel model, const Examples& examples)
      : model_(std::move(model)), examples_(examples) {}
  std::vector<at::Tensor> parameters() override { return model_->parameters(); }
  /// The model there; its batches follow it (TbcnnModelImpl::encode).
  void to_device(const c10::Device& device) override { model_->to(device); }
  std::size_t num_examples() const override { return examples_.trees.size(); }
  trainer::StepOutput forward(const trainer::Batch& batch) override;

 private:
  TbcnnModel model_;
  const Examples& examples_;
};

}  // namespace engram::tbcnn
