#pragma once
/// \file
/// FNV-1a, the 64-bit hash Engram uses wherever a value must be the same on every machine and run
/// (checkpoint checksums, corpus splits, identifier buckets, statement order); std::hash is not.
///
/// \code
///   std::uint64_t h = engram::fnv1a("json/decoder.py");
///   h = engram::fnv1a(bytes.data(), bytes.size(), h);   // continue over more data
/// \endcode

#include <cstddef>
#include <cstdint>
#include <string>

namespace engram {

constexpr std::uint64_t kFnv1aSeed = 1469598103934665603ULL;

/// FNV-1a of `n` bytes, continued from `h`.
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = kFnv1aSeed) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

inline std::uint64_t fnv1a(const std::string& s) { return fnv1a(s.data(), s.size()); }

}  // namespace engram
