#pragma once
/// \file
/// Checks on the files a command reads and writes. A folder opens for reading like a file and
/// fails only at the first read, with a message that names neither the file nor the option
/// ("basic_filebuf::underflow error reading the file: Is a directory") or reads as an empty file;
/// and an output that is one of the inputs destroys it (`train npi --data a.jsonl --out a.jsonl`).
///
/// \code
///   engram::refuse_folder(path, "model file");   // "model file 'runs/' is a folder, not a file"
///   std::ifstream in(path, std::ios::binary);
///   if (engram::same_file(out_path, data_path)) ...
/// \endcode

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace engram {

/// The folder for temporary files: $TMPDIR (or TMP, TEMP, TEMPDIR, as
/// std::filesystem::temp_directory_path reads them), else /tmp, also when the variable is set but
/// empty or names no folder, where temp_directory_path() alone throws.
inline std::filesystem::path temporary_folder() {
  std::error_code error;
  std::filesystem::path base = std::filesystem::temp_directory_path(error);
  if (error || base.empty()) base = "/tmp";
  return base;
}

/// Throws std::runtime_error ("WHAT 'PATH' is a folder, not a file") when `path` names a folder.
inline void refuse_folder(const std::string& path, const std::string& what) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw std::runtime_error(what + " '" + path + "' is a folder, not a file");
}

/// `path` made absolute and normal, its existing part with links resolved: two spellings of one
/// place compare equal even when the file does not exist yet.
inline std::filesystem::path normal_path(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::weakly_canonical(std::filesystem::absolute(path, ignored), ignored);
}

/// Whether `a` and `b` name one file: the same existing file (links and other spellings of its
/// path included), or, when one does not exist yet, the same normal_path.
inline bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code error;
  if (std::filesystem::exists(a, error) && std::filesystem::exists(b, error))
    return std::filesystem::equivalent(a, b, error);
  return normal_path(a) == normal_path(b);
}

}  // namespace engram
