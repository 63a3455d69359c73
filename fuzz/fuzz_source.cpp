// Source files through the tree-sitter front end (engram data code, encode, classify): the first
// byte picks Python, C or C++, the rest is the file; parse_code with the corpus's node limit.
#include "datasets/CodeTree.h"

#include <exception>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using engram::datasets::Language;
  if (size == 0) return 0;
  static const Language languages[] = {Language::kPython, Language::kC, Language::kCpp};
  const Language language = languages[data[0] % 3];
  const std::string source(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (!engram::datasets::is_text(source)) return 0;  // data code skips binary files
    const auto tree = engram::datasets::parse_code(language, source, /*max_nodes=*/20000);
    for (int node = 0; node < tree.size(); ++node) tree.children(node);
  } catch (const std::exception&) {
  }
  return 0;
}
