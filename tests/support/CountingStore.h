#pragma once
/// \file
/// Test support: an activation store that counts what goes through it, by kind, and keeps it as
/// the plain store does (memory/ActivationStore.h).

#include "memory/ActivationStore.h"

#include <map>

namespace engram::testing {

class CountingStore : public memory::ActivationStore {
 public:
  c10::intrusive_ptr<memory::SavedTensor> save(const at::Tensor& tensor,
                                               memory::SavedKind kind) override {
    ++saved[kind];
    return plain_.save(tensor, kind);
  }
  const char* name() const override { return "counting"; }
  std::map<memory::SavedKind, int> saved;

 private:
  memory::PlainStore plain_;
};

}  // namespace engram::testing
