#include "common/AtomicFile.h"

#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace engram {

AtomicFile::AtomicFile(std::string path, bool binary)
    : path_(std::move(path)), temp_path_(path_ + ".tmp." + std::to_string(::getpid())) {
  stream_.open(temp_path_, binary ? std::ios::out | std::ios::binary | std::ios::trunc
                                  : std::ios::out | std::ios::trunc);
  if (!stream_) {
    throw std::runtime_error("cannot write '" + path_ + "': " + std::strerror(errno));
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    stream_.close();
    std::remove(temp_path_.c_str());
  }
}

void AtomicFile::commit() {
  stream_.flush();
  const bool ok = static_cast<bool>(stream_);
  stream_.close();
  if (!ok || stream_.fail()) {
    std::remove(temp_path_.c_str());
    committed_ = true;
    throw std::runtime_error("writing '" + path_ + "' failed");
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
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
