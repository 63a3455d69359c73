#include "datasets/AdditionTask.h"

#include "datasets/Teacher.h"

#include <algorithm>
#include <cctype>

namespace engram::datasets {
namespace {

struct Operands {
  std::string a, b;
};

std::string trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Operands parse(const std::string& raw) {
  const std::string input = trim(raw);
  const auto plus = input.find('+');
  if (plus == std::string::npos || input.find('+', plus + 1) != std::string::npos) {
    throw InputError("malformed addition input '" + raw + "': expected A+B, e.g. \"25+17\"");
  }
  Operands ops{trim(input.substr(0, plus)), trim(input.substr(plus + 1))};
  if (!all_digits(ops.a) || !all_digits(ops.b)) {
    throw InputError("malformed addition input '" + raw +
                     "': both operands must be non-negative decimal numbers, e.g. \"25+17\"");
  }
  return ops;
}

std::string strip_leading_zeros(const std::string& s) {
  const auto first = s.find_first_not_of('0');
  return first == std::string::npos ? (s.empty() ? s : "0") : s.substr(first);
}

class Scratchpad final : public Environment {
 public:
  /// `digit`: the full adder of addition-primitive; null for addition.
  Scratchpad(const Operands& ops, std::shared_ptr<const Primitive> digit)
      : digit_(std::move(digit)) {
    const size_t digits = std::max(ops.a.size(), ops.b.size());
    width_ = static_cast<int>(digits) + 2;  // one column for the last carry, one blank sentinel
    for (auto& row : grid_) row.assign(width_, AdditionTask::kBlank);
    auto place = [&](int row, const std::string& number) {
      for (size_t i = 0; i < number.size(); ++i) {
        grid_[row][width_ - number.size() + i] = number[i] - '0';
      }
    };
    place(AdditionTask::kIn1, ops.a);
    place(AdditionTask::kIn2, ops.b);
    pointers_.fill(width_ - 1);
    length_ = static_cast<int>(digits);
  }

  std::vector<int> observe() const override {
    std::vector<int> obs(digit_ ? 5 : 4);
    for (int r = 0; r < 4; ++r) obs[r] = grid_[r][pointers_[r]];
    if (digit_) obs[4] = register_state_;
    return obs;
  }

  void act(int program, const Args& args) override {
    if (digit_ && program == AdditionTask::kFullAdd) {
      auto value = [&](int row) {
        const int v = grid_[row][pointers_[row]];
        return v == AdditionTask::kBlank ? 0 : v;
      };
      const int carry = value(AdditionTask::kCarryRow);
      if (carry > 1) throw ActError("FULLADD with a carry digit above 1");
      const int sum = digit_->apply(value(AdditionTask::kIn1), value(AdditionTask::kIn2), carry);
      if (sum < 0 || sum >= 20) throw ActError("FULLADD result out of range");
      register_digit_ = sum % 10;
      register_state_ = sum >= 10 ? 2 : 1;
      return;
    }
    const int row = args[0];
    if (row < 0 || row > 3) throw ActError("row argument " + std::to_string(row) + " out of range");
    if (program == AdditionTask::kWrite) {
      if (digit_ && args[1] == AdditionTask::kRegister) {
        if (register_state_ == 0) throw ActError("WRITE from the empty register");
        grid_[row][pointers_[row]] = register_digit_;
        return;
      }
      if (args[1] < 0 || args[1] > 9) {
        throw ActError("WRITE value " + std::to_string(args[1]) + " is not a digit");
      }
      grid_[row][pointers_[row]] = args[1];
    } else if (program == AdditionTask::kMove) {
      const int target = pointers_[row] + (args[1] == 0 ? -1 : 1);
      if (target < 0 || target >= width_) throw ActError("MOVE takes a pointer off the scratchpad");
      pointers_[row] = target;
    } else {
      throw ActError("program " + std::to_string(program) + " is not an ACT of addition");
    }
  }

  std::string result() const override {
    std::string out;
    for (int v : grid_[AdditionTask::kOut]) {
      if (v != AdditionTask::kBlank) out += static_cast<char>('0' + v);
    }
    return strip_leading_zeros(out);
  }

  int length() const override { return length_; }

