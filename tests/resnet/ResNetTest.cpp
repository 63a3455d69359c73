// The CIFAR ResNet-18 and the ImageNet ResNet-50 of resnet/ResNet.h against the same networks
// built from plain torch::nn modules: same outputs, gradients and BatchNorm statistics from the
// same weights.
#include "memory/CompressingStore.h"
#include "nn/Runtime.h"
#include "resnet/ResNet.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace engram::resnet {
namespace {

namespace tnn = torch::nn;

// The reference: torchvision's BasicBlock in the CIFAR layout, from torch::nn modules, under the
// module names of resnet/ResNet.h so that weights copy over by name.
struct TorchBlockImpl : tnn::Module {
  TorchBlockImpl(int64_t in, int64_t out, int64_t stride) {
    conv1 = register_module(
        "conv1", tnn::Conv2d(tnn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", tnn::BatchNorm2d(out));
    conv2 = register_module("conv2",
                            tnn::Conv2d(tnn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", tnn::BatchNorm2d(out));
    relu = register_module("relu", tnn::ReLU(tnn::ReLUOptions().inplace(true)));
    if (stride != 1 || in != out) {
      shortcut_conv = register_module(
          "shortcut_conv", tnn::Conv2d(tnn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      shortcut_bn = register_module("shortcut_bn", tnn::BatchNorm2d(out));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = bn2(conv2(relu(bn1(conv1(x)))));
    out += shortcut_conv.is_empty() ? x : shortcut_bn(shortcut_conv(x));
    return relu(out);
  }
  tnn::Conv2d conv1{nullptr}, conv2{nullptr}, shortcut_conv{nullptr};
  tnn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, shortcut_bn{nullptr};
  tnn::ReLU relu{nullptr};
};
TORCH_MODULE(TorchBlock);

// torchvision's Bottleneck (v1.5: the stride on the 3x3 convolution).
struct TorchBottleneckImpl : tnn::Module {
  TorchBottleneckImpl(int64_t in, int64_t width, int64_t stride) {
    const int64_t out = width * 4;
    conv1 = register_module("conv1", tnn::Conv2d(tnn::Conv2dOptions(in, width, 1).bias(false)));
    bn1 = register_module("bn1", tnn::BatchNorm2d(width));
    conv2 = register_module(
        "conv2",
        tnn::Conv2d(tnn::Conv2dOptions(width, width, 3).stride(stride).padding(1).bias(false)));
    bn2 = register_module("bn2", tnn::BatchNorm2d(width));
    conv3 = register_module("conv3", tnn::Conv2d(tnn::Conv2dOptions(width, out, 1).bias(false)));
    bn3 = register_module("bn3", tnn::BatchNorm2d(out));
    relu = register_module("relu", tnn::ReLU(tnn::ReLUOptions().inplace(true)));
    if (stride != 1 || in != out) {
      shortcut_conv = register_module(
          "shortcut_conv", tnn::Conv2d(tnn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      shortcut_bn = register_module("shortcut_bn", tnn::BatchNorm2d(out));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x))))))));
    out += shortcut_conv.is_empty() ? x : shortcut_bn(shortcut_conv(x));
    return relu(out);
  }
  tnn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, shortcut_conv{nullptr};
  tnn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr}, shortcut_bn{nullptr};
  tnn::ReLU relu{nullptr};
};
TORCH_MODULE(TorchBottleneck);

struct TorchStemImpl : tnn::Module {
  TorchStemImpl(int64_t in, int64_t out, bool imagenet) : imagenet(imagenet) {
    conv = register_module(
        "conv", tnn::Conv2d(imagenet
                                ? tnn::Conv2dOptions(in, out, 7).stride(2).padding(3).bias(false)
                                : tnn::Conv2dOptions(in, out, 3).padding(1).bias(false)));
    bn = register_module("bn", tnn::BatchNorm2d(out));
    relu = register_module("relu", tnn::ReLU(tnn::ReLUOptions().inplace(true)));
    pool = register_module("pool", tnn::MaxPool2d(tnn::MaxPool2dOptions(3).stride(2).padding(1)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = relu(bn(conv(x)));
    return imagenet ? pool(h) : h;
  }
  bool imagenet;
  tnn::Conv2d conv{nullptr};
  tnn::BatchNorm2d bn{nullptr};
  tnn::ReLU relu{nullptr};
  tnn::MaxPool2d pool{nullptr};
};
TORCH_MODULE(TorchStem);

struct TorchResNetImpl : tnn::Module {
  explicit TorchResNetImpl(const ResNetOptions& o) {
    const auto& widths = o.widths();
    stem = register_module("stem", TorchStem(o.in_channels(), widths[0], o.imagenet_stem()));
    int64_t in = widths[0];
    for (std::size_t s = 0; s < widths.size(); ++s) {
      tnn::ModuleList stage;
      for (int64_t b = 0; b < o.blocks_in_stage(s); ++b) {
        const int64_t stride = s > 0 && b == 0 ? 2 : 1;
        if (o.bottleneck()) {
          TorchBottleneck block(in, widths[s], stride);
          stage->push_back(block);
          blocks.emplace_back(block);
          in = widths[s] * 4;
        } else {
          TorchBlock block(in, widths[s], stride);
          stage->push_back(block);
          blocks.emplace_back(block);
          in = widths[s];
        }
      }
      register_module("stage" + std::to_string(s + 1), stage);
    }
    fc = register_module("fc", tnn::Linear(in, o.num_classes()));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = stem(x);
    for (auto& block : blocks) h = block.forward<at::Tensor>(h);
    return fc(h.mean({2, 3}));
  }
  TorchStem stem{nullptr};
  std::vector<tnn::AnyModule> blocks;
  tnn::Linear fc{nullptr};
};
TORCH_MODULE(TorchResNet);

std::set<std::string> keys(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  std::set<std::string> names;
  for (const auto& item : dict) names.insert(item.key());
  return names;
}

/// Copies every parameter and buffer of `from` into the tensor of the same name in `to`.
void copy_state(tnn::Module& from, tnn::Module& to) {
  torch::NoGradGuard no_grad;
  auto params = to.named_parameters(), buffers = to.named_buffers();
  ASSERT_EQ(keys(from.named_parameters()), keys(params));
  ASSERT_EQ(keys(from.named_buffers()), keys(buffers));
  for (const auto& item : from.named_parameters()) params[item.key()].copy_(item.value());
  for (const auto& item : from.named_buffers()) buffers[item.key()].copy_(item.value());
}

/// |a - b| / |b| (Frobenius norms).
double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.norm().item<double>();
  return (a - b).norm().item<double>() / (scale > 0 ? scale : 1.0);
}

ResNetOptions small_options() { return ResNetOptions().widths({8, 16, 32, 64}); }
/// ResNet-50's layout (ImageNet stem, bottlenecks, 3-4-6-3 blocks) at a small width.
ResNetOptions small_resnet50_options() {
  return resnet50_options().widths({4, 8, 8, 16}).num_classes(10);
}

class ResNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(0);
  }

