#include "datasets/ListTask.h"

#include "datasets/AdditionTask.h"
#include "datasets/SortTask.h"
#include "datasets/Teacher.h"

#include <algorithm>
#include <cctype>

namespace engram::datasets {
namespace {

using Op = HigherOrderTask::Operand;

const char* root_name(HigherOrder which) {
  switch (which) {
    case HigherOrder::kMap:
      return "MAP";
    case HigherOrder::kFilter:
      return "FILTER";
    case HigherOrder::kFold:
      return "FOLD";
    case HigherOrder::kZipWith:
      return "ZIPWITH";
    case HigherOrder::kScan:
      return "SCAN";
  }
  return "?";
}

const char* step_name(HigherOrder which) {
  switch (which) {
    case HigherOrder::kMap:
      return "MAP1";
    case HigherOrder::kFilter:
      return "FILTER1";
    case HigherOrder::kFold:
      return "FOLD1";
    case HigherOrder::kZipWith:
      return "ZIP1";
    case HigherOrder::kScan:
      return "SCAN1";
  }
  return "?";
}

const char* operand_name(int operand) {
  static const char* names[] = {"NONE", "X", "Y", "ACC", "REG", "OUT"};
  return operand >= 0 && operand < 6 ? names[operand] : "?";
}

HigherOrder which_of(const std::string& name) {
  if (name == "map") return HigherOrder::kMap;
  if (name == "filter") return HigherOrder::kFilter;
  if (name == "fold") return HigherOrder::kFold;
  if (name == "zipwith") return HigherOrder::kZipWith;
  if (name == "scan") return HigherOrder::kScan;
  throw InputError("'" + name + "' is not a high-order task");
}

/// The pieces of an input: X, and Y for ZIPWITH.
struct Lists {
  std::vector<int> x, y;
  bool has_y = false;
};

Lists parse_lists(const std::string& input, bool two, int k) {
  Lists lists;
  const auto semicolon = input.find(';');
  if (!two) {
    if (semicolon != std::string::npos) {
      throw InputError("input column " + std::to_string(semicolon + 1) +
                       ": ';' separates ZIPWITH's two lists; this program takes one list");
    }
    lists.x = parse_value_list(input, k);
    return lists;
  }
  if (semicolon == std::string::npos) {
    throw InputError("ZIPWITH takes two lists separated by ';', e.g. \"1,2;3,4\", got '" + input +
                     "'");
  }
  if (input.find(';', semicolon + 1) != std::string::npos) {
    throw InputError("input column " + std::to_string(input.find(';', semicolon + 1) + 1) +
                     ": ZIPWITH takes exactly two lists");
  }
  lists.x = parse_value_list(input.substr(0, semicolon), k);
  lists.y = parse_value_list(input.substr(semicolon + 1), k, semicolon + 1);
  lists.has_y = true;
  return lists;
}

class ListEnvironment final : public Environment {
 public:
  ListEnvironment(Lists lists, std::shared_ptr<const Primitive> primitive, int init, bool scalar)
      : x_(std::move(lists.x)),
        y_(std::move(lists.y)),
        has_y_(lists.has_y),
        primitive_(std::move(primitive)),
        acc_(init),
        scalar_result_(scalar) {}

  std::vector<int> observe() const override {
    return {x_at_end() ? 1 : 0, y_at_end() ? 1 : 0, register_state_};
  }

  void act(int program, const Args& args) override {
    switch (program) {
      case HigherOrderTask::kApply:
        apply(args[0], args[1]);
        return;
      case HigherOrderTask::kWrite: {
        int value = 0;
        if (args[1] == Op::kReg) {
          if (register_state_ == HigherOrderTask::kEmpty)
            throw ActError("WRITE from the empty register");
          value = register_;
        } else {
          value = operand(args[1], "WRITE");
        }
        if (args[0] == Op::kOut) {
          out_.push_back(value);
        } else if (args[0] == Op::kAcc) {
          acc_ = value;
        } else {
          throw ActError(std::string("WRITE to ") + operand_name(args[0]));
        }
        return;
      }
      case HigherOrderTask::kMove:
        if (args[0] == Op::kX) {
          if (x_at_end()) throw ActError("MOVE(X) past the end of X");
          ++px_;
        } else if (args[0] == Op::kY) {
          if (y_at_end()) throw ActError("MOVE(Y) past the end of Y");
          ++py_;
        } else {
          throw ActError(std::string("MOVE of ") + operand_name(args[0]));
        }
        return;
      default:
        throw ActError("program " + std::to_string(program) + " is not an ACT of a list program");
    }
  }

