#pragma once
/// \file
/// The one bound on the widths of the models built from nn/ layers (the NPI's and the primitive
/// networks' hidden and embedding sizes, the benchmarks' --hidden): a checkpoint or a flag
/// asking for more is refused before torch allocates anything, where a mistyped or forged size
/// would be an allocation of gigabytes and a torch stack trace. Torch-free.
///
/// \code
///   engram::nn::check_width(options.hidden, "hidden");  // InvalidOption unless in 1..kMaxWidth
/// \endcode

#include <string>

namespace engram::nn {

/// The largest width a model may ask for (far above every trained configuration: 64..512).
inline constexpr int kMaxWidth = 8192;

/// Throws InvalidOption(`field`, "must be between 1 and 8192") unless 1 <= width <= kMaxWidth.
void check_width(long long width, const std::string& field);

}  // namespace engram::nn