  // Forward and backward of a cross-entropy loss through both networks from the same weights,
  // in `dtype`; expects outputs, every parameter gradient and every buffer to agree.
  void expect_equal_to_torch_modules(torch::Dtype dtype,
                                     const ResNetOptions& options = small_options(),
                                     int64_t image_size = 8) {
    SCOPED_TRACE(c10::toString(dtype));
    // Another summation order's rounding, far above in float than in double: one tolerance for
    // both would make the double comparison no stricter than the float one.
    const double tolerance = dtype == torch::kDouble ? 1e-12 : 1e-6;
    ResNet ours(options);
    TorchResNet reference(options);
    ours->to(dtype);
    reference->to(dtype);
    // Not the fresh initialization (BatchNorm weight 1, bias 0, running statistics 0 and 1).
    {
      torch::NoGradGuard no_grad;
      for (auto& p : reference->parameters()) p.add_(torch::randn_like(p), 0.1);
      for (auto& b : reference->buffers()) {
        if (b.is_floating_point()) b.uniform_(0.5, 1.5);
      }
    }
    copy_state(*reference, *ours);

    const at::Tensor x = torch::randn({4, 3, image_size, image_size}, dtype);
    const at::Tensor labels = torch::randint(0, options.num_classes(), {4}, torch::kLong);
    const at::Tensor y_ours = ours(x);
    const at::Tensor y_ref = reference(x);
    torch::nn::functional::cross_entropy(y_ours, labels).backward();
    nn::current_runtime().scheduler->finish();
    torch::nn::functional::cross_entropy(y_ref, labels).backward();

    EXPECT_LT(relative_difference(y_ours, y_ref), tolerance);
    auto ours_params = ours->named_parameters();
    for (const auto& item : reference->named_parameters()) {
      SCOPED_TRACE(item.key());
      const at::Tensor& grad = ours_params[item.key()].grad();
      ASSERT_TRUE(grad.defined());
      ASSERT_TRUE(item.value().grad().defined());
      EXPECT_LT(relative_difference(grad, item.value().grad()), tolerance);
    }
    auto ours_buffers = ours->named_buffers();
    for (const auto& item : reference->named_buffers()) {
      SCOPED_TRACE(item.key());
      const at::Tensor& buffer = ours_buffers[item.key()];
      if (buffer.is_floating_point()) {
        EXPECT_LT(relative_difference(buffer, item.value()), tolerance);
      } else {
        EXPECT_TRUE(torch::equal(buffer, item.value()));  // num_batches_tracked
      }
    }
  }
};

// One step's loss, then every parameter's gradient, with the layers saving through `store`.
std::vector<at::Tensor> loss_and_gradients(ResNet& net, const at::Tensor& x,
                                           const at::Tensor& labels,
                                           memory::ActivationStore* store) {
  net->zero_grad();
  at::Tensor loss;
  {
    nn::RuntimeGuard use(store, nullptr);
    loss = torch::nn::functional::cross_entropy(net(x), labels);
    loss.backward();
  }
  nn::current_runtime().scheduler->finish();
  std::vector<at::Tensor> grads{loss.detach()};
  for (const auto& p : net->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

TEST_F(ResNetTest, GradientsEqualTorchModulesInDouble) {
  expect_equal_to_torch_modules(torch::kDouble);
}

TEST_F(ResNetTest, GradientsEqualTorchModulesInFloat) {
  expect_equal_to_torch_modules(torch::kFloat);
}

TEST_F(ResNetTest, Resnet50LayoutGradientsEqualTorchModules) {
  // The ImageNet stem halves twice, the stages three times more: 64 -> 2.
  expect_equal_to_torch_modules(torch::kDouble, small_resnet50_options(), 64);
}

TEST_F(ResNetTest, Resnet50HasTorchvisionsParametersAndShapes) {
  ResNet net(resnet50_options());
  int64_t count = 0;
  for (const auto& p : net->parameters()) count += p.numel();
  EXPECT_EQ(count, 25557032);  // torchvision.models.resnet50()
  EXPECT_EQ(net->blocks().size(), 16u);
  const auto params = keys(net->named_parameters());
  for (const char* name : {"stem.conv.weight", "stage1.0.conv3.weight", "stage1.0.bn3.bias",
                           "stage1.0.shortcut_conv.weight", "stage3.5.conv2.weight",
                           "stage4.2.bn3.weight", "fc.weight"}) {
    EXPECT_EQ(params.count(name), 1u) << name;
  }
  EXPECT_EQ(params.count("stage1.1.shortcut_conv.weight"), 0u) << "identity shortcut";
  EXPECT_EQ(net->stem->conv->options.kernel_size(), 7);
  EXPECT_EQ(net->stem->conv->options.stride(), 2);
  EXPECT_EQ(net->fc->options.in_features(), 2048);
  const auto units = resnet_units(net);
  ASSERT_EQ(units.size(), 17u);
  EXPECT_EQ(units[4].name, "stage2.0");
  EXPECT_EQ(units[16].name, "stage4.2");
}

TEST_F(ResNetTest, Resnet50UnitsChainToTheForwardPassAt224) {
  ResNet net(resnet50_options().widths({4, 8, 8, 16}));
  const at::Tensor x = torch::randn({1, 3, 224, 224});
  at::Tensor h = x;
  for (auto& unit : resnet_units(net)) h = unit.forward(h);
  EXPECT_EQ(h.sizes(), (std::vector<int64_t>{1, 64, 7, 7}));  // 224 / 32, 4 x 16 channels
  const at::Tensor logits = net->head(h);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 1000}));
  EXPECT_TRUE(torch::allclose(logits, net(x)));
}

