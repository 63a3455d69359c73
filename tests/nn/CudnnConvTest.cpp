// cuDNN's convolution algorithms (nn/cuda/CudnnConv.h): the planner's per-layer choice and the
// shapes on the CPU; on a device, every algorithm of every pass against a direct float64
// convolution on the host, the workspace limit, and the errors. Built with nvcc and cuDNN only;
// the device tests skip without one, and then the constructor's error is tested instead.
#include "nn/cuda/CudnnConv.h"

#include "tests/support/Thrown.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace engram::nn::cudnn {
namespace {

AlgorithmCost cost(int algorithm, bool supported, std::size_t workspace, double ms, int rank) {
  AlgorithmCost c;
  c.algorithm = algorithm;
  c.supported = supported;
  c.workspace_bytes = workspace;
  c.ms = ms;
  c.heuristic_rank = rank;
  return c;
}

TEST(CudnnConvPlan, FastestWithinTakesTheFastestThatFits) {
  const std::vector<AlgorithmCost> costs{
      cost(0, true, 0, 3.0, 2),         // slow, no workspace
      cost(1, true, 1000, 1.0, 0),      // fast, 1000 bytes
      cost(2, false, 0, 0.1, -1),       // faster still, but cuDNN does not run it
      cost(3, true, 100, 2.0, 1),       // middle
      cost(4, true, 1 << 20, 0.5, -1),  // fastest, 1 MiB
  };
  EXPECT_EQ(fastest_within(costs, 1 << 20)->algorithm, 4);
  EXPECT_EQ(fastest_within(costs, 1000)->algorithm, 1);
  EXPECT_EQ(fastest_within(costs, 999)->algorithm, 3);
  EXPECT_EQ(fastest_within(costs, 0)->algorithm, 0);
  EXPECT_EQ(fastest_within({costs[2], costs[4]}, 0), nullptr);
  EXPECT_EQ(fastest_within({}, 1 << 30), nullptr);
}

TEST(CudnnConvPlan, TheDefaultIsTheBestRankedSupportedAlgorithm) {
  std::vector<AlgorithmCost> costs{cost(0, true, 0, 3.0, 2), cost(1, false, 0, 1.0, 0),
                                   cost(2, true, 0, 2.0, 1), cost(3, true, 0, 0.5, -1)};
  EXPECT_EQ(heuristic_default(costs)->algorithm, 2);  // rank 0 is not supported here
  costs[2].supported = false;
  EXPECT_EQ(heuristic_default(costs)->algorithm, 0);
  costs[0].heuristic_rank = -1;
  EXPECT_EQ(heuristic_default(costs), nullptr);  // unranked algorithms are never the default
}

TEST(CudnnConvPlan, LeastWorkspaceTakesTheSmallestThenTheFastest) {
  const std::vector<AlgorithmCost> costs{
      cost(0, true, 100, 3.0, 2), cost(1, false, 0, 0.1, -1),  // no workspace, not run here
      cost(2, true, 100, 1.0, 0), cost(3, true, 50, 9.0, 1), cost(4, true, 50, 4.0, -1)};
  EXPECT_EQ(least_workspace(costs)->algorithm, 4);
  EXPECT_EQ(least_workspace({costs[0], costs[1], costs[2]})->algorithm, 2);
  EXPECT_EQ(least_workspace({costs[1]}), nullptr);
}

TEST(CudnnConvPlan, ADeterministicRunChoosesAmongWhatCudnnCallsDeterministic) {
  std::vector<AlgorithmCost> costs{cost(0, true, 0, 3.0, 2), cost(1, true, 0, 1.0, 0),
                                   cost(2, true, 4096, 0.5, 1), cost(3, true, 0, 0.2, -1)};
  costs[0].deterministic = true;
  costs[1].deterministic = false;  // atomics: least workspace, fast, not the same bits twice
  costs[2].deterministic = true;
  // costs[3] unranked: cuDNN said nothing of its determinism.
  const std::vector<AlgorithmCost> kept = deterministic_only(costs);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(fastest_within(kept, 1 << 20)->algorithm, 2);
  EXPECT_EQ(least_workspace(kept)->algorithm, 0);
  EXPECT_EQ(least_workspace(costs)->algorithm, 3);
}

TEST(CudnnConvPlan, AllocationFailuresAreOutOfMemoryAndOtherFailuresAreNot) {
  // cudaErrorMemoryAllocation is 2, cudaErrorInvalidValue 1; cuDNN 9's host and device allocation
  // failures are 4003 and 4004, CUDNN_STATUS_BAD_PARAM 2000.
  EXPECT_THROW(throw_cuda_error(2, "cudaMalloc"), DeviceOutOfMemory);
  EXPECT_THROW(throw_cudnn_error(4003, "cudnnCreate"), DeviceOutOfMemory);
  EXPECT_THROW(throw_cudnn_error(4004, "cudnnConvolutionForward"), DeviceOutOfMemory);
  // Anything else is a CudnnError that is not DeviceOutOfMemory, its message the call's first.
  const auto expect_plain = [](const std::function<void()>& fail, const std::string& call) {
    try {
      fail();
      ADD_FAILURE() << call << " did not throw";
    } catch (const DeviceOutOfMemory& e) {
      ADD_FAILURE() << "not out of memory: " << e.what();
    } catch (const CudnnError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(call + ": ", 0), 0u) << e.what();
    }
  };
  expect_plain([] { throw_cuda_error(1, "cudaMemcpy"); }, "cudaMemcpy");
  expect_plain([] { throw_cudnn_error(2000, "cudnnSetTensor4dDescriptor"); },
               "cudnnSetTensor4dDescriptor");
}

