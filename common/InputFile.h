#pragma once
/// \file
/// Checks on a file a command is about to read. A folder opens for reading like a file and fails
/// only at the first read, with a message that names neither the file nor the option
/// ("basic_filebuf::underflow error reading the file: Is a directory") or reads as an empty file.
///
/// \code
///   engram::refuse_folder(path, "model file");   // "model file 'runs/' is a folder, not a file"
///   std::ifstream in(path, std::ios::binary);
/// \endcode

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace engram {

/// Throws std::runtime_error ("WHAT 'PATH' is a folder, not a file") when `path` names a folder.
inline void refuse_folder(const std::string& path, const std::string& what) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw std::runtime_error(what + " '" + path + "' is a folder, not a file");
}

}  // namespace engram
