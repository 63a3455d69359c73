#include "trainer/MemoryCap.h"

#include "common/Errors.h"
#include "memory/UnitPlanner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace engram::trainer {
namespace {

constexpr std::int64_t kBlock = 512;

/// The cap's bytes, or as a fraction (negative: -fraction); InvalidOption for a malformed text.
double parse(const std::string& text, const std::string& field) {
  const std::string usage = "must be bytes (8589934592), bytes with a unit (512MiB, 8GiB, 8G) or a "
                            "fraction of the device in (0, 1] (0.5), not '" + text + "'";
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.'))
    throw InvalidOption(field, usage);
  std::size_t end = 0;
  double number = 0;
  try {
    number = std::stod(text, &end);
  } catch (const std::exception&) {
    throw InvalidOption(field, usage);
  }
  std::string unit = text.substr(end);
  // "0.5" and "1.0" are fractions; "1e9" and "7.5GiB" are bytes.
  if (unit.empty() && text.find('.') != std::string::npos) {
    if (!(number > 0) || number > 1) throw InvalidOption(field, usage);
    return -number;
  }
  if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
  double scale = 1;
  if (unit.empty()) {
    scale = 1;
  } else if (unit == "K") {
    scale = 1024.0;
  } else if (unit == "M") {
    scale = 1024.0 * 1024.0;
  } else if (unit == "G") {
    scale = 1024.0 * 1024.0 * 1024.0;
  } else if (unit == "T") {
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  } else {
    throw InvalidOption(field, usage);
  }
  const double bytes = number * scale;
  if (!(bytes >= 1)) throw InvalidOption(field, "must be at least one byte, not '" + text + "'");
  if (bytes > static_cast<double>(std::numeric_limits<std::int64_t>::max() / 2))
    throw InvalidOption(field, "is more bytes than any device has: '" + text + "'");
  return bytes;
}

}  // namespace

void check_memory_cap(const std::string& text, const std::string& field) { parse(text, field); }

std::int64_t resolve_memory_cap(const std::string& text, std::int64_t device_bytes,
                                const std::string& field) {
  const double parsed = parse(text, field);
  if (parsed < 0) {
    if (device_bytes <= 0)
      throw InvalidOption(field, "is a fraction (" + text + "), and the device's size is unknown");
    return static_cast<std::int64_t>(std::floor(-parsed * static_cast<double>(device_bytes)));
  }
  const auto bytes = static_cast<std::int64_t>(parsed);
  if (device_bytes > 0 && bytes > device_bytes)
    throw InvalidOption(field, "is " + text + " (" + memory::mib(bytes) +
                                   "), more than the device's " + memory::mib(device_bytes));
  return bytes;
}

double allocator_fraction(std::int64_t bytes, std::int64_t device_bytes) {
  if (bytes < 0 || device_bytes <= 0 || bytes > device_bytes) {
    throw std::invalid_argument("a device-memory limit of " + std::to_string(bytes) +
                                " bytes on a device of " + std::to_string(device_bytes));
  }
  if (bytes == 0 || bytes == device_bytes) return 1.0;
  // setMemoryFraction's limit: the product's floor.
  const auto limit_of = [device_bytes](double f) {
    return static_cast<std::int64_t>(f * static_cast<double>(device_bytes));
  };
  double fraction = static_cast<double>(bytes) / static_cast<double>(device_bytes);
  // The quotient is within an ulp or two of the answer: step up until the product reaches it.
  while (limit_of(fraction) < bytes) fraction = std::nextafter(fraction, 2.0);
  return fraction;
}

std::int64_t allocator_limit_bytes(double fraction, std::int64_t device_bytes) {
  if (fraction >= 1.0) return 0;
  return std::llround(fraction * static_cast<double>(device_bytes));
}

std::int64_t allocator_block_bytes(std::int64_t bytes) {
  if (bytes <= 0) return 0;
  return (bytes + kBlock - 1) / kBlock * kBlock;
}

StepState step_state_bytes(const std::vector<std::int64_t>& parameter_bytes,
                           const std::string& optimizer, double momentum) {
  if (optimizer != "adam" && optimizer != "sgd")
    throw std::invalid_argument("step_state_bytes: unknown optimizer '" + optimizer + "'");
  StepState s;
  for (const std::int64_t bytes : parameter_bytes) {
    const std::int64_t block = allocator_block_bytes(bytes);
    s.parameters += block;
    s.gradients += block;
    if (optimizer == "adam") {
      s.optimizer_state +=
          2 * block + allocator_block_bytes(static_cast<std::int64_t>(sizeof(float)));
    } else if (momentum > 0) {
      s.optimizer_state += block;
    }
  }
  return s;
}

std::int64_t activation_budget_under_cap(std::int64_t cap_bytes, const StepState& state,
                                         const std::string& field) {
  const std::int64_t budget = cap_bytes - state.total();
  if (budget <= 0)
    throw InvalidOption(field, "is " + memory::mib(cap_bytes) +
                                   ", and the parameters, gradients and optimizer state alone "
                                   "take " + memory::mib(state.total()));
  return budget;
}

std::int64_t reserved_budget_while_planning(std::int64_t cap_bytes, const StepState& state) {
  return cap_bytes - state.optimizer_state;
}

std::int64_t peak_against_cap(std::int64_t activation_peak, std::int64_t reserved_at_peak,
                              std::int64_t reserved_budget, std::int64_t budget) {
  return std::max(activation_peak, reserved_at_peak - (reserved_budget - budget));
}

}  // namespace engram::trainer
