#include "fuzz/FuzzSupport.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace engram::fuzz {

std::string bytes_as_file(const std::uint8_t* data, std::size_t size) {
  // /dev/shm when there is one: the fuzzer writes this file millions of times.
  static const std::string path = (std::filesystem::is_directory("/dev/shm")
                                       ? std::string("/dev/shm")
                                       : std::filesystem::temp_directory_path().string()) +
                                  "/engram-fuzz-" + std::to_string(::getpid()) + ".input";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) throw std::runtime_error("fuzz: cannot write " + path);
  return path;
}

}  // namespace engram::fuzz
