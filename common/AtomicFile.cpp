#include "common/AtomicFile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace engram {

AtomicFile::AtomicFile(std::string path, bool binary) : path_(std::move(path)) {
  struct stat target {};
  if (::stat(path_.c_str(), &target) == 0) {
    if (S_ISDIR(target.st_mode))
      throw std::runtime_error("cannot write '" + path_ + "': it is a folder");
    in_place_ = !S_ISREG(target.st_mode);
  }
  temp_path_ = in_place_ ? path_ : path_ + ".tmp." + std::to_string(::getpid());
  errno = 0;
  stream_.open(temp_path_, binary ? std::ios::out | std::ios::binary | std::ios::trunc
                                  : std::ios::out | std::ios::trunc);
  if (!stream_) {
    throw std::runtime_error("cannot write '" + path_ + "': " + std::strerror(errno));
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
  if (!in_place_ && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp_path_.c_str());
    committed_ = true;
    throw std::runtime_error("cannot rename into '" + path_ + "': " + reason);
  }
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFile file(path);
  file.stream() << content;
  file.commit();
}

}  // namespace engram
