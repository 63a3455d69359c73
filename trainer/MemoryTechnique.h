#pragma once
/// \file
/// The one list of memory techniques (docs/ARCHITECTURE.md, "Where each memory technique hooks
/// in"): every technique a run may name, built in or brought by a user, is registered here by
/// name with what kind of technique it is, whether it is lossless, and (for a technique that is
/// an activation store) how to make its store. The command line's flags and help, option
/// validation, the training session (trainer/MemoryTechniques.h), its planner and
/// `engram bench memory` all read this list; none of them names a technique itself.
///
/// A technique of your own that keeps activations differently is one file that defines an
/// memory::ActivationStore and registers it (examples/techniques/Fp16Store.cpp):
///
/// \code
///   const engram::trainer::MemoryTechniqueRegistration kFp16({
///       "fp16", "activations kept in half precision (lossy)",
///       engram::trainer::TechniqueKind::store, /*lossless=*/false, /*in_all=*/false,
///       [](const engram::trainer::MemoryOptions&) { return std::make_unique<Fp16Store>(); }});
/// \endcode
///
/// and one line that links that file into `engram` (the top-level CMakeLists.txt,
/// ENGRAM_TECHNIQUE_SOURCES); `engram train ... --memory fp16` and
/// `engram bench memory --techniques none,fp16` then run it, the bench reporting its gradient
/// error against none. Torch-free.

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace engram::memory {
class ActivationStore;
}  // namespace engram::memory

namespace engram::trainer {

struct MemoryOptions;

/// Where a technique acts on a training step; the session applies each kind in its own place.
enum class TechniqueKind {
  store,       ///< the layers save what backward needs through the technique's store
  units,       ///< recompute or swap of the units a model is cut into, by the unit planner
  algorithms,  ///< layers moved to lower-workspace algorithms, by the algorithm planner
  reuse,       ///< each step's allocations at planned offsets of one arena (trainer/Stepper.h)
};

/// Makes a store technique's store for one session, which owns it while the session lasts.
using StoreFactory =
    std::function<std::unique_ptr<memory::ActivationStore>(const MemoryOptions& options)>;

/// One technique as registered.
struct MemoryTechniqueInfo {
  std::string name;     ///< what --memory and --techniques name it; lower case, no '+' or ','
  std::string summary;  ///< one line for --help: what it keeps or does
  TechniqueKind kind = TechniqueKind::store;
  /// Gradients bit-identical to none's (`engram bench memory` reports every row's gradient
  /// error against none, and a lossless technique's must be 0).
  bool lossless = true;
  bool in_all = false;      ///< one of the techniques "all" names (relu, recompute, swap)
  StoreFactory make_store;  ///< kind store: required; other kinds: empty
};

/// Adds `info` to the list. Throws std::invalid_argument for an empty or malformed name, a name
/// already registered (or "none", "all"), a store technique without a factory or another kind
/// with one.
void register_memory_technique(MemoryTechniqueInfo info);

/// Registers at static initialisation, from a technique's own source file.
struct MemoryTechniqueRegistration {
  explicit MemoryTechniqueRegistration(MemoryTechniqueInfo info);
};

/// Every registered technique: the built-in ones (relu, recompute, swap, reuse, algo), then the
/// others in registration order (a deque: what find_memory_technique() returns stays valid).
const std::deque<MemoryTechniqueInfo>& memory_techniques();
/// The technique named `name`, or nullptr.
const MemoryTechniqueInfo* find_memory_technique(const std::string& name);

/// The names MemoryOptions::techniques accepts: "none", every registered technique, and "all"
/// after the last technique it names ("none, relu, recompute, swap, all, reuse, algo, ...").
std::vector<std::string> memory_technique_names();

/// The help text of a --memory or --techniques flag: every name with its summary, lossy ones
/// marked, and what "all" is.
std::string memory_techniques_help();

/// The techniques a list of names asks for ("all": those marked in_all; "none" and unknown names:
/// nothing, unknown names being validate()'s to report). The one reading of the names.
class TechniqueChoice {
 public:
  explicit TechniqueChoice(const std::vector<std::string>& names);
  bool has(const std::string& name) const;
  bool has(TechniqueKind kind) const;
  /// Recompute or swap: they act on a model cut into units and need a plan.
  bool uses_units() const { return has(TechniqueKind::units); }
  /// Units or algorithms: planned by measuring steps before training, and a budget applies.
  bool plans() const { return uses_units() || has(TechniqueKind::algorithms); }
  /// Fixed-structure memory reuse (memory/ArenaReuse.h).
  bool reuse() const { return has(TechniqueKind::reuse); }
  /// Every chosen technique is lossless (true for none).
  bool lossless() const;
  /// The chosen store technique, or nullptr (validate() allows at most one).
  const MemoryTechniqueInfo* store() const;
  /// The chosen techniques, in the list's order, each once.
  const std::vector<const MemoryTechniqueInfo*>& chosen() const { return chosen_; }
  /// "none", or the chosen names joined with '+' ("relu+recompute").
  std::string name() const;

 private:
  std::vector<const MemoryTechniqueInfo*> chosen_;
};

inline TechniqueChoice chosen_techniques(const std::vector<std::string>& names) {
  return TechniqueChoice(names);
}

}  // namespace engram::trainer
