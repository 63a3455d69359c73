#pragma once
/// \file
/// The Neural Programmer-Interpreter core (Reed & de Freitas 2016), built from the layers of nn/
/// (or, for comparison, from plain torch modules).
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

#include "datasets/Task.h"
#include "nn/LSTM.h"
#include "nn/Units.h"

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
  /// Layer implementation: "engram" (the layers of nn/: saved tensors through the activation
  /// store, weight gradients through the scheduler, the packed LSTM of nn/LSTM.h) or "torch"
  /// (torch::nn::Linear, Embedding and LSTM, kept for comparison). Both have the same parameters
  /// under the same names, drawn the same way, so a checkpoint of one loads into the other.
  std::string layers_impl = "engram";

  /// The default configuration for `task` (its programs, observation slots and arguments).
  static NpiConfig for_task(const datasets::Task& task);

  /// Width of the encoder input: one-hot observation slots then three one-hot arguments.
  int feature_dim() const;
  std::string to_json() const;
  /// Throws FormatError. A configuration without "layers_impl" gets the default; one written
  /// before nn/ existed names a "core" ("fused" meant the engram LSTM, "torch" the torch one).
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
  /// Throws std::invalid_argument for an unknown config.layers_impl.
  explicit NpiModelImpl(NpiConfig config);

  /// Training: a packed batch of invocation sequences. `features` [N, feature_dim] and `programs`
  /// [N] are in packed order (time-major, sequences sorted by decreasing length) and
  /// `batch_sizes` [T] counts the sequences still running at each time step.
  NpiHeads forward_packed(const torch::Tensor& features, const torch::Tensor& programs,
                          const torch::Tensor& batch_sizes);

  /// The same, the encoder and the core run as units (nn/Units.h) through `runner` (nullptr: as
  /// above).
  NpiHeads forward_packed(const torch::Tensor& features, const torch::Tensor& programs,
                          const torch::Tensor& batch_sizes, nn::UnitRunner* runner);

  /// The model cut into units for swap and recompute (layers_impl "engram" only; empty for
  /// "torch"): "encoder" (features to the core's input: the task encoder, with the programs'
  /// embeddings beside it) and "core" (the LSTM over the packed batch); the heads stay outside.
  std::vector<nn::Unit> units(const torch::Tensor& programs, const torch::Tensor& batch_sizes);
  /// The names of units(), without building them.
  std::vector<std::string> unit_names() const;

  /// Inference: one step for B independent frames. `h` and `c` are [layers, B, hidden] and are
  /// replaced by the new state.
  NpiHeads step(const torch::Tensor& features, const torch::Tensor& programs, torch::Tensor& h,
                torch::Tensor& c);

  const NpiConfig& config() const { return config_; }

 private:
  torch::Tensor core_input(const torch::Tensor& features, const torch::Tensor& programs);
  NpiHeads heads(const torch::Tensor& hidden);
  bool engram_layers() const { return config_.layers_impl == "engram"; }

  NpiConfig config_;
  // Linear layers, the ReLU and the embedding are nn/ or torch modules (config_.layers_impl).
  torch::nn::Sequential encoder_{nullptr};
  torch::nn::AnyModule program_embedding_;
  torch::Tensor program_keys_;
  nn::LSTM core_{nullptr};               ///< layers_impl "engram"
  torch::nn::LSTM torch_core_{nullptr};  ///< layers_impl "torch"
  torch::nn::AnyModule end_head_, key_head_, arg_head_;
};
TORCH_MODULE(NpiModel);

}  // namespace engram::npi
