#pragma once
/// \file
/// ResNet-18 in its CIFAR layout (He et al. 2016, the network of the memory literature), and
/// ResNet-50 in its ImageNet layout (bottleneck blocks, 224x224 images: resnet50_options()),
/// built from layers of nn/ (Conv2d, BatchNorm2d, in-place ReLU, Linear), so every memory
/// technique and gradient schedule of Engram applies to them.
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
///   stem     3x3 conv (stride 1, padding 1, no bias) to w[0] channels, BatchNorm, ReLU; with
///            imagenet_stem, a 7x7 conv (stride 2, padding 3), BatchNorm, ReLU and a 3x3 max
///            pool (stride 2, padding 1; torch's max_pool2d, the one layer not from nn/)
///   stage s  (s = 1..widths.size()) blocks(s) blocks of width w[s-1] (blocks_per_stage each
///            unless blocks names them per stage); the first block of every stage but the first
///            has stride 2
///   head     global average pool (x.mean({2, 3})), Linear(last block's outputs, num_classes)
/// A BasicBlock computes relu_(bn2(conv2(relu_(bn1(conv1(x))))) + shortcut(x)), the addition in
/// place on bn2's output as torchvision does; its shortcut is the identity, or a 1x1 convolution
/// (no bias, the block's stride) and a BatchNorm when the shape changes. A Bottleneck
/// (torchvision's, the stride on its 3x3 convolution) computes
/// relu_(bn3(conv3(relu_(bn2(conv2(relu_(bn1(conv1(x)))))))) + shortcut(x)) with conv1 1x1 to the
/// width, conv2 3x3, conv3 1x1 to 4x the width.
///
/// Module names (so named_parameters() and named_buffers() are stable, e.g. for checkpoints and
/// for copying weights from torch::nn modules):
///   stem.conv  stem.bn  stem.relu
///   stage<s>.<b>.conv1  .bn1  .conv2  .bn2  [.conv3  .bn3]  .relu  [.shortcut_conv  .shortcut_bn]
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
#include <string>
#include <vector>

namespace engram::resnet {

struct ResNetOptions {
  /// Outputs of the classifier.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Channels of the input images.
  TORCH_ARG(int64_t, in_channels) = 3;
  /// Channels of each stage, one stage per entry (the stem has widths[0]).
  TORCH_ARG(std::vector<int64_t>, widths) = std::vector<int64_t>{64, 128, 256, 512};
  /// Blocks in every stage (unless `blocks` names them per stage).
  TORCH_ARG(int64_t, blocks_per_stage) = 2;
  /// Blocks of each stage, one entry per width; empty: blocks_per_stage each.
  TORCH_ARG(std::vector<int64_t>, blocks) = std::vector<int64_t>{};
  /// Bottleneck blocks (1x1, 3x3, 1x1 to 4x the width) instead of BasicBlocks.
  TORCH_ARG(bool, bottleneck) = false;
  /// The ImageNet stem (7x7 stride-2 convolution, 3x3 stride-2 max pool) instead of CIFAR's.
  TORCH_ARG(bool, imagenet_stem) = false;


 public:
  /// Blocks of stage s (0-based).
  int64_t blocks_in_stage(std::size_t s) const {
    return blocks().empty() ? blocks_per_stage() : blocks().at(s);
  }
};

/// ResNet-50 (He et al. 2016, torchvision's v1.5): the ImageNet stem, Bottleneck blocks
/// 3, 4, 6, 3 of widths 64, 128, 256, 512, 1000 classes; 25,557,032 parameters.
ResNetOptions resnet50_options();

/// The stem: conv (3x3, stride 1, padding 1, no bias), BatchNorm, in-place ReLU; with
/// `imagenet`, conv 7x7 (stride 2, padding 3, no bias), BatchNorm, ReLU, max pool 3x3 (stride 2,
/// padding 1).
class ResNetStemImpl : public torch::nn::Cloneable<ResNetStemImpl> {
 public:
  ResNetStemImpl(int64_t in_channels, int64_t out_channels, bool imagenet = false);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  int64_t in_channels, out_channels;
  bool imagenet;
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

/// 1x1 to the width, 3x3 (the block's stride), 1x1 to 4x the width, each with BatchNorm, and a
/// residual connection (see the file comment); `out_channels` is the width. The projection
/// shortcut exists when stride != 1 or in_channels != 4 * out_channels.
class BottleneckImpl : public torch::nn::Cloneable<BottleneckImpl> {
 public:
  static constexpr int64_t kExpansion = 4;
  explicit BottleneckImpl(BasicBlockOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  bool has_projection() const { return !shortcut_conv.is_empty(); }

  BasicBlockOptions options;
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::ReLU relu{nullptr};
  nn::Conv2d shortcut_conv{nullptr};  ///< empty for the identity shortcut
  nn::BatchNorm2d shortcut_bn{nullptr};
};
TORCH_MODULE(Bottleneck);

class ResNetImpl : public torch::nn::Cloneable<ResNetImpl> {
 public:
  explicit ResNetImpl(ResNetOptions options = {});
  void reset() override;
  /// Logits [N, num_classes] of images [N, in_channels, H, W] (any H, W that survive the
  /// stride-2 stages).
  at::Tensor forward(const at::Tensor& x);

  /// The network cut at every residual block: the stem, then every block in order, each
  /// taking the previous unit's output. forward(x) == head(u_n(...u_1(x))).
  std::vector<torch::nn::AnyModule> units() const;
  /// All blocks (BasicBlock or Bottleneck), stage by stage.
  const std::vector<torch::nn::AnyModule>& blocks() const { return blocks_; }
  /// Global average pool and classifier: [N, channels, h, w] -> [N, num_classes].
  at::Tensor head(const at::Tensor& features);

  ResNetOptions options;
  ResNetStem stem{nullptr};
  nn::Linear fc{nullptr};

 private:
  std::vector<torch::nn::AnyModule> blocks_;
};
TORCH_MODULE(ResNet);

/// units() as nn/Units.h units ("stem", "stage1.0", ...), each holding its module by value so
/// it can be rerun during backward. head(runner.forward(resnet_units(net), x)) == net(x).
std::vector<nn::Unit> resnet_units(const ResNet& net);

}  // namespace engram::resnet
