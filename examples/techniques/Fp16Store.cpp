// A memory technique of your own, in one file: "fp16" keeps every float32 activation that the
// layers save for backward as float16, half the bytes, and hands backward a float32 copy. It is
// lossy (about three significant decimal digits), and registered as such: `engram bench memory`
// reports its gradient error against none beside its memory.
//
// Linked into `engram` by one line of the top-level CMakeLists.txt (ENGRAM_TECHNIQUE_SOURCES);
// the registration below puts it in the list every part of Engram reads
// (trainer/MemoryTechnique.h), so then
//   engram bench memory --workload resnet --techniques none,relu,fp16 --json fp16.json
//   engram train npi --task addition --data add.jsonl --out add.pt --memory fp16
// run it with no other change.
#include "memory/ActivationStore.h"
#include "trainer/MemoryTechnique.h"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace {

using engram::memory::SavedKind;
using engram::memory::SavedTensor;

/// One activation as float16; load() gives a float32 tensor of the same shape. As every store's
/// handle, load() refuses a tensor modified in place since it was saved (the original's version
/// counter moved), which backward must not read.
class HalfSavedTensor : public SavedTensor {
 public:
  HalfSavedTensor(at::Tensor half, const at::Tensor& original)
      : half_(std::move(half)),
        counter_(original.unsafeGetTensorImpl()->version_counter()),
        version_(original._version()) {}

  at::Tensor load() override {
    if (released_) throw std::logic_error("saved tensor loaded after release()");
    if (counter_.enabled() && counter_.current_version() != version_)
      throw std::logic_error(
          "a tensor saved for backward was modified in place after it was saved");
    return half_.to(at::kFloat);
  }
  void release() override {
    half_.reset();
    released_ = true;
  }
  std::int64_t stored_bytes() const override {
    return half_.defined() ? static_cast<std::int64_t>(half_.storage().nbytes()) : 0;
  }
  // A swap store (--memory fp16,swap) moves the half-precision copy out and back; a copy two
  // handles share (see Fp16Store) goes out and comes back once per handle, as two copies.
  std::vector<at::Tensor> take_buffers() override {
    if (released_ || !half_.defined()) return {};
    return {std::move(half_)};
  }
  void put_buffers(std::vector<at::Tensor> buffers) override {
    if (buffers.size() != 1) throw std::logic_error("fp16: one buffer expected back");
    half_ = std::move(buffers[0]);
  }

 private:
  at::Tensor half_;
  c10::VariableVersion counter_;
  std::int64_t version_;
  bool released_ = false;
};

/// Float32 activations as float16 (values beyond float16's range, 65504, become infinite);
/// parameters, bookkeeping and other dtypes as the plain store keeps them. A tensor saved twice
/// in a row (a ReLU's output, saved by the ReLU and by the layer that consumes it) shares one copy,
/// as the plain store's handles share the original; each handle counts it in stored_bytes().
class Fp16Store : public engram::memory::ActivationStore {
 public:
  c10::intrusive_ptr<SavedTensor> save(const at::Tensor& tensor, SavedKind kind) override {
    const bool activation = kind == SavedKind::activation || kind == SavedKind::relu_output;
    if (!activation || !tensor.defined() || tensor.scalar_type() != at::kFloat)
      return plain_.save(tensor, kind);
    at::Tensor half = copy_of_last(tensor);
    if (!half.defined()) {
      half = tensor.detach().to(at::kHalf);
      last_ = Last{TensorWeak(half.getIntrusivePtr()),
                   tensor.storage().getWeakStorageImpl(),
                   tensor.data_ptr(),
                   tensor.sizes().vec(),
                   tensor.strides().vec(),
                   tensor._version()};
    }
    return c10::make_intrusive<HalfSavedTensor>(std::move(half), tensor);
  }
  const char* name() const override { return "fp16"; }

 private:
  using TensorWeak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  /// The last tensor copied, by weak references: the store itself keeps no bytes alive.
  struct Last {
    TensorWeak half;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // a freed storage's address is reused
    const void* data;
    std::vector<std::int64_t> sizes, strides;
    std::int64_t version;
  };

  /// The half copy of `t` when `t` is the tensor saved last and unchanged since; else undefined.
  at::Tensor copy_of_last(const at::Tensor& t) const {
    if (!last_ || last_->data != t.data_ptr() || last_->version != t._version() ||
        last_->sizes != t.sizes().vec() || last_->strides != t.strides().vec())
      return {};
    const auto storage = last_->storage.lock();
    if (!storage || storage.get() != t.storage().unsafeGetStorageImpl()) return {};
    return at::Tensor(last_->half.lock());
  }

  engram::memory::PlainStore plain_;
  std::optional<Last> last_;
};

const engram::trainer::MemoryTechniqueRegistration kFp16(
    {"fp16", "float32 activations kept as float16 for backward",
     engram::trainer::TechniqueKind::store, /*lossless=*/false, /*in_all=*/false,
     [](const engram::trainer::MemoryOptions&) -> std::unique_ptr<engram::memory::ActivationStore> {
       return std::make_unique<Fp16Store>();
     }});

}  // namespace
