// Checkpoints (model files, primitive libraries, training states share one format): load_checkpoint
// on any bytes.
#include "fuzz/FuzzSupport.h"
#include "trainer/Checkpoint.h"

#include <exception>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = engram::fuzz::bytes_as_file(data, size);
  try {
    engram::trainer::load_checkpoint(path, "npi");
  } catch (const std::exception&) {
  }
  return 0;
}
