#include "common/AtomicFile.h"

#include "common/RemoveOnInterrupt.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace engram {
namespace {

/// Where writing `path` goes, and whether it is written in place.
struct Target {
  std::string path;
  bool in_place = false;
};

/// Follows `path`'s symbolic links (a bounded number) to the file they name; a link into /proc
/// (/dev/stdout -> /proc/self/fd/1) is a redirection, written in place. Throws for a folder.
Target resolve(const std::string& path) {
  namespace fs = std::filesystem;
  Target t{path, false};
  for (int hops = 0; hops < 40; ++hops) {
    struct stat link {};
    if (::lstat(t.path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) break;
    std::error_code error;
    fs::path next = fs::read_symlink(t.path, error);
    if (error) break;
    if (next.is_relative()) next = fs::path(t.path).parent_path() / next;
    if (next.string().rfind("/proc/", 0) == 0) {
      t.in_place = true;
      break;
    }
    t.path = next.lexically_normal().string();
  }
  struct stat target {};
  if (::stat(t.path.c_str(), &target) == 0) {
    if (S_ISDIR(target.st_mode))
      throw std::runtime_error("cannot write '" + path + "': it is a folder");
    t.in_place = t.in_place || !S_ISREG(target.st_mode);
  }
  return t;
}

std::string temporary_beside(const std::string& target) {
  return target + ".tmp." + std::to_string(::getpid());
}

}  // namespace

AtomicFile::AtomicFile(std::string path, bool binary) : path_(std::move(path)) {
  const Target t = resolve(path_);
  target_ = t.path;
  in_place_ = t.in_place;
  temp_path_ = in_place_ ? target_ : temporary_beside(target_);
  errno = 0;
  stream_.open(temp_path_, binary ? std::ios::out | std::ios::binary | std::ios::trunc
                                  : std::ios::out | std::ios::trunc);
  if (!stream_) {
    throw std::runtime_error("cannot write '" + path_ + "': " + std::strerror(errno));
  }
  if (!in_place_) {
    interrupt_ = std::make_unique<RemoveOnInterrupt>(temp_path_, false, path_);
    // A file replaced keeps its permissions (a private model stays private).
    struct stat replaced {};
    if (::stat(target_.c_str(), &replaced) == 0)
      ::chmod(temp_path_.c_str(), replaced.st_mode & 07777);
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    stream_.close();
    if (!in_place_) std::remove(temp_path_.c_str());
  }
}

void AtomicFile::commit() {
  errno = 0;
  stream_.flush();
  const bool ok = static_cast<bool>(stream_);
  stream_.close();
  if (!ok || stream_.fail()) {
    const std::string reason = errno != 0 ? std::string(": ") + std::strerror(errno) : "";
    if (!in_place_) std::remove(temp_path_.c_str());
    committed_ = true;
    throw std::runtime_error("writing '" + path_ + "' failed" + reason);
  }
  if (!in_place_ && std::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp_path_.c_str());
    committed_ = true;
    throw std::runtime_error("cannot rename into '" + path_ + "': " + reason);
  }
  committed_ = true;
  interrupt_.reset();
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFile file(path);
  file.stream() << content;
  file.commit();
}

void check_writable(const std::string& path) {
  const Target t = resolve(path);
  if (t.in_place) {
    if (::access(t.path.c_str(), W_OK) != 0)
      throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
    return;
  }
  // The temporary file AtomicFile would create, created and removed.
  AtomicFile probe(path, /*binary=*/true);
}

}  // namespace engram
