#pragma once
/// \file
/// The NPI as a trainer::Workload: examples are traces; the loss is maximum likelihood of the
/// reference decisions (return or call, which program, which arguments) at every step.

#include "npi/NpiData.h"
#include "npi/NpiModel.h"
#include "trainer/Workload.h"

namespace engram::npi {

class NpiWorkload final : public trainer::Workload {
 public:
  NpiWorkload(NpiModel model, const NpiDataset& data) : model_(std::move(model)), data_(data) {}
  std::vector<at::Tensor> parameters() override { return model_->parameters(); }
  /// The model there, and every batch's tensors but the packed lengths (batch_sizes stays on the
  /// CPU, where the LSTMs read it).
  void to_device(const c10::Device& device) override;
  std::size_t num_examples() const override { return data_.num_traces(); }
  /// The traces' invocations packed (an NpiBatch).
  std::unique_ptr<trainer::Batch> make_batch(std::vector<std::size_t> indices) override;
  /// Loss and metrics of a batch from make_batch().
  trainer::StepOutput forward(const trainer::Batch& batch) override;
  /// {steps, call steps} of these traces: what the end loss and the call losses average over.
  std::vector<double> loss_denominators(const std::vector<std::size_t>& indices) const override;
  /// The traces' problem lengths (digits, list elements), for a curriculum.
  std::vector<int> example_lengths() const override { return data_.trace_lengths(); }
  /// The packed batch's shape: its invocations' lengths.
  std::uint64_t step_signature(const std::vector<std::size_t>& indices) const override {
    return data_.shape_signature(indices);
  }

  /// "encoder", "core" (NpiModelImpl::units) with the layers of nn/; none with torch modules.
  std::vector<std::string> unit_names() const override { return model_->unit_names(); }
  void set_unit_runner(nn::UnitRunner* runner) override { runner_ = runner; }

 private:
  NpiModel model_;
  const NpiDataset& data_;
  nn::UnitRunner* runner_ = nullptr;
  c10::Device device_{c10::kCPU};
};

}  // namespace engram::npi
