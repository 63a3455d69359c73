#pragma once
/// \file
/// Writes a file so that readers never see it half-written: the content goes to a temporary file in
/// the same directory, which is renamed over the target only after a successful close. A target
/// that exists and is not a regular file (/dev/null, a pipe, a terminal) is written in place, since
/// renaming over it would replace the device or pipe with a file; a folder is refused at once.
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
  /// Opens a temporary file beside `path` (or `path` itself when it is a device or a pipe);
  /// throws std::runtime_error if it cannot be created or `path` is a folder. Creating one and
  /// dropping it uncommitted is how commands check an output path before their work.
  explicit AtomicFile(std::string path, bool binary = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return stream_; }
  /// Where the content goes until commit(): `path` itself when it is written in place.
  const std::string& temporary_path() const { return temp_path_; }
  /// Flushes, closes and renames into place; throws std::runtime_error on any I/O failure.
  void commit();

 private:
  std::string path_;
  std::string temp_path_;
  std::ofstream stream_;
  bool in_place_ = false;  ///< the target is a device or a pipe: no temporary file
  bool committed_ = false;
};

/// Writes `content` to `path` atomically.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace engram