// ReLU compression is lossless: the same loss and bit-identical gradients (BatchNorm normalizes
// with batch statistics, so the two steps compute the same thing), one compressed copy per ReLU
// output shared with every layer that saves it as its input, nothing left behind.
TEST_F(ResNetTest, GradientsAreBitIdenticalUnderTheCompressingStore) {
  ResNet net(small_options());
  const at::Tensor x = torch::randn({2, 3, 16, 16});
  const at::Tensor labels = torch::randint(0, 10, {2}, torch::kLong);
  memory::PlainStore plain;
  const auto expected = loss_and_gradients(net, x, labels, &plain);
  memory::CompressingStore compressing(
      memory::CompressingStoreOptions{/*cache_decompressed=*/true});
  const auto actual = loss_and_gradients(net, x, labels, &compressing);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::equal(actual[i], expected[i])) << (i == 0 ? "loss" : "gradient ") << i;
  }
  const memory::CompressionStats s = compressing.stats();
  // The stem's ReLU and two per block.
  EXPECT_EQ(s.compressed_tensors, 1 + 2 * 8);
  // Shared with: each block's conv2 (its relu1 output), each block's conv1 (its input, the
  // previous ReLU's output), and the projection shortcuts of stages 2 to 4 (the same input).
  EXPECT_EQ(s.shared_saves, 8 + 8 + 3);
  EXPECT_EQ(s.plain_relu_outputs, 0);
  EXPECT_GT(s.sparsity(), 0.2);
  EXPECT_GT(s.compression_ratio(), 1.2);
  EXPECT_EQ(compressing.live_handles(), 0);
}

