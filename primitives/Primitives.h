#pragma once
/// \file
/// Learned primitive functions: each primitive of the catalog (datasets/Primitive.h) is a small
/// network (primitives/PrimitiveNet.h) trained on its own examples, and a primitive library file
/// holds one network per family for one domain size K. A learned primitive implements
/// datasets::Primitive, so environments call the network whenever a program applies it.
///
/// \code
///   engram::primitives::TrainPrimitivesOptions t;  t.out_path = "prims.pt";  t.k = 10;
///   engram::primitives::train_primitives(t);            // the library: 11 families
///   t.families = {"div"};  t.add = true;
///   engram::primitives::train_primitives(t);            // one more network; the others untouched
///   auto lib = engram::primitives::PrimitiveLibrary::load("prims.pt");
///   auto gt5 = lib.get(engram::datasets::parse_primitive("gt(5)"));
///   int yes = gt5->apply(7);                              // the network's answer
/// \endcode
///
/// No torch in this header (the command line includes it).

#include "datasets/Primitive.h"
#include "trainer/TrainingOptions.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace engram::primitives {

/// How one family's network scores on its whole domain.
struct FamilyReport {
  std::string family;
  std::string kind;  ///< "unary", "predicate", "binary"
  int k = 0;
  long examples = 0;  ///< inputs of the domain (parameter values included)
  long correct = 0;
  double accuracy = 0;
  bool exact = false;  ///< correct == examples
  long steps = 0;      ///< training only
  double seconds = 0;  ///< training only
};

struct TrainPrimitivesOptions {
  std::string out_path;
  int k = 10;  ///< domain size
  /// Families to train; empty: every family of the library (datasets::PrimitiveFamily::in_library).
  std::vector<std::string> families;
  /// Add the families to the existing library at out_path (same K), leaving its other networks
  /// byte-for-byte as they are; a family already there is retrained.
  bool add = false;
  int hidden = 256;
  int embedding = 32;
  /// Each family's session: steps (the most per family; training stops earlier once the network
  /// is exact on its whole domain, checked every log_every steps), batch, learning rate, seed
  /// (also each network's initial weights), threads.
  trainer::TrainingOptions training = default_training();

  static trainer::TrainingOptions default_training() {
    trainer::TrainingOptions t;
    t.steps = 20000;
    t.batch = 256;
    t.learning_rate = 3e-3;
    t.log_every = 100;
    return t;
  }
  /// Called after each family with its report (the command line prints a line).
  std::function<void(const FamilyReport&)> on_family;
};

/// Trains and writes the library atomically; throws UsageError for bad options (unknown family,
/// K out of range, --add to a library of another K), FormatError for an unusable existing file.
std::vector<FamilyReport> train_primitives(const TrainPrimitivesOptions& options);

/// Exhaustive accuracy of every network in the library, computed on `device` (cpu, cuda,
/// cuda:N; trainer/Device.h).
std::vector<FamilyReport> evaluate_primitives(const std::string& model_path, int threads = 1,
                                              const std::string& device = "cpu");

/// {"k":..,"primitives":[{family, kind, k, examples, correct, accuracy, exact, ...}], "exact":..}
std::string family_reports_json(const std::vector<FamilyReport>& reports);

/// A loaded library: its networks, ready to be bound as primitives.
class PrimitiveLibrary {
 public:
  /// Throws std::runtime_error if missing, FormatError if corrupt or not a primitive library.
  static PrimitiveLibrary load(const std::string& path);
  ~PrimitiveLibrary();
  PrimitiveLibrary(PrimitiveLibrary&&) noexcept;
  PrimitiveLibrary& operator=(PrimitiveLibrary&&) noexcept;

  int domain() const;
  std::vector<std::string> families() const;
  /// The learned primitive `ref`; throws UsageError if the library has no network for its family
  /// (naming the path and how to add one) or the parameter is outside the domain.
  std::shared_ptr<const datasets::Primitive> get(const datasets::PrimitiveRef& ref) const;

 private:
  struct State;
  explicit PrimitiveLibrary(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace engram::primitives
