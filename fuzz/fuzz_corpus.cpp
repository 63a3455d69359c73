// Code corpora (engram data code's JSON lines, read by train and eval tbcnn): read_corpus on any
// bytes.
#include "datasets/CodeCorpus.h"
#include "fuzz/FuzzSupport.h"

#include <exception>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = engram::fuzz::bytes_as_file(data, size);
  try {
    engram::datasets::read_corpus(path);
  } catch (const std::exception&) {
  }
  return 0;
}
