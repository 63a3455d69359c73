#pragma once
/// \file
/// ResNet-18 in its CIFAR layout (He et al. 2016, the network of the memory literature), built
/// only from layers of nn/ (Conv2d, BatchNorm2d, in-place ReLU, Linear), so every memory
/// technique and gradient schedule of Engram applies to it.
///
/// \code
///   engram::resnet::ResNet net;              // ResNetOptions(): widths 64/128/256/512, 10 classes
///   at::Tensor logits = net(images);                               // [N, 3, H, W] -> [N, 10]
///   // Small, for tests:
///   engram::resnet::ResNet tiny(engram::resnet::ResNetOptions().widths({8, 16, 32, 64}));
///   // The units a swap/recompute technique cuts the network into:
///   at::Tensor h = images;
///   for (auto& unit : net->units()) h = unit.forward(h);           // stem, then every block
///   logits = net->head(h);                                         // pool + classifier
/// \endcode
///
/// Layout, with w = widths:
///   stem     3x3 conv (stride 1, padding 1, no bias) to w[0] channels, BatchNorm, ReLU
///   stage s  (s = 1..widths.size()) blocks_per_stage BasicBlocks of w[s-1] channels; the first
///            block of every stage but the first has stride 2
///   head     global average pool (x.mean({2, 3})), Linear(w.back(), num_classes)
/// A BasicBlock computes relu_(bn2(conv2(relu_(bn1(conv1(x))))) + shortcut(x)), the addition in
/// place on bn2's output as torchvision does; its shortcut is the identity, or a 1x1 convolution
/// (no bias, the block's stride) and a BatchNorm when the shape changes.
///
/// Module names (so named_parameters() and named_buffers() are stable, e.g. for checkpoints and
/// for copying weights from torch::nn modules):
///   stem.conv  stem.bn  stem.relu
///   stage<s>.<b>.conv1  .bn1  .conv2  .bn2  .relu  [.shortcut_conv  .shortcut_bn]
///   fc
/// with s counted from 1 and b from 0: "stage1.0.conv1.weight",
/// "stage2.0.shortcut_bn.running_mean". Initialization is each layer's own (as torch::nn's:
/// Kaiming-uniform convolutions, BatchNorm weight 1 and bias 0), in the order of the names above.

#include "nn/BatchNorm2d.h"
#include "nn/Conv2d.h"
#include "nn/Linear.h"
#include "nn/ReLU.h"
#include "nn/Units.h"

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <vector>

namespace engram::resnet {

struct ResNetOptions {
  /// Outputs of the classifier.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Channels of the input images.
  TORCH_ARG(int64_t, in_channels) = 3;
  /// Channels of each stage, one stage per entry (the stem has widths[0]).
  TORCH_ARG(std::vector<int64_t>, widths) = std::vector<int64_t>{64, 128, 256, 512};
  /// BasicBlocks in every stage.
  TORCH_ARG(int64_t, blocks_per_stage) = 2;
};

/// The stem: conv (3x3, stride 1, padding 1, no bias), BatchNorm, in-place ReLU.
class ResNetStemImpl : public torch::nn::Cloneable<ResNetStemImpl> {
 public:
  ResNetStemImpl(int64_t in_channels, int64_t out_channels);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  int64_t in_channels, out_channels;
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::ReLU relu{nullptr};
};
TORCH_MODULE(ResNetStem);

struct BasicBlockOptions {
  BasicBlockOptions(int64_t in_channels, int64_t out_channels)
      : in_channels_(in_channels), out_channels_(out_channels) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  /// Stride of the first convolution and of the projection shortcut.
  TORCH_ARG(int64_t, stride) = 1;
};

/// Two 3x3 convolutions with BatchNorm and a residual connection (see the file comment). The
/// projection shortcut exists when stride != 1 or in_channels != out_channels.
class BasicBlockImpl : public torch::nn::Cloneable<BasicBlockImpl> {
 public:
  explicit BasicBlockImpl(BasicBlockOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  /// True when the shortcut is a projection rather than the identity.
  bool has_projection() const { return !shortcut_conv.is_empty(); }

  BasicBlockOptions options;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::ReLU relu{nullptr};
  nn::Conv2d shortcut_conv{nullptr};  ///< empty for the identity shortcut
  nn::BatchNorm2d shortcut_bn{nullptr};
};
TORCH_MODULE(BasicBlock);

class ResNetImpl : public torch::nn::Cloneable<ResNetImpl> {
 public:
  explicit ResNetImpl(ResNetOptions options = {});
  void reset() override;
  /// Logits [N, num_classes] of images [N, in_channels, H, W] (any H, W that survive the
  /// stride-2 stages).
  at::Tensor forward(const at::Tensor& x);

  /// The network cut at every residual block: the stem, then every BasicBlock in order, each
  /// taking the previous unit's output. forward(x) == head(u_n(...u_1(x))).
  std::vector<torch::nn::AnyModule> units() const;
  /// All BasicBlocks, stage by stage.
  const std::vector<BasicBlock>& blocks() const { return blocks_; }
  /// Global average pool and classifier: [N, widths.back(), h, w] -> [N, num_classes].
  at::Tensor head(const at::Tensor& features);

  ResNetOptions options;
  ResNetStem stem{nullptr};
  nn::Linear fc{nullptr};

 private:
  std::vector<BasicBlock> blocks_;
};
TORCH_MODULE(ResNet);

/// units() as nn/Units.h units ("stem", "stage1.0", ...), each holding its module by value so
/// it can be rerun during backward. head(runner.forward(resnet_units(net), x)) == net(x).
std::vector<nn::Unit> resnet_units(const ResNet& net);

}  // namespace engram::resnet