// Lower-memory algorithms (nn/Algorithms.h) under the compressing store: a convolution whose
// input is a compressed ReLU output computes from its decompressed copy exactly what it computes
// from the dense tensor, and within float rounding of the default algorithm.
TEST_F(ResNetTest, ReplacedConvolutionsAreExactUnderTheCompressingStore) {
  ResNet net(small_options());
  const at::Tensor x = torch::randn({2, 3, 16, 16});
  const at::Tensor labels = torch::randint(0, 10, {2}, torch::kLong);
  memory::PlainStore plain;
  const auto reference = loss_and_gradients(net, x, labels, &plain);
  for (const std::string algorithm : {"im2col", "direct"}) {
    // One block's second convolution only (its input: the block's first ReLU output), then all.
    for (const bool every : {false, true}) {
      for (const auto& item : net->named_modules()) {
        if (auto* conv = item.value()->as<nn::Conv2dImpl>()) {
          conv->set_algorithm(every || item.key() == "stage1.0.conv2" ? algorithm : "default");
        }
      }
      SCOPED_TRACE(algorithm + (every ? " everywhere" : " in stage1.0.conv2"));
      const auto dense = loss_and_gradients(net, x, labels, &plain);
      memory::CompressingStore compressing(
          memory::CompressingStoreOptions{/*cache_decompressed=*/true});
      const auto compressed = loss_and_gradients(net, x, labels, &compressing);
      for (std::size_t i = 0; i < reference.size(); ++i) {
        EXPECT_TRUE(torch::equal(compressed[i], dense[i])) << i;
        const double scale = reference[i].abs().max().item<double>();
        EXPECT_LE((dense[i] - reference[i]).abs().max().item<double>(), 1e-4 * scale) << i;
      }
    }
  }
}

