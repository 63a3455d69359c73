#pragma once
/// \file
/// Writes a file so that readers never see it half-written: the content goes to a temporary file in
/// the same directory, which is renamed over the target only after a successful close.
///
/// What the target is decides the rest. A folder is refused at once. A symbolic link keeps being
/// a link: the file it points to is replaced. A target that is not a regular file (/dev/null, a
/// pipe, a terminal), or a link into /proc (/dev/stdout, /proc/self/fd/N: a shell's redirection)
/// is written in place, since renaming over it would replace the device, the pipe or the link
/// with a file, and its reader would see nothing.
///
/// \code
///   engram::check_writable("model.pt");  // before the work: a folder, a missing folder, no access
///   ...
///   engram::AtomicFile out("model.pt");
///   out.stream() << data;
///   out.commit();   // without commit() the temporary file is removed and the target is untouched
/// \endcode
///
/// SIGINT or SIGTERM before commit() removes the temporary file too (common/RemoveOnInterrupt.h)
/// and names the target on stderr, left as it was.
/// A replaced file keeps its permissions.

#include <fstream>
#include <memory>
#include <string>

namespace engram {

class RemoveOnInterrupt;

class AtomicFile {
 public:
  /// Opens a temporary file beside the target (or the target itself when it is written in
  /// place); throws std::runtime_error if it cannot be created or `path` is a folder.
  explicit AtomicFile(std::string path, bool binary = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return stream_; }
  /// Where the content goes until commit(): the target itself when it is written in place.
  const std::string& temporary_path() const { return temp_path_; }
  /// Flushes, closes and renames into place; throws std::runtime_error on any I/O failure.
  void commit();

 private:
  std::string path_;    ///< as given, for messages
  std::string target_;  ///< what is replaced: `path_`, or the file a link of it points to
  std::string temp_path_;
  std::ofstream stream_;
  bool in_place_ = false;  ///< no temporary file (a device, a pipe, a link into /proc)
  bool committed_ = false;
  std::unique_ptr<RemoveOnInterrupt> interrupt_;  ///< the temporary file, while it is one
};

/// Writes `content` to `path` atomically.
void write_file_atomically(const std::string& path, const std::string& content);

/// Throws std::runtime_error unless AtomicFile could write `path` now: not a folder, its folder
/// there and writable. Commands call it before their work so that a bad output path fails at
/// once, not after it. It writes nothing to a target written in place (opening a pipe and
/// closing it would end its reader), and leaves no file behind.
void check_writable(const std::string& path);

}  // namespace engram
