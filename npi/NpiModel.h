#pragma once
/// \file
/// The Neural Programmer-Interpreter core (Reed & de Freitas 2016), in LibTorch modules.
///
///   s_t = f_enc(observation_t, args)                      task encoder (2-layer MLP over one-hots)
///   h_t = f_lstm([s_t, M_prog[program]], h_{t-1})         2-layer LSTM core, fresh state per call
///   r_t = f_end(h_t)                                      termination logit: return at this step
///   k_t = f_prog(h_t);  next = argmax_j M_key[j] . k_t    program key lookup
///   a_t = f_arg(h_t)                                      three argument heads
///
/// One deviation from the paper, for recursion: the termination decision is taken *before* the call
/// at each step (the step either returns or calls), so a base case may return without calling
/// anything.
///
/// Heavy header (torch/torch.h): include it only from npi sources and tests; the command line uses
/// npi/Npi.h.

#include "npi/FusedLstm.h"

#include <torch/torch.h>

#include <string>
#include <vector>

namespace engram::npi {

struct NpiConfig {
  std::string task;
  int num_programs = 0;
  std::vector<int> observation_sizes;  ///< cardinality of each observation slot
  int arg_size = 10;                   ///< each of the 3 arguments lies in [0, arg_size)
  int hidden = 256;                    ///< LSTM width
  int layers = 2;                      ///< LSTM depth
  int state_dim = 128;                 ///< encoder output s_t
  int program_dim = 64;                ///< program embedding width
  int key_dim = 32;                    ///< program key width
  /// Core LSTM implementation: "fused" (npi/FusedLstm.h, the fast one) or "torch"
  /// (torch::nn::LSTM, kept as the reference). Both have the same parameters under the same names,
  /// so a checkpoint of one loads into the other.
  std::string core = "fused";

  /// Width of the encoder input: one-hot observation slots then three one-hot arguments.
  int feature_dim() const;
  std::string to_json() const;
  /// Throws FormatError; a configuration without "core" gets the default.
  static NpiConfig from_json(const std::string& text);
};

/// Outputs of the heads for N steps.
struct NpiHeads {
  torch::Tensor end_logit;       ///< [N]
  torch::Tensor program_logits;  ///< [N, num_programs]
  torch::Tensor arg_logits;      ///< [N, 3, arg_size]
};

class NpiModelImpl : public torch::nn::Module {
 public:
  /// Throws std::invalid_argument for an unknown config.core.
  explicit NpiModelImpl(NpiConfig config);

  /// Training: a packed batch of invocation sequences. `features` [N, feature_dim] and `programs`
  /// [N] are in packed order (time-major, sequences sorted by decreasing length) and
  /// `batch_sizes` [T] counts the sequences still running at each time step.
  NpiHeads forward_packed(const torch::Tensor& features, const torch::Tensor& programs,
                          const torch::Tensor& batch_sizes);

  /// Inference: one step for B independent frames. `h` and `c` are [layers, B, hidden] and are
  /// replaced by the new state.
  NpiHeads step(const torch::Tensor& features, const torch::Tensor& programs, torch::Tensor& h,
                torch::Tensor& c);

  const NpiConfig& config() const { return config_; }

 private:
  torch::Tensor core_input(const torch::Tensor& features, const torch::Tensor& programs);
  NpiHeads heads(const torch::Tensor& hidden);

  NpiConfig config_;
  torch::nn::Sequential encoder_{nullptr};
  torch::nn::Embedding program_embedding_{nullptr};
  torch::Tensor program_keys_;
  torch::nn::LSTM core_{nullptr};  ///< config_.core == "torch"
  FusedLstm fused_core_{nullptr};  ///< config_.core == "fused"
  torch::nn::Linear end_head_{nullptr};
  torch::nn::Linear key_head_{nullptr};
  torch::nn::Linear arg_head_{nullptr};
};
TORCH_MODULE(NpiModel);

}  // namespace engram::npi