  std::string result() const override {
    return scalar_result_ ? std::to_string(acc_) : format_value_list(out_);
  }
  int length() const override {
    return static_cast<int>(std::max(x_.size(), has_y_ ? y_.size() : std::size_t{0}));
  }

 private:
  bool x_at_end() const { return px_ >= x_.size(); }
  bool y_at_end() const { return !has_y_ || py_ >= y_.size(); }

  int operand(int which, const char* act) const {
    switch (which) {
      case Op::kX:
        if (x_at_end()) throw ActError(std::string(act) + " reads X past its end");
        return x_[px_];
      case Op::kY:
        if (y_at_end()) throw ActError(std::string(act) + " reads Y past its end");
        return y_[py_];
      case Op::kAcc:
        return acc_;
      default:
        throw ActError(std::string(act) + " cannot read " + operand_name(which));
    }
  }

  void apply(int a, int b) {
    const int arity = kind_arity(primitive_->kind());
    const int given = b == Op::kNone ? 1 : 2;
    if (given != arity) {
      throw ActError("APPLY with " + std::to_string(given) +
                     " operand(s), but the bound primitive " + primitive_->ref().text() +
                     " takes " + std::to_string(arity));
    }
    const int x = operand(a, "APPLY");
    const int y = arity == 2 ? operand(b, "APPLY") : 0;
    register_ = primitive_->apply(x, y);
    if (primitive_->kind() == PrimitiveKind::kPredicate) {
      register_state_ = register_ != 0 ? HigherOrderTask::kTrue : HigherOrderTask::kFalse;
    } else {
      register_state_ = HigherOrderTask::kValue;
    }
  }

  std::vector<int> x_, y_;
  bool has_y_;
  std::shared_ptr<const Primitive> primitive_;
  std::size_t px_ = 0, py_ = 0;
  std::vector<int> out_;
  int acc_;
  int register_ = 0;
  int register_state_ = HigherOrderTask::kEmpty;
  bool scalar_result_;
};

std::shared_ptr<const Primitive> default_primitive(HigherOrder which) {
  switch (which) {
    case HigherOrder::kMap:
      return make_symbolic_primitive(parse_primitive("succ"), 10);
    case HigherOrder::kFilter:
      return make_symbolic_primitive(parse_primitive("even"), 10);
    default:
      return make_symbolic_primitive(parse_primitive("add"), 10);
  }
}

}  // namespace

std::vector<int> parse_value_list(const std::string& text, int k, std::size_t column0) {
  std::vector<int> values;
  bool all_space = true;
  for (char c : text) all_space = all_space && std::isspace(static_cast<unsigned char>(c));
  if (all_space) return values;
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const std::size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    const std::size_t column = column0 + start + 1;
    if (i == start) {
      throw InputError("input column " + std::to_string(column) + ": expected a value 0.." +
                       std::to_string(k - 1) +
                       (start < text.size() ? ", found '" + text.substr(start, 1) + "'"
                                            : ", found the end of the list"));
    }
    const std::string digits = text.substr(start, i - start);
    if (digits.size() > 9 || std::stol(digits) >= k) {
      throw InputError("input column " + std::to_string(column) + ": value " + digits +
                       " (element " + std::to_string(values.size() + 1) +
                       ") is outside the domain 0.." + std::to_string(k - 1));
    }
    values.push_back(std::stoi(digits));
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == text.size()) break;
    if (text[i] != ',') {
      throw InputError("input column " + std::to_string(column0 + i + 1) +
                       ": expected ',', found '" + text.substr(i, 1) + "'");
    }
    ++i;
  }
  return values;
}

