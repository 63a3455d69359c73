#pragma once
/// \file
/// What the fuzz targets share. Each target (fuzz/fuzz_*.cpp) defines LLVMFuzzerTestOneInput for
/// one parser of untrusted bytes and accepts any exception derived from std::exception as the
/// parser's answer to bad input; what the fuzzer looks for is everything else (a crash, a sanitizer
/// report, a hang, unbounded memory). Built with clang's libFuzzer (-DENGRAM_FUZZ=ON,
/// scripts/fuzz.sh) or, in every other build, against fuzz/ReplayMain.cpp, which runs the target
/// over the files of its corpus folder (the seeds and every crash found, kept as regressions): a
/// ctest per target.

#include <cstddef>
#include <cstdint>
#include <string>

namespace engram::fuzz {

/// The bytes written to a file of this process's own (the parsers read paths), rewritten on each
/// call; returns its path.
std::string bytes_as_file(const std::uint8_t* data, std::size_t size);

}  // namespace engram::fuzz
