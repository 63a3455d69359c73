#pragma once

/// memory/'s one place for LibTorch version differences (common/TorchVersion.h).
///
/// c10::Allocator, which MemoryTracker's CPU allocator implements, changed after 1.13:
/// - allocate() is const up to 2.2 and not const from 2.3 (pytorch/pytorch#120969, March 2024);
/// - copy_data(dest, src, count) const appeared with copy-on-write storages (Allocator::clone
///   calls it) and is pure virtual in 2.3 and later.
/// AllocatorBase gives subclasses one interface on every version: they implement
/// allocate_bytes() const; allocate() forwards to it and copy_data() copies with memcpy (the
/// memory is ordinary CPU memory).

#include "common/TorchVersion.h"

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace engram::memory::compat {

namespace detail {
template <typename T, typename = void>
struct declares_copy_data : std::false_type {};
template <typename T>
struct declares_copy_data<T, std::void_t<decltype(&T::copy_data)>> : std::true_type {};
}  // namespace detail

// If these fail, the version thresholds below are wrong for this LibTorch: fix them here.
static_assert(std::is_same_v<decltype(&c10::Allocator::allocate),
                             c10::DataPtr (c10::Allocator::*)(std::size_t) const> ==
                  !ENGRAM_TORCH_AT_LEAST(2, 3),
              "engram: c10::Allocator::allocate's constness differs from memory/TorchCompat.h");
static_assert(ENGRAM_TORCH_AT_LEAST(2, 1) || !detail::declares_copy_data<c10::Allocator>::value,
              "engram: this LibTorch declares c10::Allocator::copy_data; memory/TorchCompat.h "
              "must define it from an earlier version");

class AllocatorBase : public c10::Allocator {
 public:
#if ENGRAM_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(std::size_t nbytes) final { return allocate_bytes(nbytes); }
#else
  c10::DataPtr allocate(std::size_t nbytes) const final { return allocate_bytes(nbytes); }
#endif

#if ENGRAM_TORCH_AT_LEAST(2, 1)
  // No `override`: whether 2.1 and 2.2 declare copy_data was not checked against their headers
  // (2.3 and later do, pure virtual); where the base declares it, this overrides it either way.
  void copy_data(void* dest, const void* src, std::size_t count) const {  // NOLINT
    if (count > 0) std::memcpy(dest, src, count);
  }
#endif

 protected:
  virtual c10::DataPtr allocate_bytes(std::size_t nbytes) const = 0;
};

}  // namespace engram::memory::compat
