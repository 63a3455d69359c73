#include "npi/NpiModel.h"

#include "common/Errors.h"
#include "nn/Embedding.h"
#include "nn/Linear.h"
#include "nn/ReLU.h"
#include "nn/Width.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace engram::npi {

NpiConfig NpiConfig::for_task(const datasets::Task& task) {
  NpiConfig c;
  c.task = task.name();
  c.num_programs = static_cast<int>(task.programs().size());
  c.observation_sizes = task.observation_sizes();
  c.arg_size = task.arg_size();
  return c;
}

int NpiConfig::feature_dim() const {
  return std::accumulate(observation_sizes.begin(), observation_sizes.end(), 0) + 3 * arg_size;
}

std::string NpiConfig::to_json() const {
  return nlohmann::json{{"task", task},
                        {"num_programs", num_programs},
                        {"observation_sizes", observation_sizes},
                        {"arg_size", arg_size},
                        {"hidden", hidden},
                        {"layers", layers},
                        {"state_dim", state_dim},
                        {"program_dim", program_dim},
                        {"key_dim", key_dim},
                        {"layers_impl", layers_impl}}
      .dump();
}

NpiConfig NpiConfig::from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    NpiConfig c;
    // Sizes reach torch's allocators: each an integer in 1..limit (nn::kMaxWidth, as training
    // allows), where a forged one was a 160 GB allocation and a torch stack trace, and 64.5 was
    // taken for 64.
    const auto size = [&](const nlohmann::json& v, const std::string& key, int limit) {
      if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > limit)
        throw FormatError("bad NPI configuration in checkpoint: " + key + " is " + v.dump() +
                          ", not an integer in 1.." + std::to_string(limit));
      return v.get<int>();
    };
    constexpr int kMaxSize = nn::kMaxWidth;
    c.task = j.at("task").get<std::string>();
    c.num_programs = size(j.at("num_programs"), "num_programs", kMaxSize);
    if (!j.at("observation_sizes").is_array() || j.at("observation_sizes").empty() ||
        j.at("observation_sizes").size() > 64)
      throw FormatError(
          "bad NPI configuration in checkpoint: observation_sizes is not a list of "
          "1 to 64 sizes");
    for (const auto& v : j.at("observation_sizes"))
      c.observation_sizes.push_back(size(v, "an observation size", kMaxSize));
    c.arg_size = size(j.at("arg_size"), "arg_size", kMaxSize);
    c.hidden = size(j.at("hidden"), "hidden", kMaxSize);
    c.layers = size(j.at("layers"), "layers", 64);
    c.state_dim = size(j.at("state_dim"), "state_dim", kMaxSize);
    c.program_dim = size(j.at("program_dim"), "program_dim", kMaxSize);
    c.key_dim = size(j.at("key_dim"), "key_dim", kMaxSize);
    if (j.contains("layers_impl")) {
      c.layers_impl = j.at("layers_impl").get<std::string>();
    } else if (j.contains("core")) {
      const auto core = j.at("core").get<std::string>();
      if (core != "fused" && core != "torch") {
        throw FormatError("bad NPI configuration in checkpoint: unknown core '" + core + "'");
      }
      c.layers_impl = core == "fused" ? "engram" : "torch";
    }
    if (c.layers_impl != "engram" && c.layers_impl != "torch") {
      throw FormatError("bad NPI configuration in checkpoint: unknown layers_impl '" +
                        c.layers_impl + "'");
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("bad NPI configuration in checkpoint: ") + e.what());
  }
}

