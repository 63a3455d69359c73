#pragma once
/// \file
/// Writes a file so that readers never see it half-written: the content goes to a temporary file in
/// the same directory, which is renamed over the target only after a successful close.
///
/// \code
///   engram::AtomicFile out("model.pt");
///   out.stream() << data;
///   out.commit();   // without commit() the temporary file is removed and the target is untouched
/// \endcode

#include <fstream>
#include <string>

namespace engram {

class AtomicFile {
 public:
  /// Opens a temporary file beside `path`; throws std::runtime_error if it cannot be created.
  explicit AtomicFile(std::string path, bool binary = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return stream_; }
  const std::string& temporary_path() const { return temp_path_; }
  /// Flushes, closes and renames into place; throws std::runtime_error on any I/O failure.
  void commit();

 private:
  std::string path_;
  std::string temp_path_;
  std::ofstream stream_;
  bool committed_ = false;
};

/// Writes `content` to `path` atomically.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace engram
