#pragma once
/// \file
/// Test support: a fresh directory per test, removed with everything in it afterwards, and small
/// file helpers. Header-only and torch-free so that every test executable can use it cheaply.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::testing {

/// A unique directory under the system temporary directory; removed recursively on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "engram-test-XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buffer.data();
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  /// `name` inside the directory.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  /// Names of the entries in the directory, sorted.
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path);
}

/// The lines of `text`, without their '\n'.
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string::size_type start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

/// Expects `statement` to throw `Exception` whose what() contains `needle`.
#define ENGRAM_EXPECT_THROW_WITH(statement, Exception, needle)          \
  do {                                                                  \
    try {                                                               \
      statement;                                                        \
      ADD_FAILURE() << "expected " #Exception " from: " #statement;     \
    } catch (const Exception& e) {                                      \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)  \
          << "message '" << e.what() << "' lacks '" << (needle) << "'"; \
    }                                                                   \
  } while (false)

}  // namespace engram::testing
