#pragma once
/// \file
/// Element computations recovered from a trace (synth/Recognizer.h), as the operations the user's
/// code performed: an expression over the computation's parameters (the element x; the
/// accumulator a and the element x of a FOLD or SCAN; x and y of a ZIPWITH) with Python's integer
/// semantics, and, where the code branched on a value, one path per observed sequence of branch
/// outcomes. Replaying the paths on any value of the domain gives the computation's table there.
///
/// \code
///   // x if x > 3 else 0, seen with x = 5 and x = 1:
///   Template t(1, "line 4");
///   const Expr test = Expr::operation("gt", {Expr::parameter(0), Expr::constant(3)});
///   t.add({{{test, true}}, true, Expr::parameter(0)});
///   t.add({{{test, false}}, true, Expr::constant(0)});
///   t.apply({7}).value;   // 7
/// \endcode

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace engram::synth {

/// An integer expression over parameters; operations are the ones the tracer records (add, sub,
/// mul, floordiv, mod, pow, powmod, neg, abs, invert, bitand, bitor, bitxor, lshift, rshift, lt,
/// le, gt, ge, eq, ne), evaluated as Python evaluates them on ints.
struct Expr {
  enum class Kind { kParam, kConst, kOp };
  Kind kind = Kind::kConst;
  int param = 0;
  std::int64_t value = 0;
  std::string op;
  std::vector<Expr> args;

  static Expr parameter(int index);
  static Expr constant(std::int64_t value);
  static Expr operation(std::string op, std::vector<Expr> args);

  /// Canonical text, e.g. "mod(mul(x0, x0), 10)".
  std::string text() const;
  /// The value; nullopt where Python would raise (division by zero, a negative shift) or leave
  /// the integers (a negative power), or where 64 bits overflow.
  std::optional<std::int64_t> evaluate(const std::vector<std::int64_t>& params) const;
  /// Whether any parameter occurs.
  bool uses(int param_index) const;
  bool is_param(int index) const { return kind == Kind::kParam && param == index; }
};

/// One branch the code took: the tested value (as an expression) and its truth.
struct Guard {
  Expr cond;
  bool outcome = false;
};

/// What the computation did for values that branch this way: whether the element went on
/// (filters) and its value.
struct Path {
  std::vector<Guard> guards;
  bool included = true;
  Expr value;
  long seen = 1;  ///< how many elements of the traces took it
  /// The guards' texts and outcomes: paths with the same key are the same path.
  std::string key() const;
};

class Template {
 public:
  Template() = default;
  Template(int arity, std::string where) : arity_(arity), where_(std::move(where)) {}

  int arity() const { return arity_; }
  /// Where the code is, for messages ("line 7").
  const std::string& where() const { return where_; }
  const std::vector<Path>& paths() const { return paths_; }

  /// Adds an observed path; the same guards with another result throw InputError (the code
  /// is not a function of these parameters).
  void add(const Path& path);
  /// All of `other`'s paths.
  void merge(const Template& other);

  struct Result {
    bool covered = false;  ///< some observed path's guards hold for these arguments
    bool included = false;
    std::int64_t value = 0;
  };
  /// Replays the paths on `args`: the first path whose guards all come out as observed.
  Result apply(const std::vector<std::int64_t>& args) const;

  /// Whether every path includes its element (no filtering), and whether every path's value is
  /// parameter `index` itself (no computation).
  bool always_included() const;
  bool identity(int index) const;
  /// Canonical text of all paths, e.g. "mod(mul(x0, x0), 10)" or "[gt(x0, 3)=1] x0 | ...".
  std::string text() const;

 private:
  int arity_ = 1;
  std::string where_;
  std::vector<Path> paths_;
};

}  // namespace engram::synth
