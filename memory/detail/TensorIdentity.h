#pragma once
/// \file
/// What makes two tensors the same saved tensor (the same bytes seen the same way, unchanged),
/// for the stores that share one saved copy between layers (memory/CompressingStore.h,
/// memory/SwapStore.h). Internal to memory/.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace engram::memory::detail {

struct TensorIdentity {
  const c10::StorageImpl* storage = nullptr;
  std::int64_t offset = 0;
  std::vector<std::int64_t> sizes, strides;
  at::ScalarType dtype = at::kFloat;
  std::uint32_t version = 0;

  bool operator==(const TensorIdentity& o) const {
    return storage == o.storage && offset == o.offset && version == o.version && dtype == o.dtype &&
           sizes == o.sizes && strides == o.strides;
  }
};

struct IdentityHash {
  std::size_t operator()(const TensorIdentity& id) const {
    std::size_t h = std::hash<const void*>()(id.storage);
    const auto mix = [&h](std::int64_t v) {
      h ^= std::hash<std::int64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    };
    mix(id.offset);
    mix(id.version);
    for (const std::int64_t s : id.sizes) mix(s);
    return h;
  }
};

inline const c10::VariableVersion& version_counter(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->version_counter();
}

inline TensorIdentity identity_of(const at::Tensor& t) {
  TensorIdentity id;
  id.storage = t.storage().unsafeGetStorageImpl();
  id.offset = t.storage_offset();
  id.sizes = t.sizes().vec();
  id.strides = t.strides().vec();
  id.dtype = t.scalar_type();
  const auto& counter = version_counter(t);
  id.version = counter.enabled() ? counter.current_version() : 0;
  return id;
}

/// Erases the entry for `id` from a registry of weak handles (identity -> weak_intrusive_ptr) if
/// it still names `owner`: a newer handle may have taken the identity since. The registry's lock
/// is the caller's.
template <class Registry, class Handle>
void erase_entry_of(Registry& registry, const TensorIdentity& id, const Handle* owner) {
  const auto it = registry.find(id);
  if (it != registry.end() && it->second._unsafe_get_target() == owner) registry.erase(it);
}

}  // namespace engram::memory::detail
