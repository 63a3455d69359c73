#include "datasets/SortTask.h"

#include "datasets/Teacher.h"

#include <algorithm>
#include <cctype>

namespace engram::datasets {
namespace {

std::vector<int> parse(const std::string& raw) {
  std::vector<int> values;
  std::string token;
  auto flush = [&]() {
    std::string t;
    for (char c : token) {
      if (!std::isspace(static_cast<unsigned char>(c))) t += c;
    }
    if (t.size() != 1 || t[0] < '0' || t[0] > '9') {
      throw InputError("malformed sort input '" + raw +
                       "': expected comma-separated digits 0..9, e.g. \"3,1,2\"");
    }
    values.push_back(t[0] - '0');
    token.clear();
  };
  for (char c : raw) {
    if (c == ',') {
      flush();
    } else {
      token += c;
    }
  }
  flush();
  return values;
}

std::string format(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += static_cast<char>('0' + values[i]);
  }
  return out;
}

class PointerArray final : public Environment {
 public:
  explicit PointerArray(std::vector<int> values) : values_(std::move(values)) {}

  std::vector<int> observe() const override {
    return {value(pointers_[0]), value(pointers_[1]), value(pointers_[2])};
  }

  void act(int program, const Args& args) override {
    const int p = args[0];
    if (p < 0 || p > 2) throw ActError("pointer argument " + std::to_string(p) + " out of range");
    const int n = static_cast<int>(values_.size());
    if (program == SortTask::kPtr) {
      const int target = pointers_[p] + (args[1] == 0 ? -1 : 1);
      if (target < -1 || target > n) throw ActError("PTR moves a pointer too far off the array");
      pointers_[p] = target;
    } else if (program == SortTask::kSwap) {
      const int q = args[1];
      if (q < 0 || q > 2) throw ActError("pointer argument " + std::to_string(q) + " out of range");
      const int i = pointers_[p], j = pointers_[q];
      if (i < 0 || i >= n || j < 0 || j >= n) throw ActError("SWAP with a pointer off the array");
      std::swap(values_[i], values_[j]);
    } else {
      throw ActError("program " + std::to_string(program) + " is not an ACT of sort");
    }
  }

  std::string result() const override { return format(values_); }
  int length() const override { return static_cast<int>(values_.size()); }

 private:
  int value(int position) const {
    return position < 0 || position >= static_cast<int>(values_.size()) ? SortTask::kBlank
                                                                        : values_[position];
  }
  std::vector<int> values_;
  std::array<int, 3> pointers_{0, 0, 0};
};

}  // namespace

SortTask::SortTask(bool recursive)
    : recursive_(recursive), programs_{{"BUBBLESORT", false}, {"BUBBLE", false},
                                       {"RESET", false},      {"BSTEP", false},
                                       {"COMPSWAP", false},   {"LSHIFT", false},
                                       {"RSHIFT", false},     {"PTR", true},
                                       {"SWAP", true}} {}

std::unique_ptr<Environment> SortTask::make_environment(const std::string& input) const {
  return std::make_unique<PointerArray>(parse(input));
}

std::string SortTask::random_input(int length, std::mt19937_64& rng) const {
  check_teach_length(length, "length");
  if (length < 1) throw InputError("sort length must be at least 1");
  std::uniform_int_distribution<int> digit(0, 9);
  std::vector<int> values(length);
  for (int& v : values) v = digit(rng);
  return format(values);
}

std::string SortTask::solve(const std::string& input) const {
  std::vector<int> values = parse(input);
  std::sort(values.begin(), values.end());
  return format(values);
}

Limits SortTask::default_limits(int length) const {
  // A correct run takes about 17 steps per element per pass, n passes; calls nest up to 2n deep.
  const long n = static_cast<long>(length) + 2;
  return {40 * n * n + 64, static_cast<int>(4 * n + 16)};
}

Trace SortTask::teach(const std::string& input) const {
  auto env = make_environment(input);
  check_teach_length(env->length(), "problem length");
  Trace trace;
  trace.input = input;
  TraceRecorder rec(programs_, *env, trace);
  constexpr Args kLeft1{0, 0, 0}, kRight1{0, 1, 0}, kLeft2{1, 0, 0}, kRight2{1, 1, 0},
      kRight3{2, 1, 0};
  auto off = [&](int pointer) { return env->observe()[pointer] == kBlank; };
  rec.set_body([&](int program, const Args&) {
    switch (program) {
      case kBubblesort:
        if (recursive_) {
          if (!off(2)) {
            rec.call(kPtr, kRight2);
            rec.call(kBubble);
            rec.call(kReset);
            rec.tail_call(kBubblesort);
          }
        } else {
          while (!off(2)) {
            rec.call(kBubble);
            rec.call(kReset);
          }
        }
        break;
      case kBubble:
        if (recursive_) {
          if (!off(1)) {
            rec.call(kBstep);
            rec.tail_call(kBubble);
          }
        } else {
          rec.call(kPtr, kRight2);
          while (!off(1)) rec.call(kBstep);
        }
        break;
      case kReset:
        if (recursive_) {
          if (off(0)) {
            rec.call(kPtr, kRight1);
            rec.call(kPtr, kRight3);
          } else {
            rec.call(kLshift);
            rec.tail_call(kReset);
          }
        } else {
          while (!off(0)) rec.call(kLshift);
          rec.call(kPtr, kRight1);
          rec.call(kPtr, kRight3);
        }
        break;
      case kBstep:
        rec.call(kCompswap);
        rec.call(kRshift);
        break;
      case kCompswap: {
        const auto obs = env->observe();
        if (obs[0] > obs[1]) rec.call(kSwap, {0, 1, 0});
        break;
      }
      case kLshift:
        rec.call(kPtr, kLeft1);
        rec.call(kPtr, kLeft2);
        break;
      case kRshift:
        rec.call(kPtr, kRight1);
        rec.call(kPtr, kRight2);
        break;
      default:
        throw std::logic_error("sort teacher has no body for program " + std::to_string(program));
    }
    rec.ret();
  });
  rec.run_root(kBubblesort);
  trace.output = env->result();
  return trace;
}

std::string SortTask::format_args(int program, const Args& args) const {
  if (program == kPtr)
    return std::to_string(args[0] + 1) + ", " + (args[1] == 0 ? "LEFT" : "RIGHT");
  if (program == kSwap) return std::to_string(args[0] + 1) + ", " + std::to_string(args[1] + 1);
  return "";
}

}  // namespace engram::datasets
