#pragma once
/// \file
/// The CIFAR ResNet-18 of resnet/ResNet.h as a trainer::Workload on synthetic images: the standard
/// reference point of the memory literature, at any batch and image size, with no data set on
/// disk.
///
/// \code
///   engram::resnet::SyntheticImages images;              // 32x32 RGB, 10 classes, seed 1
///   images.num_examples = 32;
///   engram::resnet::ResNetWorkload workload(engram::resnet::ResNet(), images);
///   engram::trainer::StepOutput out = workload.forward(*workload.make_batch({0, 1, 2, 3}));
///   out.loss.backward();
/// \endcode
///
/// Example i is an image of independent standard normal values and a uniformly drawn label, both
/// from a CPU generator seeded with seed * 1000003 + i: the same whatever batch it is drawn in.
/// The images and labels of a batch are made in forward(), so they are part of the step (an
/// activation of the step's memory, as the input of a loader's batch would be).

#include "resnet/ResNet.h"
#include "trainer/Workload.h"

#include <cstdint>
#include <utility>

namespace engram::resnet {

struct SyntheticImages {
  std::size_t num_examples = 32;
  int64_t image_size = 32;  ///< height and width
  int64_t channels = 3;
  int64_t num_classes = 10;
  std::uint64_t seed = 1;
};

class ResNetWorkload final : public trainer::Workload {
 public:
  /// Throws std::invalid_argument when `data` does not fit the model (channels, classes) or has
  /// no examples or no pixels.
  ResNetWorkload(ResNet model, SyntheticImages data);

  std::vector<at::Tensor> parameters() override { return model_->parameters(); }
  /// The model there (parameters and batch-norm statistics); each batch is drawn on the CPU, as
  /// on any device, and copied there.
  void to_device(const c10::Device& device) override;
  std::size_t num_examples() const override { return data_.num_examples; }
  /// Mean cross-entropy over the batch; metric "accuracy".
  trainer::StepOutput forward(const trainer::Batch& batch) override;

  /// Images [B, channels, size, size] (float) and labels [B] (int64) of these examples.
  std::pair<at::Tensor, at::Tensor> batch(const std::vector<std::size_t>& indices) const;

  /// "stem", "stage1.0", ...: resnet_units().
  std::vector<std::string> unit_names() const override;
  void set_unit_runner(nn::UnitRunner* runner) override { runner_ = runner; }
  /// Every convolution ("stem.conv", "stage1.0.conv1", ...), in the model's module order.
  std::vector<nn::NamedAlgorithmLayer> algorithm_layers() override;

  ResNet& model() { return model_; }
  const SyntheticImages& data() const { return data_; }

 private:
  ResNet model_;
  SyntheticImages data_;
  c10::Device device_{c10::kCPU};
  nn::UnitRunner* runner_ = nullptr;
};

}  // namespace engram::resnet
