#include "trainer/Checkpoint.h"

#include "common/Hash.h"

#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "common/FileChecks.h"

#include <torch/serialize.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace engram::trainer {
namespace {

constexpr const char* kMagic = "engram-checkpoint";

/// FNV-1a over names, shapes and bytes of every tensor.
std::uint64_t checksum(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::uint64_t h = kFnv1aSeed;
  auto mix = [&h](const void* data, std::size_t n) { h = fnv1a(data, n, h); };
  for (const auto& [name, tensor] : tensors) {
    mix(name.data(), name.size());
    const auto t = tensor.detach().contiguous().cpu();
    for (auto d : t.sizes()) mix(&d, sizeof(d));
    mix(t.data_ptr(), t.numel() * t.element_size());
  }
  return h;
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  nlohmann::json header{{"format", "engram-checkpoint"},
                        {"version", kCheckpointFormatVersion},
                        {"kind", checkpoint.kind},
                        {"config", checkpoint.config_json},
                        {"checksum", std::to_string(checksum(checkpoint.tensors))}};
  std::vector<std::string> names;
  torch::serialize::OutputArchive archive;
  archive.write("engram_header", c10::IValue(header.dump()));
  for (const auto& [name, tensor] : checkpoint.tensors) {
    archive.write("t/" + name, tensor.detach().cpu());
    names.push_back(name);
  }
  archive.write("engram_names", c10::IValue(nlohmann::json(names).dump()));
  // The archive goes behind a first line that gives its size and checksum, so that a damaged file
  // is rejected before torch parses it (torch's unpickler crashes on some corrupt input).
  std::ostringstream bytes;
  archive.save_to(bytes);
  const std::string data = bytes.str();
  AtomicFile file(path, /*binary=*/true);
  file.stream() << kMagic << ' ' << kCheckpointFormatVersion << ' ' << data.size() << ' '
                << fnv1a(data.data(), data.size()) << '\n'
                << data;
  file.commit();
}

Checkpoint load_checkpoint(const std::string& path, const std::string& expected_kind) {
  if (!std::filesystem::exists(path))
    throw std::runtime_error("model file '" + path + "' not found");
  refuse_folder(path, "model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read model file '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto newline = bytes.find('\n');
  std::istringstream first(bytes.substr(0, std::min(newline, std::size_t{256})));
  std::string magic;
  int version = 0;
  std::size_t size = 0;
  std::uint64_t sum = 0;
  if (newline == std::string::npos || !(first >> magic) || magic != kMagic) {
    throw FormatError("'" + path + "' is not an engram checkpoint");
  }
  if (!(first >> version) || version != kCheckpointFormatVersion) {
    throw FormatError("'" + path + "' has checkpoint format version " + std::to_string(version) +
                      ", this engram reads version " + std::to_string(kCheckpointFormatVersion));
  }
  const char* data = bytes.data() + newline + 1;
  if (!(first >> size >> sum) || size != bytes.size() - newline - 1 || sum != fnv1a(data, size)) {
    throw FormatError("'" + path + "' is corrupt or truncated: size or checksum mismatch");
  }
  torch::serialize::InputArchive archive;
  Checkpoint out;
  nlohmann::json header;
  std::vector<std::string> names;
  try {
    archive.load_from(data, size);
    c10::IValue value;
    if (!archive.try_read("engram_header", value) || !value.isString()) {
      throw FormatError("no engram header");
    }
    header = nlohmann::json::parse(value.toStringRef());
    if (!archive.try_read("engram_names", value) || !value.isString()) {
      throw FormatError("no tensor list");
    }
    names = nlohmann::json::parse(value.toStringRef()).get<std::vector<std::string>>();
    for (const auto& name : names) {
      at::Tensor t;
      archive.read("t/" + name, t);
      out.tensors.emplace_back(name, t);
    }
  } catch (const std::exception& e) {
    throw FormatError("'" + path + "' is not a readable engram checkpoint (corrupt or wrong file)");
  }
  try {
    if (header.value("format", "") != "engram-checkpoint") {
      throw FormatError("'" + path + "' is not an engram checkpoint");
    }
    if (header.value("version", 0) != kCheckpointFormatVersion) {
      throw FormatError("'" + path + "' has checkpoint format version " + header["version"].dump() +
                        ", this engram reads version " + std::to_string(kCheckpointFormatVersion));
    }
    out.kind = header.value("kind", "");
    if (out.kind != expected_kind) {
      throw FormatError("'" + path + "' holds a '" + out.kind + "' model, expected '" +
                        expected_kind + "'");
    }
    out.config_json = header.value("config", "");
    if (header.value("checksum", "") != std::to_string(checksum(out.tensors))) {
      throw FormatError("'" + path + "' is corrupt: checksum mismatch");
    }
  } catch (const nlohmann::json::exception&) {
    throw FormatError("'" + path + "' has a malformed engram header");
  }
  return out;
}

void load_parameters(torch::nn::Module& module,
                     const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                     const std::string& path, const std::string& family) {
  torch::NoGradGuard no_grad;
  auto params = module.named_parameters();
  if (params.size() != tensors.size()) {
    throw FormatError("'" + path + "' has the wrong tensors" +
                      (family.empty() ? "" : " for " + family));
  }
  for (const auto& [name, tensor] : tensors) {
    auto* target = params.find(name);
    if (target == nullptr || target->sizes() != tensor.sizes()) {
      throw FormatError("'" + path + "' has an unexpected tensor '" +
                        (family.empty() ? "" : family + ".") + name + "'");
    }
    target->copy_(tensor);
  }
}

void add_parameters(Checkpoint& checkpoint, const torch::nn::Module& module,
                    const std::string& prefix) {
  for (const auto& item : module.named_parameters()) {
    checkpoint.tensors.emplace_back(prefix.empty() ? item.key() : prefix + "." + item.key(),
                                    item.value());
  }
}

void load_parameters(torch::nn::Module& module, const Checkpoint& checkpoint,
                     const std::string& path, const std::string& prefix) {
  if (prefix.empty()) {
    load_parameters(module, checkpoint.tensors, path);
    return;
  }
  const std::string head = prefix + ".";
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, tensor] : checkpoint.tensors) {
    if (name.compare(0, head.size(), head) == 0)
      tensors.emplace_back(name.substr(head.size()), tensor);
  }
  load_parameters(module, tensors, path, prefix);
}

void save_module(const std::string& path, const std::string& kind, const std::string& config_json,
                 const torch::nn::Module& module) {
  Checkpoint checkpoint;
  checkpoint.kind = kind;
  checkpoint.config_json = config_json;
  add_parameters(checkpoint, module);
  save_checkpoint(path, checkpoint);
}

}  // namespace engram::trainer