std::string format_value_list(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

const std::vector<std::string>& higher_order_task_names() {
  static const std::vector<std::string> names{"map", "filter", "fold", "zipwith", "scan"};
  return names;
}

bool is_higher_order(const std::string& name) {
  const auto& names = higher_order_task_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool takes_primitive(const std::string& name) {
  return is_higher_order(name) || name == "addition-primitive";
}

PrimitiveKind primitive_kind_of(const std::string& name) {
  if (name == "addition-primitive") return PrimitiveKind::kFullAdder;
  switch (which_of(name)) {
    case HigherOrder::kMap:
      return PrimitiveKind::kUnary;
    case HigherOrder::kFilter:
      return PrimitiveKind::kPredicate;
    default:
      return PrimitiveKind::kBinary;
  }
}

HigherOrderTask::HigherOrderTask(HigherOrder which, Binding binding)
    : which_(which), binding_(std::move(binding)) {
  programs_ = {{root_name(which), false},
               {step_name(which), false},
               {"APPLY", true},
               {"WRITE", true},
               {"MOVE", true}};
  if (!binding_.primitive) binding_.primitive = default_primitive(which);
  const int k = binding_.primitive->domain();
  if (primitive_kind() != binding_.primitive->kind()) {
    throw UsageError("arity mismatch: " + std::string(root_name(which)) + " applies a " +
                     kind_name(primitive_kind()) + " primitive, but '" +
                     binding_.primitive->ref().text() + "' is " +
                     kind_name(binding_.primitive->kind()));
  }
  if (!binding_.reference)
    binding_.reference = make_symbolic_primitive(binding_.primitive->ref(), k);
  if (binding_.reference->domain() != k || binding_.reference->kind() != binding_.primitive->kind())
    throw std::invalid_argument("the reference primitive does not match the bound one");
  if (binding_.init < 0 || binding_.init >= k) {
    throw InvalidOption("init", std::to_string(binding_.init) + " is outside the domain 0.." +
                     std::to_string(k - 1));
  }
}

std::string HigherOrderTask::name() const {
  return higher_order_task_names()[static_cast<int>(which_)];
}

PrimitiveKind HigherOrderTask::primitive_kind() const { return primitive_kind_of(name()); }

std::string HigherOrderTask::input_help() const {
  const std::string k = std::to_string(domain() - 1);
  if (which_ == HigherOrder::kZipWith)
    return "two lists of values 0.." + k + " separated by ';', e.g. \"1,2;3,4\"";
  return "comma-separated values 0.." + k + ", e.g. \"3,1,2\"";
}

std::unique_ptr<Environment> HigherOrderTask::make_environment(const std::string& input) const {
  return std::make_unique<ListEnvironment>(
      parse_lists(input, which_ == HigherOrder::kZipWith, domain()), binding_.primitive,
      binding_.init, which_ == HigherOrder::kFold);
}

std::string HigherOrderTask::random_input(int length, std::mt19937_64& rng) const {
  check_teach_length(length, "length");
  if (length < 0) throw InputError("list length must not be negative");
  std::uniform_int_distribution<int> value(0, domain() - 1);
  std::vector<int> x(length);
  for (int& v : x) v = value(rng);
  if (which_ != HigherOrder::kZipWith) return format_value_list(x);
  std::vector<int> y(length);
  for (int& v : y) v = value(rng);
  return format_value_list(x) + ";" + format_value_list(y);
}

std::string HigherOrderTask::solve(const std::string& input) const {
  const Lists lists = parse_lists(input, which_ == HigherOrder::kZipWith, domain());
  const Primitive& f = *binding_.reference;
  std::vector<int> out;
  int acc = binding_.init;
  switch (which_) {
    case HigherOrder::kMap:
      for (int v : lists.x) out.push_back(f.apply(v));
      break;
    case HigherOrder::kFilter:
      for (int v : lists.x) {
        if (f.apply(v) != 0) out.push_back(v);
      }
      break;
    case HigherOrder::kFold:
      for (int v : lists.x) acc = f.apply(acc, v);
      return std::to_string(acc);
    case HigherOrder::kScan:
      for (int v : lists.x) out.push_back(acc = f.apply(acc, v));
      break;
    case HigherOrder::kZipWith:
      for (std::size_t i = 0; i < std::min(lists.x.size(), lists.y.size()); ++i)
        out.push_back(f.apply(lists.x[i], lists.y[i]));
      break;
  }
  return format_value_list(out);
}

Limits HigherOrderTask::default_limits(int length) const {
  // A correct run takes 9 steps per element at most (3 in the root, 6 in the step program) and
  // nests one call per element.
  const long n = static_cast<long>(length) + 2;
  return {16 * n + 64, static_cast<int>(n + 16)};
}

Trace HigherOrderTask::teach(const std::string& input) const {
  ListEnvironment env(parse_lists(input, which_ == HigherOrder::kZipWith, domain()),
                      binding_.reference, binding_.init, which_ == HigherOrder::kFold);
  check_teach_length(env.length(), "problem length");
  Trace trace;
  trace.input = input;
  TraceRecorder rec(programs_, env, trace);
  auto at_end = [&](int slot) { return env.observe()[slot] == 1; };
  rec.set_body([&](int program, const Args&) {
    if (program == kRoot) {
      const bool done = at_end(0) || (which_ == HigherOrder::kZipWith && at_end(1));
      if (!done) {
        rec.call(kStep);
        rec.tail_call(kRoot);
      }
    } else if (program == kStep) {
      switch (which_) {
        case HigherOrder::kMap:
          rec.call(kApply, {kX, kNone, 0});
          rec.call(kWrite, {kOut, kReg, 0});
          break;
        case HigherOrder::kFilter:
          rec.call(kApply, {kX, kNone, 0});
          if (env.observe()[2] == kTrue) rec.call(kWrite, {kOut, kX, 0});
          break;
        case HigherOrder::kFold:
          rec.call(kApply, {kAcc, kX, 0});
          rec.call(kWrite, {kAcc, kReg, 0});
          break;
        case HigherOrder::kScan:
          rec.call(kApply, {kAcc, kX, 0});
          rec.call(kWrite, {kAcc, kReg, 0});
          rec.call(kWrite, {kOut, kReg, 0});
          break;
        case HigherOrder::kZipWith:
          rec.call(kApply, {kX, kY, 0});
          rec.call(kWrite, {kOut, kReg, 0});
          rec.call(kMove, {kY, 0, 0});
          break;
      }
      rec.call(kMove, {kX, 0, 0});
    } else {
      throw std::logic_error("list teacher has no body for program " + std::to_string(program));
    }
    rec.ret();
  });
  rec.run_root(kRoot);
  trace.output = env.result();
  return trace;
}

std::string HigherOrderTask::format_args(int program, const Args& args) const {
  switch (program) {
    case kApply:
      return args[1] == kNone ? operand_name(args[0])
                              : std::string(operand_name(args[0])) + ", " + operand_name(args[1]);
    case kWrite:
      return std::string(operand_name(args[0])) + ", " + operand_name(args[1]);
    case kMove:
      return operand_name(args[0]);
    default:
      return "";
  }
}

std::unique_ptr<Task> bind_task(const std::string& name, const Binding& binding) {
  if (is_higher_order(name)) return std::make_unique<HigherOrderTask>(which_of(name), binding);
  task_by_name(name);  // InputError for unknown names
  if (name == "addition-primitive") {
    if (binding.init != 0) throw UsageError("addition-primitive takes no initial value");
    return std::make_unique<AdditionTask>(binding.primitive, binding.reference);
  }
  if (binding.primitive || binding.reference || binding.init != 0) {
    throw UsageError("task '" + name + "' takes no primitive and no initial value");
  }
  if (name == "addition") return std::make_unique<AdditionTask>();
  return std::make_unique<SortTask>(/*recursive=*/name == "sort-recursive");
}

}  // namespace engram::datasets
