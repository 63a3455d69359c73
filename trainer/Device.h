#pragma once
/// \file
/// Where a model trains and runs: the device that options name as "cpu", "cuda" (the current
/// CUDA device, index 0 unless CUDA_VISIBLE_DEVICES says otherwise) or "cuda:N". Options hold
/// the name (plain strings, so that the command line needs no torch); a model's train, eval and
/// run functions resolve it once, before any work, and build their model and batches there.
///
/// \code
///   engram::trainer::check_device_name(options.device, "device");   // InvalidOption: syntax
///   c10::Device device = engram::trainer::resolve_device(options.device);  // UsageError: no GPU
///   model->to(device);
/// \endcode

#include <c10/core/Device.h>

#include <string>

namespace engram::trainer {

/// Throws InvalidOption(`field`) unless `name` is "cpu", "cuda" or "cuda:N" (N a device index).
/// Needs no GPU: what `name` asks for is checked by resolve_device().
void check_device_name(const std::string& name, const std::string& field = "device");

/// The device `name` names (check_device_name's syntax). Throws UsageError naming what is
/// missing when `name` asks for CUDA and this process sees no CUDA device (none visible, or the
/// CUDA driver absent), or for an index beyond the devices it sees; InvalidOption(`field`) for a
/// malformed name. "cuda" resolves to an index (cuda:0).
c10::Device resolve_device(const std::string& name, const std::string& field = "device");

/// The number of CUDA devices this process sees (0 without a driver or GPU).
int cuda_device_count();

/// The device's name for reports: "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3)".
std::string describe_device(const c10::Device& device);

/// Makes CUDA computation repeat itself bit for bit where it can: cuDNN's deterministic
/// algorithms without benchmark mode, ATen's deterministic algorithms (an operation with none
/// throws, naming itself), and cuBLAS's fixed workspace (CUBLAS_WORKSPACE_CONFIG, set before
/// cuBLAS starts when the environment does not set it). On the CPU, computation repeats itself
/// already (one thread order per run); this changes nothing there but the flags.
void make_deterministic();

}  // namespace engram::trainer
