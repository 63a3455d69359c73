#include "resnet/ResNetWorkload.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

namespace engram::resnet {

ResNetWorkload::ResNetWorkload(ResNet model, SyntheticImages data)
    : model_(std::move(model)), data_(data) {
  if (data_.num_examples == 0 || data_.image_size < 1) {
    throw std::invalid_argument("synthetic images: at least one example of at least 1x1 expected");
  }
  if (data_.channels != model_->options.in_channels() ||
      data_.num_classes != model_->options.num_classes()) {
    throw std::invalid_argument("synthetic images of " + std::to_string(data_.channels) +
                                " channels and " + std::to_string(data_.num_classes) +
                                " classes do not fit the model");
  }
}

void ResNetWorkload::to_device(const c10::Device& device) {
  model_->to(device);
  device_ = device;
}

std::pair<at::Tensor, at::Tensor> ResNetWorkload::batch(
    const std::vector<std::size_t>& indices) const {
  const auto b = static_cast<int64_t>(indices.size());
  const int64_t s = data_.image_size;
  at::Tensor images = torch::empty({b, data_.channels, s, s});
  at::Tensor labels = torch::empty({b}, torch::kLong);
  for (int64_t k = 0; k < b; ++k) {
    const std::size_t i = indices[static_cast<std::size_t>(k)];
    if (i >= data_.num_examples)
      throw std::out_of_range("synthetic images: no example " + std::to_string(i));
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(data_.seed * 1000003 + i);
    images[k].normal_(0.0, 1.0, gen);
    labels[k].random_(0, data_.num_classes, gen);
  }
  if (!device_.is_cpu()) return {images.to(device_), labels.to(device_)};
  return {images, labels};
}

std::vector<std::string> ResNetWorkload::unit_names() const {
  std::vector<std::string> names;
  for (const auto& unit : resnet_units(model_)) names.push_back(unit.name);
  return names;
}

std::vector<nn::NamedAlgorithmLayer> ResNetWorkload::algorithm_layers() {
  std::vector<nn::NamedAlgorithmLayer> layers;
  for (const auto& item : model_->named_modules()) {
    if (auto* conv = item.value()->as<nn::Conv2dImpl>()) layers.push_back({item.key(), conv});
  }
  return layers;
}

trainer::StepOutput ResNetWorkload::forward(const trainer::Batch& b) {
  auto [images, labels] = batch(b.indices);
  const at::Tensor logits = runner_ != nullptr
                                ? model_->head(runner_->forward(resnet_units(model_), images))
                                : model_(images);
  trainer::StepOutput out;
  out.loss =
      torch::nn::functional::cross_entropy(
          logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
      b.denominator(0, static_cast<double>(b.indices.size()));
  {
    torch::NoGradGuard no_grad;
    out.metrics["accuracy"] = logits.argmax(1).eq(labels).to(torch::kDouble).mean().item<double>();
  }
  return out;
}

}  // namespace engram::resnet
