#include "trainer/MemoryTechnique.h"

#include "memory/CompressingStore.h"
#include "trainer/TrainingOptions.h"

#include <algorithm>
#include <stdexcept>

namespace engram::trainer {
namespace {

std::deque<MemoryTechniqueInfo> built_in() {
  std::deque<MemoryTechniqueInfo> list;
  list.push_back({"relu", "ReLU outputs kept as bitmap plus nonzero values for backward",
                  TechniqueKind::store, /*lossless=*/true, /*in_all=*/true,
                  [](const MemoryOptions&) -> std::unique_ptr<memory::ActivationStore> {
                    return std::make_unique<memory::CompressingStore>(
                        memory::CompressingStoreOptions{/*cache_decompressed=*/true});
                  }});
  list.push_back({"recompute",
                  "the model's units rerun in backward from their input (under a budget, the "
                  "units the planner chooses)",
                  TechniqueKind::units,
                  true,
                  true,
                  {}});
  list.push_back({"swap",
                  "the units' saved tensors moved to a spill file (on a GPU: pinned host memory) "
                  "and read back before their backward",
                  TechniqueKind::units,
                  true,
                  true,
                  {}});
  list.push_back({"reuse",
                  "the step's allocations from one planned arena",
                  TechniqueKind::reuse,
                  true,
                  false,
                  {}});
  list.push_back({"algo",
                  "layers on lower-workspace algorithms (the convolutions; results within "
                  "float rounding)",
                  TechniqueKind::algorithms,
                  false,
                  false,
                  {}});
  return list;
}

std::deque<MemoryTechniqueInfo>& registry() {
  static std::deque<MemoryTechniqueInfo> list = built_in();
  return list;
}

}  // namespace

void register_memory_technique(MemoryTechniqueInfo info) {
  const std::string& n = info.name;
  if (n.empty() || !std::all_of(n.begin(), n.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
      })) {
    throw std::invalid_argument("memory technique name '" + n +
                                "': lower-case letters, digits, '_' and '-' only");
  }
  if (n == "none" || n == "all" || find_memory_technique(n) != nullptr)
    throw std::invalid_argument("memory technique '" + n + "' is registered already");
  if ((info.kind == TechniqueKind::store) != static_cast<bool>(info.make_store)) {
    throw std::invalid_argument("memory technique '" + n +
                                "': a store technique needs make_store, and only it has one");
  }
  registry().push_back(std::move(info));
}

MemoryTechniqueRegistration::MemoryTechniqueRegistration(MemoryTechniqueInfo info) {
  register_memory_technique(std::move(info));
}

const std::deque<MemoryTechniqueInfo>& memory_techniques() { return registry(); }

const MemoryTechniqueInfo* find_memory_technique(const std::string& name) {
  for (const auto& t : registry()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> memory_technique_names() {
  std::vector<std::string> names{"none"};
  for (const auto& t : registry()) names.push_back(t.name);
  // "all" after the last technique it names.
  std::size_t after = 1;
  for (std::size_t i = 0; i < registry().size(); ++i) {
    if (registry()[i].in_all) after = i + 2;
  }
  names.insert(names.begin() + static_cast<std::ptrdiff_t>(after), "all");
  return names;
}

std::string memory_techniques_help() {
  std::string all;
  for (const auto& t : registry()) {
    if (t.in_all) all += (all.empty() ? "" : ", ") + t.name;
  }
  std::string help = "none (the default)";
  for (const auto& t : registry()) {
    help += "; " + t.name + " (" + (t.lossless ? "" : "lossy: ") + t.summary + ")";
  }
  return help + "; all (" + all + ")";
}

TechniqueChoice::TechniqueChoice(const std::vector<std::string>& names) {
  const auto add = [this](const MemoryTechniqueInfo* t) {
    if (std::find(chosen_.begin(), chosen_.end(), t) == chosen_.end()) chosen_.push_back(t);
  };
  for (const auto& n : names) {
    if (n == "all") {
      for (const auto& t : registry()) {
        if (t.in_all) add(&t);
      }
    } else if (const MemoryTechniqueInfo* t = find_memory_technique(n)) {
      add(t);
    }
  }
}

bool TechniqueChoice::has(const std::string& name) const {
  return std::any_of(chosen_.begin(), chosen_.end(),
                     [&](const MemoryTechniqueInfo* t) { return t->name == name; });
}

bool TechniqueChoice::has(TechniqueKind kind) const {
  return std::any_of(chosen_.begin(), chosen_.end(),
                     [&](const MemoryTechniqueInfo* t) { return t->kind == kind; });
}

bool TechniqueChoice::lossless() const {
  return std::all_of(chosen_.begin(), chosen_.end(),
                     [](const MemoryTechniqueInfo* t) { return t->lossless; });
}

const MemoryTechniqueInfo* TechniqueChoice::store() const {
  for (const MemoryTechniqueInfo* t : chosen_) {
    if (t->kind == TechniqueKind::store) return t;
  }
  return nullptr;
}

std::string TechniqueChoice::name() const {
  std::string s;
  for (const auto& t : registry()) {
    if (has(t.name)) s += (s.empty() ? "" : "+") + t.name;
  }
  return s.empty() ? "none" : s;
}

}  // namespace engram::trainer
