#include "datasets/Primitive.h"

#include "datasets/Task.h"

#include <cctype>
#include <deque>
#include <mutex>
#include <utility>

namespace engram::datasets {
namespace {

bool is_prime(int x) {
  if (x < 2) return false;
  for (int d = 2; d * d <= x; ++d) {
    if (x % d == 0) return false;
  }
  return true;
}

class SymbolicPrimitive final : public Primitive {
 public:
  SymbolicPrimitive(PrimitiveRef ref, PrimitiveKind kind, int k)
      : Primitive(std::move(ref), kind, k) {}
  int apply(int x, int y, int z) const override { return symbolic_apply(ref(), domain(), x, y, z); }
  std::string implementation() const override { return "symbolic"; }
};

[[noreturn]] void fail_at(const std::string& text, std::size_t index, const std::string& what) {
  throw PrimitiveParseError(text, index, what);
}

}  // namespace

PrimitiveParseError::PrimitiveParseError(const std::string& text, std::size_t index,
                                         std::string problem)
    : InputError("primitive '" + text + "', column " + std::to_string(index + 1) + ": " + problem),
      index_(index),
      problem_(std::move(problem)) {}

std::string kind_name(PrimitiveKind kind) {
  switch (kind) {
    case PrimitiveKind::kUnary:
      return "unary";
    case PrimitiveKind::kPredicate:
      return "predicate";
    case PrimitiveKind::kBinary:
      return "binary";
    case PrimitiveKind::kFullAdder:
      return "full-adder";
  }
  return "?";
}

int kind_arity(PrimitiveKind kind) {
  switch (kind) {
    case PrimitiveKind::kBinary:
      return 2;
    case PrimitiveKind::kFullAdder:
      return 3;
    default:
      return 1;
  }
}

int kind_results(PrimitiveKind kind, int k) {
  switch (kind) {
    case PrimitiveKind::kPredicate:
      return 2;
    case PrimitiveKind::kFullAdder:
      return 2 * k;
    default:
      return k;
  }
}

const std::vector<PrimitiveFamily>& primitive_families() {
  static const std::vector<PrimitiveFamily> families{
      {"succ", PrimitiveKind::kUnary, false, 0, true, "x + 1 mod K"},
      {"double", PrimitiveKind::kUnary, false, 0, true, "2x mod K"},
      {"square", PrimitiveKind::kUnary, false, 0, true, "x^2 mod K"},
      {"negate", PrimitiveKind::kUnary, false, 0, true, "-x mod K"},
      {"even", PrimitiveKind::kPredicate, false, 0, true, "x is even"},
      {"prime", PrimitiveKind::kPredicate, false, 0, true, "x is prime"},
      {"gt", PrimitiveKind::kPredicate, true, 0, true, "x > c"},
      {"add", PrimitiveKind::kBinary, false, 0, true, "x + y mod K"},
      {"mul", PrimitiveKind::kBinary, false, 0, true, "x * y mod K"},
      {"max", PrimitiveKind::kBinary, false, 0, true, "the larger of x and y"},
      {"min", PrimitiveKind::kBinary, false, 0, true, "the smaller of x and y"},
      {"fulladd", PrimitiveKind::kFullAdder, false, 0, true,
       "x + y + carry: sum digit and carry out (addition-primitive)"},
      {"div", PrimitiveKind::kPredicate, true, 1, false, "c divides x (held out of the library)"},
  };
  return families;
}

namespace {

// Table families: deques keep the pointers handed out valid as more are registered.
struct TableRegistry {
  std::mutex mutex;
  std::deque<TableFamily> tables;
  std::deque<PrimitiveFamily> families;
};
TableRegistry& table_registry() {
  static TableRegistry registry;
  return registry;
}

}  // namespace

const PrimitiveFamily* find_family(const std::string& name) {
  for (const auto& family : primitive_families()) {
    if (family.name == name) return &family;
  }
  auto& registry = table_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (const auto& family : registry.families)
    if (family.name == name) return &family;
  return nullptr;
}

const TableFamily* find_table_family(const std::string& name) {
  auto& registry = table_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (const auto& table : registry.tables)
    if (table.name == name) return &table;
  return nullptr;
}

void register_table_family(const TableFamily& family) {
  for (const auto& f : primitive_families())
    if (f.name == family.name) throw InputError("'" + family.name + "' is a library primitive");
  bool identifier =
      !family.name.empty() && !std::isdigit(static_cast<unsigned char>(family.name[0]));
  for (char c : family.name)
    identifier = identifier && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!identifier) throw InputError("primitive name '" + family.name + "' is not an identifier");
  if (family.kind == PrimitiveKind::kFullAdder)
    throw InputError("primitive '" + family.name + "': a table of the full adder's kind");
  if (family.k < kMinDomain || family.k > kMaxDomain)
    throw InputError("primitive '" + family.name + "': K must lie in " +
                     std::to_string(kMinDomain) + ".." + std::to_string(kMaxDomain));
  const std::size_t k = static_cast<std::size_t>(family.k);
  const std::size_t size = family.kind == PrimitiveKind::kBinary ? k * k : k;
  if (family.table.size() != size)
    throw InputError("primitive '" + family.name + "': its table has " +
                     std::to_string(family.table.size()) + " values, not " + std::to_string(size));
  const int results = kind_results(family.kind, family.k);
  for (int v : family.table)
    if (v < 0 || v >= results)
      throw InputError("primitive '" + family.name + "': the value " + std::to_string(v) +
                       " lies outside 0.." + std::to_string(results - 1));
  auto& registry = table_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (std::size_t i = 0; i < registry.tables.size(); ++i) {
    if (registry.tables[i].name == family.name) {
      registry.tables[i] = family;
      registry.families[i].kind = family.kind;
      registry.families[i].help = family.help;
      return;
    }
  }
  registry.tables.push_back(family);
  registry.families.push_back({family.name, family.kind, false, 0, false, family.help});
}

