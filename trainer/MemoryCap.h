#pragma once
/// \file
/// A device-memory cap (--memory-cap): what LibTorch's CUDA caching allocator may hold during a
/// training session (trainer/Device.h's limit_device_memory, as
/// torch.cuda.set_per_process_memory_fraction does), and the bound on activation_peak_bytes it
/// leaves the memory planner (memory/UnitPlanner.h) once the step's state has its share.
///
/// \code
///   std::int64_t cap = engram::trainer::resolve_memory_cap("8GiB", device_bytes);  // or "0.5"
///   engram::trainer::StepState state = engram::trainer::step_state_bytes(
///       parameter_bytes, "adam", /*momentum=*/0.9);
///   std::int64_t budget = cap - state.total();   // activation_budget_under_cap() checks it
/// \endcode
///
/// Why the bound holds: the trackers' activation peak is the step's live bytes less its
/// parameters, gradients and optimizer state at that moment, so the step's live peak is at most
/// the activation peak plus every parameter, its gradient and its optimizer state, each rounded
/// up to the caching allocator's 512-byte blocks. A plan whose activation peak stays within
/// cap - that sum keeps the step's live bytes within the cap. The cap binds reserved bytes,
/// though, and these exceed the live ones by the segments' unused tails and cached blocks; so
/// on a device the planner also measures, from an emptied cache, the reserved bytes at each
/// plan's live peak, and counts a plan within the budget only when those fit too
/// (peak_against_cap). No torch here.

#include <cstdint>
#include <string>
#include <vector>

namespace engram::trainer {

/// The cap `text` names on a device of `device_bytes` bytes: a number of bytes ("8589934592"),
/// one with a binary unit ("512MiB", "8GiB", "8G": K, M, G and T, with or without "iB"), or a
/// fraction of the device in (0, 1] ("0.5"). Throws InvalidOption(`field`) for anything else, a
/// cap of no bytes, or one above the device's memory (device_bytes > 0).
std::int64_t resolve_memory_cap(const std::string& text, std::int64_t device_bytes,
                                const std::string& field = "memory.cap");

/// Checks the syntax only (no device needed): resolve_memory_cap's errors but the device's size.
void check_memory_cap(const std::string& text, const std::string& field = "memory.cap");

/// The fraction of a device of `device_bytes` that limits LibTorch's CUDA caching allocator to
/// exactly `bytes` (0 < bytes <= device_bytes; 0: no limit, the fraction 1). The allocator's
/// limit is floor(fraction x device_bytes) in double arithmetic, which for bytes / device_bytes
/// can come out a byte short; this is the smallest fraction whose limit is `bytes`. Throws
/// std::invalid_argument for bytes outside [0, device_bytes].
double allocator_fraction(std::int64_t bytes, std::int64_t device_bytes);

/// The allocator's limit in bytes when it reports `fraction` (getMemoryFraction: the limit
/// divided by `device_bytes`, which the product's floor can read a byte short); 0 (none) for a
/// fraction of 1 or more.
std::int64_t allocator_limit_bytes(double fraction, std::int64_t device_bytes);

/// Bytes of a block the caching allocator hands out for `bytes`: rounded up to 512.
std::int64_t allocator_block_bytes(std::int64_t bytes);

/// What a step holds besides its activations, in allocator blocks.
struct StepState {
  std::int64_t parameters = 0, gradients = 0, optimizer_state = 0;
  std::int64_t total() const { return parameters + gradients + optimizer_state; }
};

/// For parameters of these byte sizes under `optimizer` ("adam": two moments and a one-float
/// step count per parameter, as the fused kernel keeps; "sgd": a momentum buffer when
/// `momentum` > 0). Throws std::invalid_argument for another optimizer.
StepState step_state_bytes(const std::vector<std::int64_t>& parameter_bytes,
                           const std::string& optimizer, double momentum);

/// cap - state.total(): the planner's bound on activation_peak_bytes. Throws
/// InvalidOption(`field`) when the cap leaves nothing for activations, naming both figures.
std::int64_t activation_budget_under_cap(std::int64_t cap_bytes, const StepState& state,
                                         const std::string& field = "memory.cap");

/// cap - optimizer state: what the allocator may reserve at a planning step's live peak.
/// Planning measures its steps before the optimizer's state exists (trainer/Trainer.h), with
/// every other part of the step there: the parameters' segments, the gradients and activations,
/// and whatever the allocator keeps beside them.
std::int64_t reserved_budget_while_planning(std::int64_t cap_bytes, const StepState& state);

/// The peak a planner holds against the activation budget `budget` (activation_budget_under_cap)
/// so that a plan fits the cap in reserved bytes, as the allocator's limit binds them, and not
/// only in live ones: the live activation peak, or the reserved bytes at the step's live peak
/// less what `reserved_budget` (reserved_budget_while_planning) holds beyond `budget` (the
/// parameters' and gradients' blocks), whichever is larger. A peak within `budget` then means
/// both bounds hold. Under a cap a plan's activation_peak_bytes is this figure.
std::int64_t peak_against_cap(std::int64_t activation_peak, std::int64_t reserved_at_peak,
                              std::int64_t reserved_budget, std::int64_t budget);

}  // namespace engram::trainer