TEST_F(ResNetTest, DefaultIsResNet18WithTheDocumentedNames) {
  ResNet net;
  int64_t count = 0;
  for (const auto& p : net->parameters()) count += p.numel();
  EXPECT_EQ(count, 11173962);  // the CIFAR ResNet-18 with 10 classes
  EXPECT_EQ(net->blocks().size(), 8u);
  const auto params = keys(net->named_parameters());
  for (const char* name :
       {"stem.conv.weight", "stem.bn.weight", "stage1.0.conv1.weight", "stage1.1.bn2.bias",
        "stage2.0.shortcut_conv.weight", "stage4.1.conv2.weight", "fc.weight", "fc.bias"}) {
    EXPECT_EQ(params.count(name), 1u) << name;
  }
  EXPECT_EQ(params.count("stage1.0.shortcut_conv.weight"), 0u) << "identity shortcut";
  EXPECT_EQ(params.count("stem.conv.bias"), 0u) << "convolutions have no bias";
  EXPECT_EQ(keys(net->named_buffers()).count("stage3.0.shortcut_bn.running_var"), 1u);
}

TEST_F(ResNetTest, BuiltOnlyFromLayersOfNn) {
  ResNet net(small_options());
  int leaves = 0;
  for (const auto& module : net->modules(/*include_self=*/false)) {
    if (!module->children().empty()) continue;
    ++leaves;
    const bool ours = dynamic_cast<nn::Conv2dImpl*>(module.get()) != nullptr ||
                      dynamic_cast<nn::BatchNorm2dImpl*>(module.get()) != nullptr ||
                      dynamic_cast<nn::ReLUImpl*>(module.get()) != nullptr ||
                      dynamic_cast<nn::LinearImpl*>(module.get()) != nullptr;
    EXPECT_TRUE(ours) << module->name();
  }
  EXPECT_EQ(leaves, 3 + 8 * 5 + 3 * 2 + 1);  // stem, blocks, projections, fc
}

TEST_F(ResNetTest, UnitsChainToTheForwardPass) {
  ResNet net(small_options().blocks_per_stage(1));
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  auto units = net->units();
  ASSERT_EQ(units.size(), 5u);  // the stem and one block per stage
  EXPECT_EQ(units[0].ptr().get(), net->stem.ptr().get());
  EXPECT_EQ(units[1].ptr().get(), net->blocks()[0].ptr().get());
  at::Tensor h = x;
  for (auto& unit : units) h = unit.forward(h);
  EXPECT_EQ(h.sizes(), (std::vector<int64_t>{2, 64, 1, 1}));
  // Training mode: batch statistics, so running the network twice gives the same output.
  EXPECT_TRUE(torch::allclose(net->head(h), net(x)));
}

TEST_F(ResNetTest, InvalidOptionsAreRejected) {
  EXPECT_THROW(ResNet(ResNetOptions().widths({})), c10::Error);
  EXPECT_THROW(ResNet(ResNetOptions().widths({8, 0})), c10::Error);
  EXPECT_THROW(ResNet(ResNetOptions().blocks_per_stage(0)), c10::Error);
  EXPECT_THROW(ResNet(ResNetOptions().blocks({2, 2})), c10::Error);  // four widths
  EXPECT_THROW(ResNet(ResNetOptions().blocks({2, 2, 0, 2})), c10::Error);
}

}  // namespace
}  // namespace engram::resnet