NpiModelImpl::NpiModelImpl(NpiConfig config) : config_(std::move(config)) {
  if (config_.layers_impl != "engram" && config_.layers_impl != "torch") {
    throw std::invalid_argument("unknown NPI layers '" + config_.layers_impl +
                                "' (engram or torch)");
  }
  namespace tnn = torch::nn;
  const int core_input = config_.state_dim + config_.program_dim;
  // Registered and drawn in the same order for both implementations (same names, same values).
  if (engram_layers()) {
    encoder_ = register_module("encoder",
                               tnn::Sequential(nn::Linear(config_.feature_dim(), config_.state_dim),
                                               nn::ReLU(nn::ReLUOptions().inplace(true)),
                                               nn::Linear(config_.state_dim, config_.state_dim)));
    program_embedding_ = tnn::AnyModule(register_module(
        "program_embedding", nn::Embedding(config_.num_programs, config_.program_dim)));
  } else {
    encoder_ = register_module(
        "encoder", tnn::Sequential(tnn::Linear(config_.feature_dim(), config_.state_dim),
                                   tnn::ReLU(), tnn::Linear(config_.state_dim, config_.state_dim)));
    program_embedding_ = tnn::AnyModule(register_module(
        "program_embedding", tnn::Embedding(config_.num_programs, config_.program_dim)));
  }
  program_keys_ = register_parameter("program_keys",
                                     torch::randn({config_.num_programs, config_.key_dim}) * 0.5);
  if (engram_layers()) {
    core_ = register_module(
        "core", nn::LSTM(nn::LSTMOptions(core_input, config_.hidden).num_layers(config_.layers)));
    end_head_ = tnn::AnyModule(register_module("end_head", nn::Linear(config_.hidden, 1)));
    key_head_ =
        tnn::AnyModule(register_module("key_head", nn::Linear(config_.hidden, config_.key_dim)));
    arg_head_ = tnn::AnyModule(
        register_module("arg_head", nn::Linear(config_.hidden, 3 * config_.arg_size)));
  } else {
    torch_core_ = register_module(
        "core", tnn::LSTM(tnn::LSTMOptions(core_input, config_.hidden).num_layers(config_.layers)));
    end_head_ = tnn::AnyModule(register_module("end_head", tnn::Linear(config_.hidden, 1)));
    key_head_ =
        tnn::AnyModule(register_module("key_head", tnn::Linear(config_.hidden, config_.key_dim)));
    arg_head_ = tnn::AnyModule(
        register_module("arg_head", tnn::Linear(config_.hidden, 3 * config_.arg_size)));
  }
}

torch::Tensor NpiModelImpl::core_input(const torch::Tensor& features,
                                       const torch::Tensor& programs) {
  return torch::cat({encoder_->forward(features), program_embedding_.forward(programs)}, 1);
}

NpiHeads NpiModelImpl::heads(const torch::Tensor& hidden) {
  NpiHeads out;
  out.end_logit = end_head_.forward(hidden).squeeze(1);
  const torch::Tensor key = key_head_.forward(hidden);
  out.program_logits =
      engram_layers() ? nn::linear(key, program_keys_) : torch::matmul(key, program_keys_.t());
  out.arg_logits = arg_head_.forward(hidden).view({-1, 3, config_.arg_size});
  return out;
}

NpiHeads NpiModelImpl::forward_packed(const torch::Tensor& features, const torch::Tensor& programs,
                                      const torch::Tensor& batch_sizes) {
  if (core_) return heads(core_->forward_packed(core_input(features, programs), batch_sizes));
  torch::nn::utils::rnn::PackedSequence packed(core_input(features, programs), batch_sizes);
  auto result = torch_core_->forward_with_packed_input(packed);
  return heads(std::get<0>(result).data());
}

NpiHeads NpiModelImpl::forward_packed(const torch::Tensor& features, const torch::Tensor& programs,
                                      const torch::Tensor& batch_sizes, nn::UnitRunner* runner) {
  if (runner == nullptr) return forward_packed(features, programs, batch_sizes);
  return heads(runner->forward(units(programs, batch_sizes), features));
}

std::vector<std::string> NpiModelImpl::unit_names() const {
  if (!core_) return {};
  return {"encoder", "core"};
}

std::vector<nn::Unit> NpiModelImpl::units(const torch::Tensor& programs,
                                          const torch::Tensor& batch_sizes) {
  if (!core_) return {};
  std::vector<torch::Tensor> encoder_parameters = encoder_->parameters();
  for (const auto& p : program_embedding_.ptr()->parameters()) encoder_parameters.push_back(p);
  std::vector<nn::Unit> units;
  // By value: a recomputed unit runs again during backward.
  units.push_back({"encoder",
                   [encoder = encoder_, embedding = program_embedding_,
                    programs](const torch::Tensor& x) mutable {
                     return torch::cat({encoder->forward(x), embedding.forward(programs)}, 1);
                   },
                   encoder_parameters});
  units.push_back({"core",
                   [core = core_, batch_sizes](const torch::Tensor& x) mutable {
                     return core->forward_packed(x, batch_sizes);
                   },
                   core_->parameters()});
  return units;
}

NpiHeads NpiModelImpl::step(const torch::Tensor& features, const torch::Tensor& programs,
                            torch::Tensor& h, torch::Tensor& c) {
  if (core_) return heads(core_->step(core_input(features, programs), h, c));
  auto result =
      torch_core_->forward(core_input(features, programs).unsqueeze(0), std::make_tuple(h, c));
  h = std::get<0>(std::get<1>(result));
  c = std::get<1>(std::get<1>(result));
  return heads(std::get<0>(result).squeeze(0));
}

}  // namespace engram::npi
