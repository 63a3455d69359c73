#pragma once
/// \file
/// `engram --version`: what this binary was built from and what it finds on this machine.

#include <string>

namespace engram::cli {

/// The git commit the binary was built from (12 hex digits, "-dirty" with uncommitted changes).
const char* build_commit();

/// Lines of the form "name: value": Engram's commit, LibTorch's version, the CUDA, cuDNN and NCCL
/// versions compiled in (LibTorch's and Engram's CUDA sources'), and which GPUs are visible now
/// (or why none is).
std::string version_text();

}  // namespace engram::cli
