// engram_cudnn_conv_bench: lower-memory algorithm replacement on a GPU. Every convolution of the
// CIFAR ResNet-18 (resnet/ResNet.h, its shapes taken from one forward on the CPU) at a batch
// size, with each of cuDNN's algorithms for forward, backward data and backward filter
// (nn/cuda/CudnnConv.h): workspace, median time, and the largest difference from the default
// algorithm's result. Then the planner's choice per layer and pass under each workspace limit:
// the fastest algorithm whose workspace fits, the peak workspace (the largest any chosen one
// needs: layers run one at a time) and the convolutions' time per step, against the defaults
// (cuDNN's heuristic choice, what PyTorch runs without benchmark mode). Writes JSON. Built only
// with nvcc and cuDNN; without a device it writes a report saying so ("skipped": true) and exits
// with 0.
//
//   engram_cudnn_conv_bench --json FILE [--batch 32] [--repeats 10] [--limits-mb 0,1,4,16]
#include "common/AtomicFile.h"
#include "nn/Conv2d.h"
#include "nn/cuda/CudnnConv.h"
#include "resnet/ResNet.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
namespace cc = engram::nn::cudnn;

/// Convolutions of one shape: their names in the model, and whether training needs their input
/// gradient (not the first layer's: the images need none).
struct Layer {
  std::vector<std::string> names;
  cc::ConvShape shape;
  bool input_grad = true;
  std::map<cc::Pass, std::vector<cc::AlgorithmCost>> costs;
};

/// The ResNet-18's convolutions, grouped by shape in the model's order, from one forward of a
/// batch of one image on the CPU; `batch` replaces the batch size.
std::vector<Layer> resnet_layers(std::int64_t batch, std::int64_t image) {
  engram::resnet::ResNet net;
  net->eval();
  {
    at::NoGradGuard no_grad;
    net->forward(at::zeros({1, 3, image, image}));
  }
  std::vector<Layer> layers;
  bool first = true;
  for (const auto& item : net->named_modules()) {
    const auto* conv = item.value()->as<engram::nn::Conv2dImpl>();
    if (conv == nullptr) continue;
    const auto& in = conv->last_input_sizes();
    if (in.size() != 4) throw std::logic_error(item.key() + " saw no 4-d input");
    cc::ConvShape s;
    s.batch = batch;
    s.in_channels = in[1];
    s.height = in[2];
    s.width = in[3];
    s.out_channels = conv->options.out_channels();
    s.kernel = conv->options.kernel_size();
    s.stride = conv->options.stride();
    s.padding = conv->options.padding();
    const bool input_grad = !first;
    first = false;
    auto same = std::find_if(layers.begin(), layers.end(), [&](const Layer& l) {
      return l.shape.to_string() == s.to_string() && l.input_grad == input_grad;
    });
    if (same == layers.end()) {
      layers.push_back(Layer{{item.key()}, s, input_grad, {}});
    } else {
      same->names.push_back(item.key());
    }
  }
  return layers;
}

std::vector<float> random_floats(std::int64_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& f : v) f = u(rng);
  return v;
}

std::vector<cc::Pass> passes_of(const Layer& l) {
  std::vector<cc::Pass> passes;
  for (const cc::Pass p : cc::all_passes())
    if (p != cc::Pass::kBackwardData || l.input_grad) passes.push_back(p);
  return passes;
}

json cost_json(const cc::AlgorithmCost& c) {
  json j{{"algorithm", c.name},
         {"id", c.algorithm},
         {"supported", c.supported},
         {"failed", c.failed},
         {"status", c.status},
         {"heuristic_rank", c.heuristic_rank},
         {"deterministic", c.deterministic ? json(*c.deterministic) : json(nullptr)}};
  if (c.supported)
    j.update({{"workspace_bytes", c.workspace_bytes},
              {"ms", c.ms},
              {"max_abs_diff", c.max_abs_diff},
              {"max_rel_diff", c.max_rel_diff}});
  return j;
}

