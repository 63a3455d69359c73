// Trace files (engram data gen's JSON lines, read by train npi): read_trace_file on any bytes.
#include "datasets/TraceFile.h"
#include "fuzz/FuzzSupport.h"

#include <exception>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = engram::fuzz::bytes_as_file(data, size);
  try {
    engram::datasets::read_trace_file(path);
  } catch (const std::exception&) {
  }
  return 0;
}
