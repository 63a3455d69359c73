#include "primitives/PrimitiveNet.h"

#include "nn/ReLU.h"

namespace engram::primitives {

int PrimitiveNetConfig::num_inputs() const {
  return datasets::kind_arity(kind) + (has_parameter ? 1 : 0);
}

int PrimitiveNetConfig::num_outputs() const { return datasets::kind_results(kind, k); }

PrimitiveNetConfig PrimitiveNetConfig::for_family(const std::string& family, int k) {
  const auto* f = datasets::find_family(family);
  if (f == nullptr) throw UsageError("unknown primitive '" + family + "'");
  PrimitiveNetConfig config;
  config.family = family;
  config.kind = f->kind;
  config.has_parameter = f->has_parameter;
  config.min_parameter = f->min_parameter;
  config.k = k;
  return config;
}

Examples all_examples(const PrimitiveNetConfig& config) {
  const int k = config.k;
  const int arity = datasets::kind_arity(config.kind);
  const int ys = arity >= 2 ? k : 1;
  const int carries = arity >= 3 ? 2 : 1;  // the full adder's carry in is 0 or 1
  const int first_parameter = config.has_parameter ? config.min_parameter : 0;
  const int parameters = config.has_parameter ? k - first_parameter : 1;
  const long count = static_cast<long>(k) * ys * carries * parameters;
  auto inputs = torch::empty({count, config.num_inputs()}, torch::kLong);
  auto targets = torch::empty({count}, torch::kLong);
  auto* in = inputs.data_ptr<int64_t>();
  auto* out = targets.data_ptr<int64_t>();
  long row = 0;
  for (int p = first_parameter; p < first_parameter + parameters; ++p) {
    datasets::PrimitiveRef ref{config.family, config.has_parameter ? p : -1};
    for (int x = 0; x < k; ++x) {
      for (int y = 0; y < ys; ++y) {
        for (int z = 0; z < carries; ++z) {
          int64_t* r = in + row * config.num_inputs();
          int col = 0;
          r[col++] = x;
          if (arity >= 2) r[col++] = y;
          if (arity >= 3) r[col++] = z;
          if (config.has_parameter) r[col++] = p;
          out[row++] = datasets::symbolic_apply(ref, k, x, y, z);
        }
      }
    }
  }
  return {inputs, targets};
}

PrimitiveNetImpl::PrimitiveNetImpl(PrimitiveNetConfig config) : config_(std::move(config)) {
  const int n = config_.num_inputs();
  for (int i = 0; i < n; ++i) {
    tables_.push_back(
        register_module("input" + std::to_string(i), nn::Embedding(config_.k, config_.embedding)));
  }
  hidden1_ = register_module("hidden1", nn::Linear(n * config_.embedding, config_.hidden));
  hidden2_ = register_module("hidden2", nn::Linear(config_.hidden, config_.hidden));
  out_ = register_module("out", nn::Linear(config_.hidden, config_.num_outputs()));
}

torch::Tensor PrimitiveNetImpl::forward(const torch::Tensor& inputs) {
  std::vector<torch::Tensor> parts;
  for (std::size_t i = 0; i < tables_.size(); ++i)
    parts.push_back(tables_[i](inputs.select(1, static_cast<long>(i))));
  auto h = nn::relu(hidden1_(torch::cat(parts, 1)));
  h = nn::relu(hidden2_(h));
  return out_(h);
}

}  // namespace engram::primitives
