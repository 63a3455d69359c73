#pragma once
/// \file
/// Where layers keep what their backward pass needs (docs/ARCHITECTURE.md). A layer of nn/ never
/// holds a tensor for backward itself: it hands it to the current ActivationStore and keeps the
/// returned SavedTensor handle. Memory techniques are stores: the plain store here keeps the
/// tensor as it is; later stores compress, swap or drop and recompute what they are given.
///
/// \code
///   engram::memory::PlainStore store;
///   auto saved = store.save(x, engram::memory::SavedKind::activation);   // in forward
///   at::Tensor again = saved->load();                                    // in backward
///   saved->release();                                                    // once backward is done
/// \endcode
///
/// A saved activation is detached (no autograd history, so a layer may save its own output without
/// a reference cycle) but shares storage and version counter with the original; a saved parameter
/// is the parameter itself (a leaf: the layer's backward accumulates into its .grad). load()
/// throws std::logic_error if the tensor was modified in place since it was saved, or after
/// release().
///
/// Stores: PlainStore (here), CompressingStore (memory/CompressingStore.h: ReLU outputs as bitmap
/// plus nonzero values, one copy shared by the ReLU and the layers that consume its output),
/// SwapStore (memory/SwapStore.h: the saved tensors of chosen units moved to a spill file after
/// their forward and read back before their backward; wraps either of the others).

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

namespace engram::memory {

/// What a saved tensor is, so a store can treat each kind differently (a swap store moves
/// activations out of memory but never parameters).
enum class SavedKind : std::uint8_t {
  activation,  ///< produced in forward; dies with the backward pass
  /// An activation that is the output of a ReLU (every element >= 0 or NaN, many exactly +0.0):
  /// what a compressing store (memory/CompressingStore.h) compresses. Other stores treat it as
  /// an activation.
  relu_output,
  parameter,  ///< a leaf the optimizer updates; alive anyway; load() returns the leaf itself
  other,      ///< small bookkeeping tensors (indices, statistics)
};

/// A handle to one saved tensor, stored in an autograd context (an IValue capsule).
class SavedTensor : public torch::CustomClassHolder {
 public:
  ~SavedTensor() override = default;
  /// The tensor as it was saved.
  virtual at::Tensor load() = 0;
  /// Drops the store's copy; load() afterwards throws.
  virtual void release() = 0;
  /// Bytes the store holds for this tensor now (0 once released).
  virtual std::int64_t stored_bytes() const = 0;

  /// For a store that moves saved data out of memory and back (memory/SwapStore.h): hands over
  /// the tensors that hold this handle's data now, which the handle then no longer references
  /// (empty: nothing movable, e.g. a parameter or a released handle). put_buffers() gives back
  /// tensors with the same sizes, strides, dtypes and bits, in the same order, before the next
  /// load(). The default moves nothing.
  virtual std::vector<at::Tensor> take_buffers() { return {}; }
  virtual void put_buffers(std::vector<at::Tensor> buffers) { (void)buffers; }
};

class ActivationStore {
 public:
  virtual ~ActivationStore() = default;
  /// Keeps `tensor` for a later backward pass.
  virtual c10::intrusive_ptr<SavedTensor> save(const at::Tensor& tensor, SavedKind kind) = 0;
  /// A short name for reports ("plain", ...).
  virtual const char* name() const = 0;
};

/// Keeps every tensor as it is: the baseline every technique is measured against.
class PlainStore : public ActivationStore {
 public:
  c10::intrusive_ptr<SavedTensor> save(const at::Tensor& tensor, SavedKind kind) override;
  const char* name() const override { return "plain"; }
};

}  // namespace engram::memory
