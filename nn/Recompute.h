#pragma once
/// \file
/// Recomputation (activation checkpointing, docs/ARCHITECTURE.md): run a unit of a network keeping
/// only its input; during backward, run the unit's forward again with gradients and backpropagate
/// through that rerun. Memory for the unit's saved activations is needed only while its own
/// backward runs.
///
/// \code
///   // One unit per residual block of a ResNet (resnet/ResNet.h):
///   at::Tensor h = images;
///   for (auto& unit : net->units()) {
///     // Capture by value: the unit runs again during backward, when this loop is long gone.
///     h = engram::nn::recompute([unit](const at::Tensor& x) mutable { return unit.forward(x); },
///                               h, unit.ptr()->parameters());
///   }
///   auto loss = criterion(net->head(h));
///   loss.backward();                 // each unit reruns its forward just before its backward
/// \endcode
///
/// What makes the rerun the same computation as the first run, so gradients are bit-identical to
/// running the unit plainly:
/// - the CPU random generator's state, and the CUDA device's when the input is on one, is saved
///   before the first run and restored for the rerun (and put back afterwards), so dropout-like
///   layers draw the same numbers;
/// - BatchNorm (nn/BatchNorm2d.h) does not update its running statistics during the rerun
///   (torch.utils.checkpoint updates them twice) and normalizes with the batch's
///   own statistics, as the first run did;
/// - the rerun uses the first run's runtime (nn/Runtime.h: its activation store, gradient
///   scheduler, replica sum and parameter gate), whichever thread backward runs on.
/// The rerun's backward runs inside this unit's backward (a nested, reentrant backward pass, as
/// torch.utils.checkpoint's), so its weight-gradient tasks reach the scheduler there.

#include "memory/ActivationStore.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace engram::nn {

/// Runs `unit(input)` keeping only `input` (see the file comment). `parameters` are the unit's
/// trainable tensors: the output requires a gradient when any of them does, even if `input`
/// does not (the first unit of a network). The output is a new tensor, never `input` itself.
/// `unit` is kept until backward: it must not refer to anything that dies before.
/// `input_kind`: how the kept input is saved (memory::SavedKind::relu_output when it is a ReLU's
/// output, so a compressing store keeps it compressed).
at::Tensor recompute(const std::function<at::Tensor(const at::Tensor&)>& unit,
                     const at::Tensor& input, const std::vector<at::Tensor>& parameters,
                     memory::SavedKind input_kind = memory::SavedKind::activation);

/// True on the calling thread while a unit's forward is being rerun for its backward.
bool is_recomputing();

/// The state of torch's default CPU generator (a copy), and setting it back, under the
/// generator's lock: what a recomputed unit replays with, and what a training checkpoint saves.
at::Tensor cpu_rng_state();
void set_cpu_rng_state(const at::Tensor& state);

}  // namespace engram::nn
