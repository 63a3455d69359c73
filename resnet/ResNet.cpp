#include "resnet/ResNet.h"

#include <string>

namespace engram::resnet {

using nn::BatchNorm2d;
using nn::BatchNorm2dOptions;
using nn::Conv2d;
using nn::Conv2dOptions;
using nn::Linear;
using nn::LinearOptions;
using nn::ReLU;
using nn::ReLUOptions;
using nn::Unit;

namespace {

/// A block's projection shortcut (1x1 convolution at the block's stride, no bias, and a
/// BatchNorm) registered when the shape changes; both left empty for the identity.
template <class Block>
void register_shortcut(Block& block, int64_t in, int64_t out, int64_t stride) {
  block.shortcut_conv = nullptr;
  block.shortcut_bn = nullptr;
  if (stride != 1 || in != out) {
    block.shortcut_conv = block.register_module(
        "shortcut_conv", Conv2d(Conv2dOptions(in, out, 1).stride(stride).bias(false)));
    block.shortcut_bn = block.register_module("shortcut_bn", BatchNorm2d(BatchNorm2dOptions(out)));
  }
}

}  // namespace

ResNetOptions resnet50_options() {
  return ResNetOptions()
      .widths({64, 128, 256, 512})
      .blocks({3, 4, 6, 3})
      .bottleneck(true)
      .imagenet_stem(true)
      .num_classes(1000);
}

ResNetStemImpl::ResNetStemImpl(int64_t in_channels_, int64_t out_channels_, bool imagenet_)
    : in_channels(in_channels_), out_channels(out_channels_), imagenet(imagenet_) {
  reset();
}

void ResNetStemImpl::reset() {
  const Conv2dOptions conv_options =
      imagenet ? Conv2dOptions(in_channels, out_channels, 7).stride(2).padding(3).bias(false)
               : Conv2dOptions(in_channels, out_channels, 3).padding(1).bias(false);
  conv = register_module("conv", Conv2d(conv_options));
  bn = register_module("bn", BatchNorm2d(BatchNorm2dOptions(out_channels)));
  relu = register_module("relu", ReLU(ReLUOptions().inplace(true)));
}

at::Tensor ResNetStemImpl::forward(const at::Tensor& x) {
  at::Tensor out = conv(x);  // one layer per statement, as in BasicBlockImpl::forward
  out = bn(out);
  out = relu(out);
  return imagenet ? at::max_pool2d(out, {3, 3}, {2, 2}, {1, 1}) : out;
}

BasicBlockImpl::BasicBlockImpl(BasicBlockOptions options_) : options(options_) { reset(); }

void BasicBlockImpl::reset() {
  const int64_t in = options.in_channels(), out = options.out_channels();
  const int64_t stride = options.stride();
  TORCH_CHECK(in > 0 && out > 0 && stride > 0,
              "resnet::BasicBlock: sizes and stride must be positive");
  conv1 = register_module("conv1",
                          Conv2d(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
  bn1 = register_module("bn1", BatchNorm2d(BatchNorm2dOptions(out)));
  conv2 = register_module("conv2", Conv2d(Conv2dOptions(out, out, 3).padding(1).bias(false)));
  bn2 = register_module("bn2", BatchNorm2d(BatchNorm2dOptions(out)));
  relu = register_module("relu", ReLU(ReLUOptions().inplace(true)));
  register_shortcut(*this, in, out, stride);
}

at::Tensor BasicBlockImpl::forward(const at::Tensor& x) {
  // One layer per statement: each intermediate is dropped as soon as the next layer has run, so
  // only what the layers saved outlives it (in one expression every temporary would live to its
  // end; that matters when a store keeps a smaller copy, or nothing, as in a recomputed unit).
  at::Tensor out = conv1(x);
  out = bn1(out);
  out = relu(out);
  out = conv2(out);
  out = bn2(out);
  // In place on bn2's output, which no layer saves (BatchNorm saves its input).
  out += has_projection() ? shortcut_bn(shortcut_conv(x)) : x;
  return relu(out);
}

BottleneckImpl::BottleneckImpl(BasicBlockOptions options_) : options(options_) { reset(); }

void BottleneckImpl::reset() {
  const int64_t in = options.in_channels(), width = options.out_channels();
  const int64_t out = width * kExpansion, stride = options.stride();
  TORCH_CHECK(in > 0 && width > 0 && stride > 0,
              "resnet::Bottleneck: sizes and stride must be positive");
  conv1 = register_module("conv1", Conv2d(Conv2dOptions(in, width, 1).bias(false)));
  bn1 = register_module("bn1", BatchNorm2d(BatchNorm2dOptions(width)));
  conv2 = register_module(
      "conv2", Conv2d(Conv2dOptions(width, width, 3).stride(stride).padding(1).bias(false)));
  bn2 = register_module("bn2", BatchNorm2d(BatchNorm2dOptions(width)));
  conv3 = register_module("conv3", Conv2d(Conv2dOptions(width, out, 1).bias(false)));
  bn3 = register_module("bn3", BatchNorm2d(BatchNorm2dOptions(out)));
  relu = register_module("relu", ReLU(ReLUOptions().inplace(true)));
  register_shortcut(*this, in, out, stride);
}

at::Tensor BottleneckImpl::forward(const at::Tensor& x) {
  // One layer per statement, as in BasicBlockImpl::forward.
  at::Tensor out = conv1(x);
  out = bn1(out);
  out = relu(out);
  out = conv2(out);
  out = bn2(out);
  out = relu(out);
  out = conv3(out);
  out = bn3(out);
  out += has_projection() ? shortcut_bn(shortcut_conv(x)) : x;
  return relu(out);
}

ResNetImpl::ResNetImpl(ResNetOptions options_) : options(std::move(options_)) { reset(); }

void ResNetImpl::reset() {
  const auto& widths = options.widths();
  TORCH_CHECK(!widths.empty(), "resnet::ResNet: at least one stage width expected");
  for (const int64_t w : widths) TORCH_CHECK(w > 0, "resnet::ResNet: widths must be positive");
  TORCH_CHECK(
      options.num_classes() > 0 && options.in_channels() > 0 && options.blocks_per_stage() > 0,
      "resnet::ResNet: num_classes, in_channels and blocks_per_stage must be positive");
  TORCH_CHECK(options.blocks().empty() || options.blocks().size() == widths.size(),
              "resnet::ResNet: blocks must name one count per stage width");
  for (const int64_t n : options.blocks())
    TORCH_CHECK(n > 0, "resnet::ResNet: every stage needs at least one block");

  stem = register_module("stem",
                         ResNetStem(options.in_channels(), widths[0], options.imagenet_stem()));
  blocks_.clear();
  int64_t in = widths[0];
  for (std::size_t s = 0; s < widths.size(); ++s) {
    torch::nn::ModuleList stage;
    for (int64_t b = 0; b < options.blocks_in_stage(s); ++b) {
      const BasicBlockOptions block_options =
          BasicBlockOptions(in, widths[s]).stride(s > 0 && b == 0 ? 2 : 1);
      if (options.bottleneck()) {
        Bottleneck block(block_options);
        stage->push_back(block);
        blocks_.emplace_back(block);
        in = widths[s] * BottleneckImpl::kExpansion;
      } else {
        BasicBlock block(block_options);
        stage->push_back(block);
        blocks_.emplace_back(block);
        in = widths[s];
      }
    }
    register_module("stage" + std::to_string(s + 1), stage);
  }
  fc = register_module("fc", Linear(LinearOptions(in, options.num_classes())));
}

at::Tensor ResNetImpl::forward(const at::Tensor& x) {
  at::Tensor h = stem(x);
  for (auto& block : blocks_) h = block.forward<at::Tensor>(h);
  return head(h);
}

std::vector<torch::nn::AnyModule> ResNetImpl::units() const {
  std::vector<torch::nn::AnyModule> units;
  units.reserve(blocks_.size() + 1);
  units.emplace_back(stem);
  for (const auto& block : blocks_) units.push_back(block);
  return units;
}

std::vector<Unit> resnet_units(const ResNet& net) {
  std::vector<Unit> units;
  units.push_back({"stem",
                   [stem = net->stem](const at::Tensor& x) mutable { return stem->forward(x); },
                   // (ImageNet's max pool of a ReLU's output is as non-negative.)
                   net->stem->parameters(), /*output_is_relu=*/true});
  std::size_t b = 0;
  for (std::size_t s = 0; s < net->options.widths().size(); ++s) {
    for (int64_t i = 0; i < net->options.blocks_in_stage(s); ++i, ++b) {
      units.push_back({"stage" + std::to_string(s + 1) + "." + std::to_string(i),
                       [block = net->blocks()[b]](const at::Tensor& x) mutable {
                         return block.forward<at::Tensor>(x);
                       },
                       net->blocks()[b].ptr()->parameters(), /*output_is_relu=*/true});
    }
  }
  return units;
}

at::Tensor ResNetImpl::head(const at::Tensor& features) { return fc(features.mean({2, 3})); }

}  // namespace engram::resnet
