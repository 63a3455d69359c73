#include "datasets/ProgramExpression.h"

#include "datasets/ListTask.h"
#include "datasets/Task.h"

#include <algorithm>
#include <cctype>

namespace engram::datasets {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Expression parse() {
    Expression e = expr();
    skip_space();
    if (i_ < text_.size())
      fail(i_, "unexpected '" + text_.substr(i_, 1) + "' after the expression");
    return e;
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw InputError("program column " + std::to_string(at + 1) + ": " + what);
  }

  void skip_space() {
    while (i_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[i_]))) ++i_;
  }

  std::string describe_here() const {
    return i_ < text_.size() ? "'" + text_.substr(i_, 1) + "'" : "the end of the program";
  }

  void expect(char c) {
    skip_space();
    if (i_ >= text_.size() || text_[i_] != c)
      fail(i_, std::string("expected '") + c + "', found " + describe_here());
    ++i_;
  }

  std::string name() {
    skip_space();
    const std::size_t start = i_;
    while (i_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[i_])) || text_[i_] == '_'))
      ++i_;
    if (i_ == start) fail(start, "expected a name, found " + describe_here());
    return text_.substr(start, i_ - start);
  }

  int integer(std::size_t* at) {
    skip_space();
    *at = i_;
    const std::size_t start = i_;
    while (i_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i_]))) ++i_;
    if (i_ == start || i_ - start > 6)
      fail(start, "expected a non-negative integer, found " + describe_here());
    return std::stoi(text_.substr(start, i_ - start));
  }

  PrimitiveRef primitive(std::size_t* at) {
    skip_space();
    *at = i_;
    const std::size_t start = i_;
    name();
    skip_space();
    std::size_t end = i_;
    if (i_ < text_.size() && text_[i_] == '(') {
      const std::size_t close = text_.find(')', i_);
      if (close == std::string::npos) fail(text_.size(), "expected ')'");
      end = close + 1;
      i_ = end;
    }
    try {
      return parse_primitive(text_.substr(start, end - start));
    } catch (const PrimitiveParseError& e) {
      fail(start + e.index(), e.problem());
    }
  }

  Expression list_argument(const std::string& stage) {
    skip_space();
    const std::size_t at = i_;
    Expression e = expr();
    if (e.is_scalar()) {
      fail(at, stage + " needs a list, but fold (column " + std::to_string(e.column) +
                   ") returns a number");
    }
    return e;
  }

  Expression expr() {
    skip_space();
    Expression e;
    const std::size_t at = i_;
    e.column = static_cast<int>(at) + 1;
    e.function = name();
    if (e.is_list()) return e;
    if (++depth_ > kMaxDepth) {
      fail(at, "more than " + std::to_string(kMaxDepth) + " nested stages");
    }
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    static const std::vector<std::string> stages{"map", "filter", "fold", "scan", "zipwith"};
    if (std::find(stages.begin(), stages.end(), e.function) == stages.end()) {
      fail(at, "unknown function '" + e.function +
                   "' (known: map, filter, fold, scan, zipwith, and the lists xs, ys)");
    }
    expect('(');
    std::size_t primitive_at = 0;
    e.primitive = primitive(&primitive_at);
    e.primitive_column = static_cast<int>(primitive_at) + 1;
    const PrimitiveKind needed = primitive_kind_of(e.function);
    const PrimitiveKind given = find_family(e.primitive.family)->kind;
    if (needed != given) {
      fail(primitive_at, "arity mismatch: " + e.function + " applies a " + kind_name(needed) +
                             " primitive, but '" + e.primitive.text() + "' is " + kind_name(given));
    }
    expect(',');
    if (e.function == "fold" || e.function == "scan") {
      std::size_t init_at = 0;
      e.init = integer(&init_at);
      e.init_column = static_cast<int>(init_at) + 1;
      expect(',');
    }
    e.inputs.push_back(list_argument(e.function));
    if (e.function == "zipwith") {
      expect(',');
      e.inputs.push_back(list_argument(e.function));
    }
    expect(')');
    return e;
  }

  static constexpr int kMaxDepth = 64;
  const std::string& text_;
  std::size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string Expression::text() const {
  if (is_list()) return function;
  std::string out = function + "(" + primitive.text() + ", ";
  if (function == "fold" || function == "scan") out += std::to_string(init) + ", ";
  for (std::size_t j = 0; j < inputs.size(); ++j) out += (j ? ", " : "") + inputs[j].text();
  return out + ")";
}

Expression parse_expression(const std::string& text) { return Parser(text).parse(); }

void check_expression_domain(const Expression& e, int k) {
  if (e.is_list()) return;
  try {
    check_parameter(e.primitive, k);
  } catch (const InputError& error) {
    throw InputError("program column " + std::to_string(e.primitive_column) + ": " + error.what());
  }
  if ((e.function == "fold" || e.function == "scan") && e.init >= k) {
    throw InputError("program column " + std::to_string(e.init_column) + ": initial value " +
                     std::to_string(e.init) + " is outside the domain 0.." + std::to_string(k - 1));
  }
  for (const auto& input : e.inputs) check_expression_domain(input, k);
}

bool uses_second_list(const Expression& e) {
  if (e.function == "ys") return true;
  return std::any_of(e.inputs.begin(), e.inputs.end(),
                     [](const Expression& input) { return uses_second_list(input); });
}

std::vector<int> evaluate_symbolic(const Expression& e, const std::vector<int>& xs,
                                   const std::vector<int>& ys, int k) {
  if (e.function == "xs") return xs;
  if (e.function == "ys") return ys;
  std::vector<std::vector<int>> lists;
  for (const auto& input : e.inputs) lists.push_back(evaluate_symbolic(input, xs, ys, k));
  Binding binding;
  binding.primitive = make_symbolic_primitive(e.primitive, k);
  binding.init = e.init;
  const auto task = bind_task(e.function, binding);
  std::string input = format_value_list(lists[0]);
  if (lists.size() == 2) input += ";" + format_value_list(lists[1]);
  return parse_value_list(task->solve(input), k);
}

}  // namespace engram::datasets