TEST(CudnnConvPlan, ShapesAndPasses) {
  const ConvShape s{2, 3, 9, 7, 4, 3, 2, 1};
  EXPECT_EQ(s.out_height(), 5);
  EXPECT_EQ(s.out_width(), 4);
  EXPECT_EQ(s.input_elements(), 2 * 3 * 9 * 7);
  EXPECT_EQ(s.weight_elements(), 4 * 3 * 3 * 3);
  EXPECT_EQ(s.output_elements(), 2 * 4 * 5 * 4);
  EXPECT_EQ(s.to_string(), "2x3x9x7 -> 4, k3 s2 p1");
  EXPECT_NO_THROW(s.check());
  EXPECT_THROW((ConvShape{0, 3, 9, 7, 4, 3, 1, 0}.check()), std::invalid_argument);
  EXPECT_THROW((ConvShape{1, 3, 2, 2, 4, 5, 1, 1}.check()), std::invalid_argument);
  EXPECT_THROW((ConvShape{1, 3, 9, 9, 4, 3, 1, -1}.check()), std::invalid_argument);
  // ResNet-50's first expansion (64 -> 256 at 56x56): at batch 2675 its output passes 2^31 - 1
  // elements, which cuDNN's descriptors refuse with a bare NOT_SUPPORTED.
  EXPECT_NO_THROW((ConvShape{2674, 64, 56, 56, 256, 1, 1, 0}.check()));
  try {
    ConvShape{2675, 64, 56, 56, 256, 1, 1, 0}.check();
    FAIL() << "a tensor beyond cuDNN's descriptors was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("output has 2147532800 elements"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((ConvShape{1, 65536, 256, 256, 1, 1, 1, 0}.check()), std::invalid_argument)
      << "the input's elements";
  for (const Pass p : all_passes()) EXPECT_EQ(parse_pass(pass_name(p)), p);
  EXPECT_THROW(parse_pass("sideways"), std::invalid_argument);
}

TEST(CudnnConvDevice, WithoutADeviceTheLayerSaysSo) {
  std::string why;
  if (device_available(&why)) GTEST_SKIP() << "a CUDA device is here";
  EXPECT_FALSE(why.empty());
  try {
    CudnnConv conv(ConvShape{1, 1, 4, 4, 1, 3, 1, 1});
    FAIL() << "constructed without a device";
  } catch (const CudnnError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

/// The three passes of a convolution, directly, in float64.
struct Reference {
  std::vector<double> y, dx, dw;
};

Reference reference(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& dy) {
  Reference r;
  r.y.assign(static_cast<std::size_t>(s.output_elements()), 0);
  r.dx.assign(x.size(), 0);
  r.dw.assign(w.size(), 0);
  const std::int64_t oh = s.out_height(), ow = s.out_width(), k = s.kernel;
  for (std::int64_t n = 0; n < s.batch; ++n)
    for (std::int64_t o = 0; o < s.out_channels; ++o)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          const std::size_t yi =
              static_cast<std::size_t>(((n * s.out_channels + o) * oh + i) * ow + j);
          for (std::int64_t c = 0; c < s.in_channels; ++c)
            for (std::int64_t a = 0; a < k; ++a)
              for (std::int64_t b = 0; b < k; ++b) {
                const std::int64_t h = i * s.stride - s.padding + a,
                                   v = j * s.stride - s.padding + b;
                if (h < 0 || h >= s.height || v < 0 || v >= s.width) continue;
                const std::size_t xi = static_cast<std::size_t>(
                    ((n * s.in_channels + c) * s.height + h) * s.width + v);
                const std::size_t wi =
                    static_cast<std::size_t>(((o * s.in_channels + c) * k + a) * k + b);
                r.y[yi] += static_cast<double>(x[xi]) * w[wi];
                r.dx[xi] += static_cast<double>(dy[yi]) * w[wi];
                r.dw[wi] += static_cast<double>(dy[yi]) * x[xi];
              }
        }
  return r;
}

std::vector<float> random_floats(std::int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& f : v) f = u(rng);
  return v;
}

/// Largest |a - b| over the largest |b|.
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(CudnnConvDevice, EveryAlgorithmOfEveryPassMatchesTheDirectConvolution) {
  std::string why;
  if (!device_available(&why)) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  // 1x1 and 3x3 kernels, strides 1 and 2, with and without padding: the ResNet's kinds.
  const std::vector<ConvShape> shapes{{2, 3, 9, 9, 4, 3, 1, 1},
                                      {3, 8, 12, 10, 6, 3, 2, 1},
                                      {2, 5, 8, 8, 7, 1, 2, 0},
                                      {1, 4, 7, 7, 3, 3, 1, 0}};
  std::mt19937 rng(7);
  for (const ConvShape& s : shapes) {
    SCOPED_TRACE(s.to_string());
    const auto x = random_floats(s.input_elements(), rng);
    const auto w = random_floats(s.weight_elements(), rng);
    const auto dy = random_floats(s.output_elements(), rng);
    const Reference ref = reference(s, x, w, dy);
    CudnnConv conv(s);
    conv.upload(x, w, dy);
    for (const Pass pass : all_passes()) {
      SCOPED_TRACE(pass_name(pass));
      const std::vector<double>& expected = pass == Pass::kForward        ? ref.y
                                            : pass == Pass::kBackwardData ? ref.dx
                                                                          : ref.dw;
      const auto costs = conv.measure(pass, /*repeats=*/1);
      int supported = 0;
      for (const AlgorithmCost& c : costs) {
        // "Not supported" (or too large a workspace) is cuDNN's to say; anything else is a bug.
        EXPECT_FALSE(c.failed) << c.name << ": " << c.status;
        if (!c.supported) continue;
        ++supported;
        const std::vector<float> got = conv.run(pass, c.algorithm, c.workspace_bytes);
        // float32 sums in another order (and FFT's and Winograd's transforms): the relative
        // error of a sum of up to a few hundred products is far below 1e-3; a wrong index is
        // of order 1.
        EXPECT_LT(relative_error(got, expected), 1e-3) << c.name;
        EXPECT_LT(c.max_rel_diff, 1e-3) << c.name;
        // An event pair around a launched kernel: a time, never zero or a NaN.
        EXPECT_TRUE(std::isfinite(c.ms) && c.ms > 0) << c.name << ": " << c.ms << " ms";
      }
      EXPECT_GT(supported, 0);
      EXPECT_NE(heuristic_default(costs), nullptr);
    }
  }
}

TEST(CudnnConvDevice, AWorkspaceLimitIsNeverExceededAndBadCallsFailClearly) {
  std::string why;
  if (!device_available(&why)) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  const ConvShape s{4, 16, 16, 16, 16, 3, 1, 1};
  std::mt19937 rng(3);
  CudnnConv conv(s);
  conv.upload(random_floats(s.input_elements(), rng), random_floats(s.weight_elements(), rng),
              random_floats(s.output_elements(), rng));
  bool tried = false;
  for (const Pass pass : all_passes()) {
    for (const AlgorithmCost& c : conv.measure(pass, 1)) {
      if (!c.supported || c.workspace_bytes == 0) continue;
      SCOPED_TRACE(std::string(pass_name(pass)) + " " + c.name);
      // One byte short is refused before anything is launched, naming both sizes; the exact
      // size runs.
      testing::expect_says(
          testing::message_of<WorkspaceExceeded>(
              [&] { conv.run(pass, c.algorithm, c.workspace_bytes - 1); }),
          "needs " + std::to_string(c.workspace_bytes) + " bytes of workspace, the limit is " +
              std::to_string(c.workspace_bytes - 1));
      EXPECT_NO_THROW(conv.run(pass, c.algorithm, c.workspace_bytes));
      tried = true;
    }
  }
  EXPECT_TRUE(tried) << "no algorithm with a workspace on " << s.to_string();
  const std::string no_such =
      testing::message_of<CudnnError>([&] { conv.run(Pass::kForward, 99, 1 << 30); });
  testing::expect_says(no_such, "algorithm 99 on " + s.to_string());
  testing::expect_says(no_such, "no such algorithm");
  testing::expect_says(
      testing::message_of<std::invalid_argument>([&] { conv.measure(Pass::kForward, 0); }),
      "repeats must be positive");
  EXPECT_FALSE(conv.workspace_bytes(Pass::kForward, -1).has_value());
  testing::expect_says(
      testing::message_of<std::invalid_argument>([&] { conv.upload({1.0f}, {}, {}); }),
      "x has 1 floats, the shape needs " + std::to_string(s.input_elements()));
}

}  // namespace
}  // namespace engram::nn::cudnn
