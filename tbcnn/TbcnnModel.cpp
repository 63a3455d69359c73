#include "tbcnn/TbcnnModel.h"

#include "common/Errors.h"
#include "nn/ReLU.h"

#include <nlohmann/json.hpp>

#include <limits>

namespace engram::tbcnn {

std::string TbcnnConfig::to_json() const {
  return nlohmann::json{{"model", model},           {"task", task},
                        {"language", language},     {"vocabulary", vocabulary},
                        {"classes", classes},       {"embedding", embedding},
                        {"channels", channels},     {"layers", layers},
                        {"activation", activation}, {"identifiers", identifiers},
                        {"buckets", buckets},       {"pivot_flag", pivot_flag},
                        {"residual", residual}}
      .dump();
}

TbcnnConfig TbcnnConfig::from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    TbcnnConfig c;
    c.model = j.at("model");
    c.task = j.at("task");
    c.language = j.at("language");
    c.vocabulary = j.at("vocabulary").get<std::vector<std::string>>();
    c.classes = j.at("classes").get<std::vector<std::string>>();
    c.embedding = j.at("embedding");
    c.channels = j.at("channels");
    c.layers = j.at("layers");
    c.activation = j.at("activation");
    c.identifiers = j.at("identifiers");
    c.buckets = j.at("buckets");
    c.pivot_flag = j.at("pivot_flag");
    c.residual = j.value("residual", false);  // absent in models written before the option
    if (c.vocabulary.empty() || c.classes.empty() || c.embedding < 1 || c.embedding > 4096 ||
        c.channels < 1 || c.channels > 4096 || c.layers < 1 || c.layers > 16 || c.buckets < 1 ||
        c.buckets > (1 << 22))
      throw FormatError("a TBCNN configuration with sizes out of range");
    if (c.model != "tbcnn" && c.model != "localized" && c.model != "bow")
      throw FormatError("a TBCNN configuration of unknown model '" + c.model + "'");
    if (c.activation != "relu" && c.activation != "tanh")
      throw FormatError("a TBCNN configuration of unknown activation '" + c.activation + "'");
    if (c.task != "classify" && c.task != "masked" && c.task != "loop")
      throw FormatError("a TBCNN configuration of unknown task '" + c.task + "'");
    if (c.language != "python" && c.language != "c" && c.language != "cpp")
      throw FormatError("a TBCNN configuration of unknown language '" + c.language + "'");
    if (c.task == "masked" && c.vocabulary.back() != "<mask>")
      throw FormatError("a masked-task TBCNN configuration without the <mask> node type");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("malformed TBCNN configuration: ") + e.what());
  }
}

void check_model_and_activation(const std::string& model, const std::string& activation) {
  if (model != "tbcnn" && model != "localized" && model != "bow")
    throw InvalidOption("model", "must be tbcnn, localized or bow, not '" + model + "'");
  if (activation != "relu" && activation != "tanh")
    throw InvalidOption("activation", "must be relu or tanh, not '" + activation + "'");
}

TbcnnModelImpl::TbcnnModelImpl(TbcnnConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  check_model_and_activation(c.model, c.activation);
  const auto vocab = static_cast<int64_t>(c.vocabulary.size());
  const auto classes = static_cast<int64_t>(c.classes.size());
  if (c.model == "bow") {
    out_ = register_module("out", nn::Linear(vocab, classes));
    return;
  }
  types_ = register_module("types", nn::Embedding(vocab, c.embedding));
  if (c.identifiers) tokens_ = register_module("tokens", nn::Embedding(c.buckets, c.embedding));
  if (c.pivot_flag) pivot_ = register_module("pivot", nn::Embedding(2, c.embedding));
  int64_t width = c.embedding;
  for (int l = 0; l < c.layers; ++l) {
    const std::string n = std::to_string(l);
    top_.push_back(register_module("conv" + n + "_top", nn::Linear(width, c.channels)));
    left_.push_back(register_module("conv" + n + "_left",
                                    nn::Linear(nn::LinearOptions(width, c.channels).bias(false))));
    right_.push_back(register_module("conv" + n + "_right",
                                     nn::Linear(nn::LinearOptions(width, c.channels).bias(false))));
    if (c.localized()) {
      up_left_.push_back(register_module(
          "conv" + n + "_up_left", nn::Linear(nn::LinearOptions(width, c.channels).bias(false))));
      up_right_.push_back(register_module(
          "conv" + n + "_up_right", nn::Linear(nn::LinearOptions(width, c.channels).bias(false))));
    }
    width = c.channels;
  }
  out_ = register_module("out", nn::Linear(c.channels, classes));
}

torch::Tensor TbcnnModelImpl::encode(const TreeBatch& batch) {
  const auto& c = config_;
  // Batches are made in host memory; the model computes where its parameters are.
  const c10::Device device = out_->parameters().front().device();
  const TreeBatch moved = device.is_cpu() ? TreeBatch() : batch.to(device);
  const TreeBatch& b = device.is_cpu() ? batch : moved;
  const auto floats = torch::TensorOptions().dtype(torch::kFloat).device(device);
  if (c.model == "bow") {
    const auto vocab = static_cast<int64_t>(c.vocabulary.size());
    auto counts = torch::zeros({b.num_trees, vocab}, floats);
    counts.index_put_({b.tree_of, b.types}, torch::ones({b.types.size(0)}, floats),
                      /*accumulate=*/true);
    return counts / counts.sum(1, /*keepdim=*/true).clamp_min(1.0);
  }
  auto x = types_(b.types);
  if (c.identifiers && b.token_ids.numel() > 0) {
    const auto tokens = tokens_(b.token_ids) * b.token_weight.unsqueeze(1);
    x = x.index_add(0, b.token_node, tokens);
  }
  if (c.pivot_flag) x = x + pivot_(b.is_pivot);
  const auto eta_l = b.eta_left.unsqueeze(1), eta_r = b.eta_right.unsqueeze(1);
  for (std::size_t l = 0; l < top_.size(); ++l) {
    auto y = top_[l](x);
    if (b.edge_top.numel() > 0) {
      const auto children = x.index_select(0, b.edge_child);
      const auto from_children = eta_l * left_[l](children) + eta_r * right_[l](children);
      y = y.index_add(0, b.edge_top, from_children);
    }
    if (c.localized() && b.up_top.numel() > 0) {
      const auto parents = x.index_select(0, b.up_parent);
      const auto from_parent = b.up_eta_left.unsqueeze(1) * up_left_[l](parents) +
                               b.up_eta_right.unsqueeze(1) * up_right_[l](parents);
      y = y.index_add(0, b.up_top, from_parent);
    }
    auto out = c.activation == "relu" ? nn::relu(y) : torch::tanh(y);
    x = c.residual && l > 0 ? out + x : out;
  }
  if (c.localized()) return x.index_select(0, b.pivot);
  // Max over each tree's nodes: scatter into [trees, longest tree, channels] padded with -inf.
  const auto padded =
      torch::full({b.num_trees, b.max_nodes, x.size(1)}, -std::numeric_limits<float>::infinity(),
                  x.options())
          .index_put({b.tree_of, b.position}, x);
  return std::get<0>(padded.max(1));
}

torch::Tensor TbcnnModelImpl::classify(const torch::Tensor& vectors) { return out_(vectors); }

torch::Tensor TbcnnModelImpl::forward(const TreeBatch& batch) { return classify(encode(batch)); }

}  // namespace engram::tbcnn