/// One plan: per layer and pass, the chosen algorithm (the default, or the fastest within
/// `limit`); its peak workspace and the convolutions' milliseconds per step (every layer of a
/// shape counted). A plan with a pass that has nothing within the limit, or whose measurement
/// failed, is infeasible and has no peak or time.
json plan_json(const std::vector<Layer>& layers, std::optional<std::size_t> limit,
               double default_ms, std::size_t default_peak) {
  std::size_t peak = 0;
  double ms = 0;
  bool feasible = true;
  json replaced = json::array();
  for (const Layer& l : layers) {
    for (const cc::Pass p : passes_of(l)) {
      const auto found = l.costs.find(p);
      if (found == l.costs.end()) {
        feasible = false;
        continue;
      }
      const auto& costs = found->second;
      const cc::AlgorithmCost* def = cc::heuristic_default(costs);
      const cc::AlgorithmCost* pick = limit ? cc::fastest_within(costs, *limit) : def;
      if (pick == nullptr) {
        feasible = false;
        continue;
      }
      peak = std::max(peak, pick->workspace_bytes);
      ms += pick->ms * static_cast<double>(l.names.size());
      if (def != nullptr && pick->algorithm != def->algorithm)
        replaced.push_back({{"layers", l.names},
                            {"pass", cc::pass_name(p)},
                            {"from", def->name},
                            {"to", pick->name},
                            {"workspace_from", def->workspace_bytes},
                            {"workspace_to", pick->workspace_bytes},
                            {"ms_from", def->ms},
                            {"ms_to", pick->ms},
                            {"max_abs_diff", pick->max_abs_diff}});
    }
  }
  json j{{"limit_bytes", limit ? json(*limit) : json(nullptr)},
         {"feasible", feasible},
         {"peak_workspace_bytes", feasible ? json(peak) : json(nullptr)},
         {"conv_ms_per_step", feasible ? json(ms) : json(nullptr)},
         {"replaced", replaced}};
  if (default_ms > 0) {
    j["time_vs_default"] = feasible ? json(ms / default_ms) : json(nullptr);
    j["meets_limit_default_misses"] =
        feasible && limit.has_value() && peak <= *limit && default_peak > *limit;
  }
  return j;
}

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    const double v = std::stod(item, &used);
    if (used != item.size() || v < 0 || !std::isfinite(v))
      throw std::invalid_argument("not a size in MiB: '" + item + "'");
    out.push_back(v);
  }
  return out;
}

int usage(const std::string& why) {
  std::cerr << "engram_cudnn_conv_bench: " << why << "\n"
            << "usage: engram_cudnn_conv_bench --json FILE [--batch N] [--repeats R] "
               "[--limits-mb A,B,...]\n";
  return 2;
}

/// A whole integer; std::invalid_argument otherwise.
long long parse_integer(const std::string& text) {
  std::size_t used = 0;
  const long long n = std::stoll(text, &used);
  if (used != text.size()) throw std::invalid_argument("not an integer: '" + text + "'");
  return n;
}

/// Measures every pass of `l` on a device into l.costs; a failure is recorded in the returned
/// row and in `errors`, and the other passes and layers still run (a faulted kernel loses the
/// context, and then the rest fail alike).
json measure_layer(Layer& l, int repeats, std::mt19937& rng, std::vector<std::string>& errors) {
  const cc::ConvShape& s = l.shape;
  json row{{"layers", l.names}, {"shape", s.to_string()}, {"input_grad", l.input_grad}};
  std::optional<cc::CudnnConv> conv;
  try {
    conv.emplace(s);
    const float w_scale = 1.0f / std::sqrt(static_cast<float>(s.in_channels * s.kernel * s.kernel));
    conv->upload(random_floats(s.input_elements(), 1.0f, rng),
                 random_floats(s.weight_elements(), w_scale, rng),
                 random_floats(s.output_elements(), 1.0f, rng));
  } catch (const std::exception& e) {
    errors.push_back(s.to_string() + ": " + e.what());
    row["error"] = e.what();
    return row;
  }
  json passes = json::object();
  for (const cc::Pass p : passes_of(l)) {
    const std::string where = s.to_string() + " " + cc::pass_name(p);
    std::vector<cc::AlgorithmCost> costs;
    try {
      costs = conv->measure(p, repeats);
    } catch (const std::exception& e) {
      errors.push_back(where + ": " + e.what());
      passes[cc::pass_name(p)] = {{"error", e.what()}};
      std::cout << "  " << cc::pass_name(p) << ": error: " << e.what() << "\n";
      continue;
    }
    json algorithms = json::array();
    for (const auto& c : costs) {
      algorithms.push_back(cost_json(c));
      if (c.failed) errors.push_back(where + " " + c.name + ": " + c.status);
    }
    const cc::AlgorithmCost* def = cc::heuristic_default(costs);
    passes[cc::pass_name(p)] = {{"default", def != nullptr ? json(def->name) : json(nullptr)},
                                {"algorithms", algorithms}};
    std::cout << "  " << cc::pass_name(p) << ": default "
              << (def != nullptr ? def->name : std::string("none")) << "\n";
    l.costs[p] = std::move(costs);
  }
  row["passes"] = passes;
  return row;
}

