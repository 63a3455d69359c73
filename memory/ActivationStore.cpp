#include "memory/ActivationStore.h"

#include <stdexcept>
#include <utility>

namespace engram::memory {
namespace {

class PlainSavedTensor : public SavedTensor {
 public:
  PlainSavedTensor(const at::Tensor& tensor, SavedKind kind)
      : tensor_(tensor.defined() && kind != SavedKind::parameter ? tensor.detach() : tensor),
        movable_(tensor.defined() &&
                 (kind == SavedKind::activation || kind == SavedKind::relu_output)),
        version_(tensor.defined() ? tensor._version() : 0) {
    if (tensor.defined()) counter_ = tensor.unsafeGetTensorImpl()->version_counter();
  }

  at::Tensor load() override {
    if (released_) throw std::logic_error("saved tensor loaded after release()");
    // The original's counter, which outlives a move out of memory and back (take_buffers()).
    if (tensor_.defined() && counter_.enabled() && counter_.current_version() != version_) {
      throw std::logic_error(
          "a tensor saved for backward was modified in place after it was saved (version " +
          std::to_string(version_) + ", now " + std::to_string(counter_.current_version()) + ")");
    }
    return tensor_;
  }

  void release() override {
    tensor_.reset();
    released_ = true;
  }

  std::vector<at::Tensor> take_buffers() override {
    if (released_ || !movable_ || !tensor_.defined()) return {};
    return {std::move(tensor_)};
  }

  void put_buffers(std::vector<at::Tensor> buffers) override {
    if (buffers.size() != 1) throw std::logic_error("PlainStore: one buffer expected back");
    tensor_ = std::move(buffers[0]);
  }

  std::int64_t stored_bytes() const override {
    return tensor_.defined() ? static_cast<std::int64_t>(tensor_.storage().nbytes()) : 0;
  }

 private:
  at::Tensor tensor_;
  bool movable_;  // an activation (not a parameter or bookkeeping)
  std::int64_t version_;
  c10::VariableVersion counter_{c10::VariableVersion::Disabled{}};
  bool released_ = false;
};

}  // namespace

c10::intrusive_ptr<SavedTensor> PlainStore::save(const at::Tensor& tensor, SavedKind kind) {
  return c10::make_intrusive<PlainSavedTensor>(tensor, kind);
}

}  // namespace engram::memory
