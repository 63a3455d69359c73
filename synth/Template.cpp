#include "synth/Template.h"

#include "common/Errors.h"

#include <map>

namespace engram::synth {
namespace {

using I = std::int64_t;
using Maybe = std::optional<I>;

// The builtins write their result through a pointer; it is read after they ran.
Maybe add(I a, I b) {
  I r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
Maybe sub(I a, I b) {
  I r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
Maybe mul(I a, I b) {
  I r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Python's // and % (the quotient rounds towards minus infinity; the remainder takes the
// divisor's sign).
I floor_div(I a, I b) {
  I q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
I floor_mod(I a, I b) {
  I r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

Maybe power(I base, I exponent, std::optional<I> modulus) {
  if (exponent < 0) return std::nullopt;  // Python gives a float (or, with a modulus, an inverse)
  if (modulus) {
    if (*modulus == 0) return std::nullopt;
    I result = floor_mod(1, *modulus), b = floor_mod(base, *modulus);
    for (I e = exponent; e > 0; e >>= 1) {
      if (e & 1) {
        I next = 0;
        if (__builtin_mul_overflow(result, b, &next)) return std::nullopt;
        result = floor_mod(next, *modulus);
      }
      I sq = 0;
      if (__builtin_mul_overflow(b, b, &sq)) return std::nullopt;
      b = floor_mod(sq, *modulus);
    }
    return result;
  }
  I result = 1;
  for (I e = 0; e < exponent; ++e) {
    if (__builtin_mul_overflow(result, base, &result)) return std::nullopt;
    if (result == 0 || result == 1) break;
  }
  return result;
}

}  // namespace

Expr Expr::parameter(int index) {
  Expr e;
  e.kind = Kind::kParam;
  e.param = index;
  return e;
}

Expr Expr::constant(std::int64_t value) {
  Expr e;
  e.kind = Kind::kConst;
  e.value = value;
  return e;
}

Expr Expr::operation(std::string op, std::vector<Expr> args) {
  Expr e;
  e.kind = Kind::kOp;
  e.op = std::move(op);
  e.args = std::move(args);
  return e;
}

std::string Expr::text() const {
  switch (kind) {
    case Kind::kParam:
      return "x" + std::to_string(param);
    case Kind::kConst:
      return std::to_string(value);
    case Kind::kOp: {
      std::string s = op + "(";
      for (std::size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].text();
      return s + ")";
    }
  }
  return "?";
}

bool Expr::uses(int param_index) const {
  if (kind == Kind::kParam) return param == param_index;
  for (const auto& a : args)
    if (a.uses(param_index)) return true;
  return false;
}

std::optional<std::int64_t> Expr::evaluate(const std::vector<std::int64_t>& params) const {
  if (kind == Kind::kParam) {
    if (param < 0 || static_cast<std::size_t>(param) >= params.size()) return std::nullopt;
    return params[static_cast<std::size_t>(param)];
  }
  if (kind == Kind::kConst) return value;
  std::vector<I> v;
  for (const auto& a : args) {
    auto x = a.evaluate(params);
    if (!x) return std::nullopt;
    v.push_back(*x);
  }
  if (v.size() == 1) {
    if (op == "neg") return sub(0, v[0]);
    if (op == "abs") return v[0] < 0 ? sub(0, v[0]) : Maybe(v[0]);
    if (op == "invert") return ~v[0];
    return std::nullopt;
  }
  if (v.size() == 3 && op == "powmod") return power(v[0], v[1], v[2]);
  if (v.size() != 2) return std::nullopt;
  const I a = v[0], b = v[1];
  if (op == "add") return add(a, b);
  if (op == "sub") return sub(a, b);
  if (op == "mul") return mul(a, b);
  if (op == "floordiv") return b == 0 || (a == INT64_MIN && b == -1) ? Maybe() : floor_div(a, b);
  if (op == "mod") return b == 0 ? Maybe() : (b == -1 ? 0 : floor_mod(a, b));
  if (op == "pow") return power(a, b, std::nullopt);
  if (op == "bitand") return a & b;
  if (op == "bitor") return a | b;
  if (op == "bitxor") return a ^ b;
  if (op == "lshift") {
    if (b < 0 || b >= 63) return std::nullopt;
    if (a != 0 && (a > (INT64_MAX >> b) || a < (INT64_MIN >> b))) return std::nullopt;
    return a * (I{1} << b);
  }
  if (op == "rshift") return b < 0 ? Maybe() : (b >= 63 ? (a < 0 ? -1 : 0) : a >> b);
  if (op == "lt") return a < b ? 1 : 0;
  if (op == "le") return a <= b ? 1 : 0;
  if (op == "gt") return a > b ? 1 : 0;
  if (op == "ge") return a >= b ? 1 : 0;
  if (op == "eq") return a == b ? 1 : 0;
  if (op == "ne") return a != b ? 1 : 0;
  return std::nullopt;
}

std::string Path::key() const {
  std::string k;
  for (const auto& g : guards) k += "[" + g.cond.text() + (g.outcome ? "]=1 " : "]=0 ");
  return k;
}

void Template::add(const Path& path) {
  const std::string key = path.key();
  for (auto& p : paths_) {
    if (p.key() != key) continue;
    if (p.included != path.included || p.value.text() != path.value.text()) {
      throw InputError("the computation at " + where_ +
                       " gives different results for elements "
                       "that branch alike (" +
                       (key.empty() ? "no branch" : key) +
                       "): it depends on more than its element");
    }
    p.seen += path.seen;
    return;
  }
  paths_.push_back(path);
}

void Template::merge(const Template& other) {
  for (const auto& p : other.paths_) add(p);
}

Template::Result Template::apply(const std::vector<std::int64_t>& args) const {
  for (const auto& p : paths_) {
    bool holds = true;
    for (const auto& g : p.guards) {
      auto v = g.cond.evaluate(args);
      if (!v || (*v != 0) != g.outcome) {
        holds = false;
        break;
      }
    }
    if (!holds) continue;
    Result r;
    r.included = p.included;
    if (p.included) {
      auto v = p.value.evaluate(args);
      if (!v) continue;
      r.value = *v;
    }
    r.covered = true;
    return r;
  }
  return {};
}

bool Template::always_included() const {
  for (const auto& p : paths_)
    if (!p.included) return false;
  return true;
}

bool Template::identity(int index) const {
  for (const auto& p : paths_)
    if (p.included && !p.value.is_param(index)) return false;
  return true;
}

std::string Template::text() const {
  std::string s;
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    const auto& p = paths_[i];
    s += (i ? " | " : "") + p.key() + (p.included ? p.value.text() : std::string("drop"));
  }
  return s;
}

}  // namespace engram::synth