std::string PrimitiveRef::text() const {
  return parameter < 0 ? family : family + "(" + std::to_string(parameter) + ")";
}

PrimitiveRef parse_primitive(const std::string& text) {
  std::size_t i = 0;
  auto skip_space = [&]() {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip_space();
  const std::size_t name_start = i;
  while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
    ++i;
  if (i == name_start) fail_at(text, i, "expected a primitive name");
  PrimitiveRef ref;
  ref.family = text.substr(name_start, i - name_start);
  const PrimitiveFamily* family = find_family(ref.family);
  if (family == nullptr) {
    std::string known;
    for (const auto& f : primitive_families())
      known += (known.empty() ? "" : ", ") + f.name + (f.has_parameter ? "(c)" : "");
    fail_at(text, name_start, "unknown primitive '" + ref.family + "' (known: " + known + ")");
  }
  skip_space();
  if (i < text.size() && text[i] == '(') {
    ++i;
    skip_space();
    const std::size_t number_start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == number_start || i - number_start > 6)
      fail_at(text, number_start, "expected a non-negative integer parameter");
    ref.parameter = std::stoi(text.substr(number_start, i - number_start));
    skip_space();
    if (i >= text.size() || text[i] != ')') fail_at(text, i, "expected ')'");
    ++i;
    skip_space();
  }
  if (i < text.size()) fail_at(text, i, "unexpected '" + text.substr(i) + "'");
  if (family->has_parameter && ref.parameter < 0)
    fail_at(text, name_start, ref.family + " takes a parameter, e.g. " + ref.family + "(3)");
  if (!family->has_parameter && ref.parameter >= 0)
    fail_at(text, name_start, ref.family + " takes no parameter");
  return ref;
}

int symbolic_apply(const PrimitiveRef& ref, int k, int x, int y, int z) {
  const std::string& f = ref.family;
  if (f == "succ") return (x + 1) % k;
  if (f == "double") return (2 * x) % k;
  if (f == "square") return static_cast<int>((static_cast<long>(x) * x) % k);
  if (f == "negate") return (k - x) % k;
  if (f == "even") return x % 2 == 0 ? 1 : 0;
  if (f == "prime") return is_prime(x) ? 1 : 0;
  if (f == "gt") return x > ref.parameter ? 1 : 0;
  if (f == "div") return x % ref.parameter == 0 ? 1 : 0;
  if (f == "add") return (x + y) % k;
  if (f == "mul") return static_cast<int>((static_cast<long>(x) * y) % k);
  if (f == "max") return x > y ? x : y;
  if (f == "min") return x < y ? x : y;
  if (f == "fulladd") return x + y + z;
  if (const TableFamily* table = find_table_family(f)) {
    if (table->k != k)
      throw InputError("primitive '" + f + "' is defined for K = " + std::to_string(table->k) +
                       ", not " + std::to_string(k));
    const auto index =
        static_cast<std::size_t>(table->kind == PrimitiveKind::kBinary ? x * k + y : x);
    return table->table.at(index);
  }
  throw std::logic_error("no symbolic implementation of primitive '" + f + "'");
}

Primitive::Primitive(PrimitiveRef ref, PrimitiveKind kind, int k)
    : ref_(std::move(ref)), kind_(kind), k_(k) {}

void check_parameter(const PrimitiveRef& ref, int k) {
  const PrimitiveFamily* family = find_family(ref.family);
  if (family == nullptr) throw InputError("unknown primitive '" + ref.family + "'");
  if (family->has_parameter && (ref.parameter < family->min_parameter || ref.parameter >= k)) {
    throw InputError("primitive '" + ref.text() + "': the parameter must lie in " +
                     std::to_string(family->min_parameter) + ".." + std::to_string(k - 1) +
                     " for K = " + std::to_string(k));
  }
}

std::shared_ptr<const Primitive> make_symbolic_primitive(const PrimitiveRef& ref, int k) {
  if (k < kMinDomain || k > kMaxDomain) {
    throw InputError("K must lie in " + std::to_string(kMinDomain) + ".." +
                     std::to_string(kMaxDomain) + ", got " + std::to_string(k));
  }
  check_parameter(ref, k);
  if (const TableFamily* table = find_table_family(ref.family); table != nullptr && table->k != k)
    throw InputError("primitive '" + ref.family + "' is defined for K = " +
                     std::to_string(table->k) + ", not " + std::to_string(k));
  return std::make_shared<SymbolicPrimitive>(ref, find_family(ref.family)->kind, k);
}

}  // namespace engram::datasets
