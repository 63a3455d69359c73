#include "nn/Width.h"

#include "common/Errors.h"

namespace engram::nn {

void check_width(long long width, const std::string& field) {
  if (width < 1 || width > kMaxWidth)
    throw InvalidOption(field, "must be between 1 and " + std::to_string(kMaxWidth));
}

}  // namespace engram::nn
