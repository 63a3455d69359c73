#pragma once
/// \file
/// Checkpoints: named tensors plus a header (format version, model kind, config as JSON text),
/// written through torch's serializer to a temporary file and renamed into place. A content
/// checksum in the header turns a corrupted file into a clear FormatError instead of silently wrong
/// weights.
///
/// File layout (version 2): one text line `engram-checkpoint <version> <bytes> <fnv1a-64>` giving
/// the size and FNV-1a checksum of the rest, then torch's archive. The whole archive is verified
/// before torch parses it: torch's unpickler crashes on some corrupted input instead of throwing.
///
/// \code
///   engram::trainer::Checkpoint ck{"npi", config_json, {{"core.weight", w}}};
///   engram::trainer::save_checkpoint("model.pt", ck);
///   auto back = engram::trainer::load_checkpoint("model.pt", "npi");
///   // A model's parameters and its configuration, saved and built back:
///   engram::trainer::save_module("model.pt", "npi", model->config().to_json(), *model);
///   auto loaded = engram::trainer::load_module("model.pt", "npi", [](const std::string& json) {
///     return NpiModel(NpiConfig::from_json(json));   // parameters loaded into it afterwards
///   });
/// \endcode

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace engram::trainer {

constexpr int kCheckpointFormatVersion = 2;

struct Checkpoint {
  std::string kind;         ///< model kind, e.g. "npi"
  std::string config_json;  ///< model configuration, parsed by the model
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

/// Writes atomically; throws std::runtime_error on I/O failure.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);

/// Reads and verifies; throws std::runtime_error if missing, FormatError if corrupt, of another
/// format version, or of another kind than `expected_kind`.
Checkpoint load_checkpoint(const std::string& path, const std::string& expected_kind);

/// Copies `tensors` into `module`'s parameters of the same names (under no_grad). Throws
/// FormatError naming `path` when the names or shapes do not match the module's exactly;
/// `family`, when not empty, qualifies the names in messages ("add.out.weight").
void load_parameters(torch::nn::Module& module,
                     const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                     const std::string& path, const std::string& family = "");

/// Appends `module`'s named parameters to `checkpoint`'s tensors, each name preceded by `prefix`
/// and a dot when `prefix` is not empty (several networks in one file, e.g. one per family).
void add_parameters(Checkpoint& checkpoint, const torch::nn::Module& module,
                    const std::string& prefix = "");

/// load_parameters of the tensors of `checkpoint` named `prefix`.NAME, as NAME (all of them when
/// `prefix` is empty); the messages qualify names with `prefix`.
void load_parameters(torch::nn::Module& module, const Checkpoint& checkpoint,
                     const std::string& path, const std::string& prefix = "");

/// Writes a checkpoint of `kind` holding `config_json` and `module`'s named parameters.
void save_module(const std::string& path, const std::string& kind, const std::string& config_json,
                 const torch::nn::Module& module);

/// Reads a checkpoint of `kind` written by save_module: `build(config_json)` parses the
/// configuration (throwing FormatError for a bad one) and returns the module it describes (a torch
/// ModuleHolder such as NpiModel), whose parameters are then loaded from the file; returns it.
/// Throws as load_checkpoint and load_parameters.
template <typename Build>
auto load_module(const std::string& path, const std::string& kind, Build&& build) {
  const Checkpoint checkpoint = load_checkpoint(path, kind);
  auto module = build(checkpoint.config_json);
  load_parameters(*module, checkpoint.tensors, path);
  return module;
}

}  // namespace engram::trainer
