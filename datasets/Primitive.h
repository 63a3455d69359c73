#pragma once
/// \file
/// Primitive functions that high-order programs (MAP, FILTER, FOLD, ZIPWITH, SCAN) are applied
/// with, and the symbolic (exact) implementations of the library. Learned implementations, one
/// small network per primitive, live in `primitives/` and implement the same interface, so an
/// environment never knows which kind it calls.
///
/// \code
///   using namespace engram::datasets;
///   PrimitiveRef ref = parse_primitive("gt(5)");          // family "gt", parameter 5
///   auto p = make_symbolic_primitive(ref, /*k=*/10);      // checks the parameter against K
///   int yes = p->apply(7);                                 // 1: 7 > 5
///   auto add = make_symbolic_primitive(parse_primitive("add"), 10);
///   int s = add->apply(7, 8);                              // 5: (7 + 8) mod 10
/// \endcode
///
/// Values lie in the domain 0..K-1. Unary maps and binary combiners return values of the domain
/// (arithmetic is modulo K); predicates return 0 (false) or 1 (true). A family with a parameter
/// (`gt(c)`, `div(c)`) is one primitive per parameter value; its network takes the parameter as an
/// input, so one network serves the family.

#include "datasets/Task.h"

#include <memory>
#include <string>
#include <vector>

namespace engram::datasets {

/// How many values a primitive takes and what it returns; this is all a program may rely on.
enum class PrimitiveKind {
  kUnary,      ///< value -> value (MAP)
  kPredicate,  ///< value -> 0 or 1 (FILTER)
  kBinary,     ///< value, value -> value (FOLD, ZIPWITH, SCAN)
  kFullAdder   ///< x, y, carry in {0, 1} -> x + y + carry in 0..2K-1: the sum digit (mod K) and the
               ///< carry out (>= K), as one result (addition-primitive's column step)
};

/// "unary", "predicate", "binary", "full-adder".
std::string kind_name(PrimitiveKind kind);
/// Number of values a primitive of this kind takes (1, 2, or 3 for the full adder).
int kind_arity(PrimitiveKind kind);
/// Number of distinct results: K, 2 for predicates, 2K for the full adder.
int kind_results(PrimitiveKind kind, int k);

/// One family of the catalog: a name, its kind, whether it takes a parameter, and whether it is
/// part of the library that `engram train primitives` trains by default.
struct PrimitiveFamily {
  std::string name;
  PrimitiveKind kind;
  bool has_parameter = false;
  int min_parameter = 0;   ///< smallest parameter value (div: 1)
  bool in_library = true;  ///< false: held out, trained only when asked for (`--add`)
  std::string help;        ///< one line, e.g. "x > c"
};

/// Every family Engram knows, library first, in a stable order: succ, double, square, negate;
/// even, prime, gt(c); add, mul, max, min; fulladd (addition-primitive's digit step); then the
/// held-out families (div(c)). Table families (below) are not in it.
const std::vector<PrimitiveFamily>& primitive_families();
/// The family called `name` (of the catalog, or a registered table family), or nullptr.
const PrimitiveFamily* find_family(const std::string& name);

/// A family defined by its values on one domain: a primitive recovered from a user's code
/// (`engram synth`), whose exact function is that code's table. Unary and predicate tables
/// hold K values (predicates 0 or 1), binary ones K*K (row x, column y).
struct TableFamily {
  std::string name;
  PrimitiveKind kind = PrimitiveKind::kUnary;
  int k = 0;
  std::vector<int> table;
  std::string help;  ///< where it comes from, e.g. "f.py line 7"
};
/// Makes `family` known to this process (parse_primitive, find_family, symbolic_apply and
/// make_symbolic_primitive); registering the same name again replaces its table. Throws
/// InputError for a catalog name, a name that is not an identifier, the full adder's kind, K
/// outside kMinDomain..kMaxDomain, or a table of the wrong size or with values outside the
/// domain.
void register_table_family(const TableFamily& family);
/// The registered table family `name`, or nullptr.
const TableFamily* find_table_family(const std::string& name);

/// A primitive as a user writes it: `double`, `gt(5)`.
struct PrimitiveRef {
  std::string family;
  int parameter = -1;  ///< -1: none
  /// The canonical spelling, e.g. "gt(5)".
  std::string text() const;
};

/// A primitive that cannot be parsed; `index` (0-based) is where in the text the problem is, so
/// callers that parse primitives inside longer text can report their own column.
class PrimitiveParseError : public InputError {
 public:
  PrimitiveParseError(const std::string& text, std::size_t index, std::string problem);
  std::size_t index() const { return index_; }
  const std::string& problem() const { return problem_; }

 private:
  std::size_t index_;
  std::string problem_;
};

/// Parses and checks against the catalog. Throws PrimitiveParseError naming the column (1-based)
/// of the problem for malformed text, an unknown family, or a missing or superfluous parameter.
PrimitiveRef parse_primitive(const std::string& text);

/// The exact value of the primitive; x, y, z and the parameter must already be in the domain.
int symbolic_apply(const PrimitiveRef& ref, int k, int x, int y = 0, int z = 0);

/// A primitive bound to a domain, callable by environments.
class Primitive {
 public:
  virtual ~Primitive() = default;
  const PrimitiveRef& ref() const { return ref_; }
  PrimitiveKind kind() const { return kind_; }
  /// K: arguments and results (of maps and combiners) lie in 0..K-1.
  int domain() const { return k_; }
  /// The result for x (and y, binary and full adder; and the carry z in {0, 1}, full adder).
  /// Arguments must lie in the domain.
  virtual int apply(int x, int y = 0, int z = 0) const = 0;
  /// "symbolic" or "neural".
  virtual std::string implementation() const = 0;

 protected:
  Primitive(PrimitiveRef ref, PrimitiveKind kind, int k);

 private:
  PrimitiveRef ref_;
  PrimitiveKind kind_;
  int k_;
};

/// Throws InputError if `ref`'s parameter is outside the domain of its family for this K.
void check_parameter(const PrimitiveRef& ref, int k);

/// The exact implementation; throws InputError for a parameter outside the domain or K < 2.
std::shared_ptr<const Primitive> make_symbolic_primitive(const PrimitiveRef& ref, int k);

/// Smallest and largest domain size K a primitive may have.
constexpr int kMinDomain = 2;
constexpr int kMaxDomain = 1000;

}  // namespace engram::datasets
