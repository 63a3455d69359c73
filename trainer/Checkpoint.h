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

}  // namespace engram::trainer
