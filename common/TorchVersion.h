#pragma once

/// The LibTorch version the build compiles against, as one comparable number, for the few places
/// whose code must differ between LibTorch 1.13 (Debian 12) and 2.x (a PyTorch wheel). Each
/// module keeps its differences in one header (memory/TorchCompat.h); nothing else tests versions.
/// Header-only; include it only from targets that link torch.
///
/// Known differences and where they live:
/// - c10d: in 1.13 ProcessGroupGloo derives from c10d::ProcessGroup; from 2.0 it derives from
///   c10d::Backend, and a ProcessGroup holds one Backend per device type. dist/Communicator.cpp
///   uses the backend directly through one alias behind ENGRAM_TORCH_AT_LEAST(2, 0).

#include <torch/version.h>

#define ENGRAM_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)
#define ENGRAM_TORCH_AT_LEAST(major, minor) (ENGRAM_TORCH_VERSION >= (major) * 100 + (minor))