int run(int argc, char** argv) {
  std::string json_path;
  std::int64_t batch = 32;
  int repeats = 10;
  std::vector<double> limits_mb{0, 1, 4, 16};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage("option " + a + " needs a value, or is unknown");
    const std::string v = argv[++i];
    try {
      if (a == "--json") {
        json_path = v;
      } else if (a == "--batch") {
        batch = parse_integer(v);
      } else if (a == "--repeats") {
        const long long r = parse_integer(v);
        if (r > 1000000) throw std::out_of_range(v);
        repeats = static_cast<int>(r);
      } else if (a == "--limits-mb") {
        limits_mb = parse_list(v);
      } else {
        return usage("unknown option " + a);
      }
    } catch (const std::logic_error&) {
      return usage("bad value '" + v + "' for " + a);
    }
  }
  if (json_path.empty()) return usage("--json FILE is required");
  if (batch < 1 || repeats < 1) return usage("--batch and --repeats must be positive");

  // The shapes come from the model on the CPU, device or not (so the report without a device
  // still lists them, and tests check them).
  std::vector<Layer> layers = resnet_layers(batch, 32);
  json shapes = json::array();
  for (const Layer& l : layers)
    shapes.push_back(
        {{"layers", l.names}, {"shape", l.shape.to_string()}, {"input_grad", l.input_grad}});
  json report{{"benchmark", "cudnn_conv_algorithms"},
              {"skipped", false},
              {"model", "resnet18-cifar"},
              {"batch", batch},
              {"shapes", shapes}};
  std::string why;
  if (!cc::device_available(&why)) {
    report["skipped"] = true;
    report["reason"] = why;
    engram::write_file_atomically(json_path, report.dump(2) + "\n");
    std::cout << "no CUDA device (" << why << "); wrote " << json_path << "\n";
    return 0;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
    throw std::runtime_error("cudaGetDeviceProperties failed");
  report.update({{"device", prop.name},
                 {"cudnn_version", cc::cudnn_version()},
                 {"repeats", repeats},
                 {"math", "float32, CUDNN_FMA_MATH (no TF32)"}});

  std::mt19937 rng(1);
  std::vector<std::string> errors;
  json layer_rows = json::array();
  for (Layer& l : layers) {
    std::cout << l.shape.to_string() << " (" << l.names.size() << " layers)\n";
    layer_rows.push_back(measure_layer(l, repeats, rng, errors));
  }
  report["layers"] = layer_rows;
  report["errors"] = errors;

  const json defaults = plan_json(layers, std::nullopt, 0, 0);
  const bool have_default = defaults["feasible"].get<bool>();
  const double default_ms = have_default ? defaults["conv_ms_per_step"].get<double>() : 0.0;
  const std::size_t default_peak =
      have_default ? defaults["peak_workspace_bytes"].get<std::size_t>() : 0;
  report["default_plan"] = defaults;
  json plans = json::array();
  plans.push_back(
      plan_json(layers, std::numeric_limits<std::size_t>::max(), default_ms, default_peak));
  for (const double mb : limits_mb)
    plans.push_back(
        plan_json(layers, static_cast<std::size_t>(mb * (1 << 20)), default_ms, default_peak));
  plans[0]["limit_bytes"] = nullptr;  // the fastest regardless of workspace
  plans[0]["label"] = "fastest";
  report["plans"] = plans;
  std::cout << "default: peak workspace " << defaults["peak_workspace_bytes"] << " bytes, "
            << defaults["conv_ms_per_step"] << " ms of convolutions per step\n";
  for (const auto& p : plans)
    std::cout << "limit "
              << (p["limit_bytes"].is_null() ? std::string("none") : p["limit_bytes"].dump())
              << ": peak " << p["peak_workspace_bytes"] << ", " << p["conv_ms_per_step"] << " ms, "
              << p["replaced"].size() << " replaced\n";
  engram::write_file_atomically(json_path, report.dump(2) + "\n");
  std::cout << "wrote " << json_path << "\n";
  if (!errors.empty()) {
    std::cerr << "engram_cudnn_conv_bench: " << errors.size()
              << " measurements failed (\"errors\" in the report), the first: " << errors.front()
              << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "engram_cudnn_conv_bench: error: " << e.what() << "\n";
    return 1;
  }
}