 private:
  int width_ = 0;
  int length_ = 0;
  std::array<std::vector<int>, 4> grid_;
  std::array<int, 4> pointers_{};
  std::shared_ptr<const Primitive> digit_;
  int register_digit_ = 0;
  int register_state_ = 0;  ///< 0 empty, 1 no carry, 2 carry
};

}  // namespace

AdditionTask::AdditionTask()
    : programs_{{"ADD", false},    {"ADD1", false}, {"CARRY", false},
                {"LSHIFT", false}, {"WRITE", true}, {"MOVE", true}} {}

AdditionTask::AdditionTask(std::shared_ptr<const Primitive> digit,
                           std::shared_ptr<const Primitive> reference)
    : AdditionTask() {
  if (!digit) digit = make_symbolic_primitive(parse_primitive("fulladd"), 10);
  if (digit->kind() != PrimitiveKind::kFullAdder) {
    throw UsageError(
        "arity mismatch: addition-primitive applies a full-adder primitive (fulladd), "
        "but '" +
        digit->ref().text() + "' is " + kind_name(digit->kind()));
  }
  if (digit->domain() != 10) {
    throw UsageError("addition-primitive adds decimal numbers: its primitive needs K = 10, not " +
                     std::to_string(digit->domain()));
  }
  reference_ = reference ? std::move(reference) : make_symbolic_primitive(digit->ref(), 10);
  if (reference_->kind() != PrimitiveKind::kFullAdder || reference_->domain() != 10)
    throw std::invalid_argument("the reference primitive does not match the bound one");
  digit_ = std::move(digit);
  programs_.push_back({"FULLADD", true});
}

std::vector<int> AdditionTask::observation_sizes() const {
  if (digit_) return {11, 11, 11, 11, 3};
  return {11, 11, 11, 11};
}

std::unique_ptr<Environment> AdditionTask::make_environment(const std::string& input) const {
  return std::make_unique<Scratchpad>(parse(input), digit_);
}

std::string AdditionTask::random_input(int length, std::mt19937_64& rng) const {
  check_teach_length(length, "length");
  if (length < 1) throw InputError("addition length must be at least 1");
  std::uniform_int_distribution<int> digit(0, 9), lead(1, 9);
  auto number = [&]() {
    std::string s;
    for (int i = 0; i < length; ++i) {
      s += static_cast<char>('0' + (i == 0 && length > 1 ? lead(rng) : digit(rng)));
    }
    return s;
  };
  const std::string a = number();
  return a + "+" + number();
}

std::string AdditionTask::solve(const std::string& input) const {
  const Operands ops = parse(input);
  std::string sum;
  int carry = 0;
  for (size_t i = 0; i < std::max(ops.a.size(), ops.b.size()) || carry; ++i) {
    int s = carry;
    if (i < ops.a.size()) s += ops.a[ops.a.size() - 1 - i] - '0';
    if (i < ops.b.size()) s += ops.b[ops.b.size() - 1 - i] - '0';
    sum += static_cast<char>('0' + s % 10);
    carry = s / 10;
  }
  std::reverse(sum.begin(), sum.end());
  return strip_leading_zeros(sum);
}

Limits AdditionTask::default_limits(int length) const {
  // A correct run takes at most 16 steps per column (ADD 4, ADD1 3, CARRY 4, LSHIFT 5) and nests
  // one ADD per column; twice that leaves room without letting a runaway program spin for long.
  const long columns = static_cast<long>(length) + 2;
  return {32 * columns + 64, static_cast<int>(2 * columns + 16)};
}

Trace AdditionTask::teach(const std::string& input) const {
  auto env = std::make_unique<Scratchpad>(parse(input), reference_);
  check_teach_length(env->length(), "problem length");
  Trace trace;
  trace.input = input;
  TraceRecorder rec(programs_, *env, trace);
  rec.set_body([&](int program, const Args&) {
    const std::vector<int> obs = env->observe();
    auto value = [&](int row) { return obs[row] == kBlank ? 0 : obs[row]; };
    switch (program) {
      case kAdd:
        if (obs[kIn1] == kBlank && obs[kIn2] == kBlank && obs[kCarryRow] == kBlank) break;
        rec.call(kAdd1);
        rec.call(kLshift);
        rec.tail_call(kAdd);
        break;
      case kAdd1: {
        if (digit_) {
          rec.call(kFullAdd);
          rec.call(kWrite, {kOut, kRegister, 0});
          if (env->observe()[4] == 2) rec.call(kCarry);
          break;
        }
        const int sum = value(kIn1) + value(kIn2) + value(kCarryRow);
        rec.call(kWrite, {kOut, sum % 10, 0});
        if (sum >= 10) rec.call(kCarry);
        break;
      }
      case kCarry:
        rec.call(kMove, {kCarryRow, 0, 0});
        rec.call(kWrite, {kCarryRow, 1, 0});
        rec.call(kMove, {kCarryRow, 1, 0});
        break;
      case kLshift:
        for (int row : {kIn1, kIn2, kCarryRow, kOut}) rec.call(kMove, {row, 0, 0});
        break;
      default:
        throw std::logic_error("addition teacher has no body for program " +
                               std::to_string(program));
    }
    rec.ret();
  });
  rec.run_root(kAdd);
  trace.output = env->result();
  return trace;
}

std::string AdditionTask::format_args(int program, const Args& args) const {
  static const char* rows[] = {"IN1", "IN2", "CARRY", "OUT"};
  const std::string row = args[0] >= 0 && args[0] < 4 ? rows[args[0]] : std::to_string(args[0]);
  if (program == kWrite) {
    return row + ", " + (digit_ && args[1] == kRegister ? "REG" : std::to_string(args[1]));
  }
  if (program == kMove) return row + ", " + (args[1] == 0 ? "LEFT" : "RIGHT");
  return "";
}

}  // namespace engram::datasets
