#include "trainer/TrainingState.h"

#include "common/Errors.h"
#include "common/FileChecks.h"
#include "common/Hash.h"
#include "nn/Recompute.h"
#include "trainer/BatchSampler.h"
#include "trainer/Checkpoint.h"
#include "trainer/Optimizer.h"
#include "trainer/Stepper.h"
#include "trainer/Trainer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace engram::trainer {
namespace {

constexpr const char* kKind = "training-state";

/// What a resumed run must share with the run that saved the state, by name.
nlohmann::json run_of(const TrainingSession& session) {
  const TrainingOptions& o = session.options();
  return {{"identity_fnv1a", fnv1a(o.identity)},
          {"batch", o.batch},
          {"learning_rate", o.learning_rate},
          {"grad_clip", o.grad_clip},
          {"seed", o.seed},
          {"world_size", o.world_size()}};
}

/// Keys only some runs have: a curriculum's schedule, and an optimizer other than Adam (states
/// written before there was another are Adam's and have none).
bool optional_key(const std::string& key) {
  return key == "curriculum" || key == "steps" || key == "optimizer";
}

/// What an optional key's absence means.
nlohmann::json absent(const std::string& key) { return key == "optimizer" ? "adam" : "(none)"; }

/// A curriculum's schedule is part of the run (only a run with one has the key), and so is an
/// optimizer other than Adam with its momentum.
nlohmann::json run_of_with_curriculum(const TrainingSession& session) {
  nlohmann::json run = run_of(session);
  const TrainingOptions& o = session.options();
  if (o.curriculum > 0) {
    run["curriculum"] = o.curriculum;
    run["steps"] = o.steps;
  }
  if (o.optimizer != "adam")
    run["optimizer"] = o.optimizer + " (momentum " + nlohmann::json(o.momentum).dump() + ")";
  return run;
}

at::Tensor indices_tensor(const std::vector<std::size_t>& v) {
  at::Tensor t = at::empty({static_cast<std::int64_t>(v.size())}, at::kLong);
  auto* p = t.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<std::int64_t>(v[i]);
  return t;
}

const at::Tensor& tensor_named(const std::map<std::string, at::Tensor>& tensors,
                               const std::string& name, const std::string& path) {
  const auto it = tensors.find(name);
  if (it == tensors.end())
    throw FormatError("'" + path + "' is not a complete training state: it has no " + name);
  return it->second;
}

std::string describe(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.is_number_unsigned() ? std::to_string(value.get<std::uint64_t>()) : value.dump();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// What tells the run of identity `saved` from the run of `expected` (TrainingOptions::identity:
/// the model's configuration as a JSON object on the first line, then lines "NAME VALUE" for its
/// data and other options): the first configuration key whose values differ, else the first line
/// ("data" and "corpus" lines are the data). States written before the identity was kept beside
/// its checksum, or identities of another shape, say only that one of them differs.
std::string identity_difference(const nlohmann::json& saved_identity, const std::string& expected) {
  if (!saved_identity.is_string()) return "another model or data";
  const auto saved = lines_of(saved_identity.get<std::string>());
  const auto wanted = lines_of(expected);
  if (saved.empty() || saved.size() != wanted.size()) return "another model or data";
  const auto saved_model = nlohmann::json::parse(saved[0], nullptr, false);
  const auto expected_model = nlohmann::json::parse(wanted[0], nullptr, false);
  if (saved_model.is_object() && expected_model.is_object()) {
    nlohmann::json keys = saved_model;
    keys.update(expected_model);
    for (const auto& [key, unused] : keys.items()) {
      const nlohmann::json none = "(none)";
      const auto& a = saved_model.contains(key) ? saved_model.at(key) : none;
      const auto& b = expected_model.contains(key) ? expected_model.at(key) : none;
      if (a != b) {
        const std::string shown_a = describe(a), shown_b = describe(b);
        if (shown_a.size() + shown_b.size() > 200)  // a vocabulary or a class list
          return "a model whose " + key + " differs";
        return "a model whose " + key + " is " + shown_a + ", not " + shown_b;
      }
    }
    for (std::size_t i = 1; i < saved.size(); ++i) {
      if (saved[i] == wanted[i]) continue;
      const auto space = saved[i].find(' ');
      const std::string name = saved[i].substr(0, space);
      if (space == std::string::npos || wanted[i].rfind(name + " ", 0) != 0) break;
      if (name == "data" || name == "corpus")
        return "other data (" + saved[i] + ", not " + wanted[i] + ")";
      return "a run whose " + name + " is " + saved[i].substr(space + 1) + ", not " +
             wanted[i].substr(name.size() + 1);
    }
  }
  return "another model or data";
}

}  // namespace

void save_training_state(const std::string& path, TrainingSession& session, const LoopState& loop) {
  Checkpoint checkpoint;
  checkpoint.kind = kKind;
  const BatchSampler::State sampler = session.sampler().state();
  const nlohmann::json config{{"run", run_of_with_curriculum(session)},
                              {"identity", session.options().identity},  // to say what differs
                              {"step", loop.step},
                              {"sums", loop.sums},
                              {"logged", loop.logged},
                              {"metrics_lines", loop.metrics_lines},
                              {"seconds", loop.seconds},
                              {"sampler_rng", sampler.rng},
                              {"sampler_cursor", sampler.cursor},
                              {"sampler_drawn", sampler.drawn}};
  checkpoint.config_json = config.dump();
  const auto& parameters = session.stepper().parameters();
  for (std::size_t k = 0; k < parameters.size(); ++k)
    checkpoint.tensors.emplace_back("parameter." + std::to_string(k), parameters[k].detach());
  for (auto& named : session.stepper().optimizer().state_tensors())
    checkpoint.tensors.push_back(std::move(named));
  checkpoint.tensors.emplace_back("sampler.order", indices_tensor(sampler.order));
  checkpoint.tensors.emplace_back("torch.cpu_generator", nn::cpu_rng_state());
  save_checkpoint(path, checkpoint);
}

LoopState load_training_state(const std::string& path, TrainingSession& session) {
  if (!std::filesystem::exists(path))
    throw std::runtime_error("no training state at '" + path + "' to resume from");
  const Checkpoint checkpoint = load_checkpoint(path, kKind);
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(checkpoint.config_json);
  } catch (const nlohmann::json::exception&) {
    throw FormatError("'" + path + "' has a malformed training-state header");
  }
  std::map<std::string, at::Tensor> tensors(checkpoint.tensors.begin(), checkpoint.tensors.end());
  const nlohmann::json expected = run_of_with_curriculum(session);
  LoopState loop;
  BatchSampler::State sampler;
  try {
    const nlohmann::json& saved_run = config.at("run");
    if (!saved_run.is_object())
      throw FormatError("'" + path + "' has an incomplete training-state header");
    // Every key of either run: a curriculum's keys are only in a run with one.
    nlohmann::json keys = expected;
    for (const auto& [key, value] : saved_run.items())
      if (optional_key(key)) keys[key] = value;
    for (const auto& [key, unused] : keys.items()) {
      const nlohmann::json none = absent(key);
      const auto& saved = optional_key(key) ? (saved_run.contains(key) ? saved_run.at(key) : none)
                                            : saved_run.at(key);
      const auto& value = expected.contains(key) ? expected.at(key) : none;
      if (saved != value) {
        const std::string what =
            key == "identity_fnv1a"
                ? "a run of " + identity_difference(config.contains("identity")
                                                        ? config.at("identity")
                                                        : nlohmann::json(),
                                                    session.options().identity)
                : "a run whose " + key + " is " + describe(saved) + ", not " + describe(value);
        throw FormatError("'" + path + "' is the training state of " + what +
                          ": resume with the options it was written with");
      }
    }
    loop.step = config.at("step").get<long>();
    loop.sums = config.at("sums").get<std::map<std::string, double>>();
    loop.logged = config.at("logged").get<int>();
    loop.metrics_lines = config.at("metrics_lines").get<long>();
    loop.seconds = config.at("seconds").get<double>();
    sampler.rng = config.at("sampler_rng").get<std::string>();
    sampler.cursor = config.at("sampler_cursor").get<std::size_t>();
    // One batch per step; states from before the count was saved have none.
    sampler.drawn = config.value("sampler_drawn", static_cast<std::size_t>(loop.step));
  } catch (const nlohmann::json::exception&) {
    throw FormatError("'" + path + "' has an incomplete training-state header");
  }
  if (loop.step >= 0 && sampler.drawn != static_cast<std::size_t>(loop.step))
    throw FormatError("'" + path + "' has a sampler position that is not its step's");
  if (loop.step < 0 || loop.logged < 0 || loop.metrics_lines < 0)
    throw FormatError("'" + path + "' has a negative step or count");
  const auto& parameters = session.stepper().parameters();
  for (std::size_t k = 0; k < parameters.size(); ++k) {
    const std::string i = std::to_string(k);
    const at::Tensor& p = tensor_named(tensors, "parameter." + i, path);
    if (p.sizes() != parameters[k].sizes() || p.scalar_type() != parameters[k].scalar_type())
      throw FormatError("'" + path + "': parameter " + i + " has another shape or type");
  }
  if (tensors.count("parameter." + std::to_string(parameters.size())) != 0)
    throw FormatError("'" + path + "' holds more parameters than the model's " +
                      std::to_string(parameters.size()));
  const at::Tensor order = tensor_named(tensors, "sampler.order", path).contiguous();
  if (order.scalar_type() != at::kLong) throw FormatError("'" + path + "': malformed data order");
  for (std::int64_t i = 0; i < order.numel(); ++i) {
    const std::int64_t v = order.data_ptr<std::int64_t>()[i];
    if (v < 0) throw FormatError("'" + path + "': malformed data order");
    sampler.order.push_back(static_cast<std::size_t>(v));
  }
  const at::Tensor& generator = tensor_named(tensors, "torch.cpu_generator", path);
  // Everything checked that can be before anything changes: the sampler's state on a copy, the
  // generator's by torch as it is set (global, not the session's), the optimizer's by the
  // optimizer before it changes.
  BatchSampler probe = session.sampler();
  try {
    probe.restore(sampler);
  } catch (const std::invalid_argument& e) {
    throw FormatError("'" + path + "' does not fit this run: " + e.what());
  }
  const at::Tensor generator_before = nn::cpu_rng_state();
  try {
    nn::set_cpu_rng_state(generator);
  } catch (const std::exception&) {
    throw FormatError("'" + path + "' has a malformed generator state");
  }
  try {
    session.stepper().optimizer().load_state_tensors(tensors);
  } catch (const MissingState& e) {
    nn::set_cpu_rng_state(generator_before);
    throw FormatError("'" + path + "' is not a complete training state: " + e.what());
  } catch (const std::exception& e) {  // another shape, or a tensor torch cannot read
    nn::set_cpu_rng_state(generator_before);
    throw FormatError("'" + path + "' does not fit this run: " + e.what());
  }
  session.sampler().restore(sampler);  // checked on the copy: cannot fail
  {
    at::NoGradGuard no_grad;
    for (std::size_t k = 0; k < parameters.size(); ++k)
      parameters[k].detach().copy_(tensors.at("parameter." + std::to_string(k)));
  }
  return loop;
}

std::string file_identity(const std::string& path) {
  refuse_folder(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ostringstream out;
  out << bytes.size() << ":" << std::hex << fnv1a(bytes.data(), bytes.size());
  return out.str();
}

}  // namespace engram::trainer
