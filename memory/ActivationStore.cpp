#include "memory/ActivationStore.h"

#include <stdexcept>

namespace engram::memory {
namespace {

class PlainSavedTensor : public SavedTensor {
 public:
  PlainSavedTensor(const at::Tensor& tensor, SavedKind kind)
      : tensor_(tensor.defined() && kind != SavedKind::parameter ? tensor.detach() : tensor),
        version_(tensor.defined() ? tensor._version() : 0) {}

  at::Tensor load() override {
    if (released_) throw std::logic_error("saved tensor loaded after release()");
    if (tensor_.defined() && tensor_._version() != version_) {
      throw std::logic_error(
          "a tensor saved for backward was modified in place after it was saved (version " +
          std::to_string(version_) + ", now " + std::to_string(tensor_._version()) + ")");
    }
    return tensor_;
  }

  void release() override {
    tensor_.reset();
    released_ = true;
  }

  std::int64_t stored_bytes() const override {
    return tensor_.defined() ? static_cast<std::int64_t>(tensor_.storage().nbytes()) : 0;
  }

 private:
  at::Tensor tensor_;
  std::int64_t version_;
  bool released_ = false;
};

}  // namespace

c10::intrusive_ptr<SavedTensor> PlainStore::save(const at::Tensor& tensor, SavedKind kind) {
  return c10::make_intrusive<PlainSavedTensor>(tensor, kind);
}

}  // namespace engram::memory
