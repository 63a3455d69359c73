#pragma once
/// \file
/// Where the tracking CPU allocator (memory/MemoryTracker.cpp) takes its blocks from when not
/// from c10's heap: one process-wide source, consulted for every allocation (ArenaReuse, the
/// fixed-structure reuse of memory/ArenaReuse.h). Internal to memory/.

#include <cstddef>

namespace engram::memory::detail {

class BlockSource {
 public:
  virtual ~BlockSource() = default;
  /// A block of `bytes` (64-byte aligned) for the calling thread, or nullptr: the tracker then
  /// allocates from c10's heap and never calls release() for it.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Gives back a block allocate() returned, from any thread.
  virtual void release(void* block) = 0;
};

/// Installs the process's source (nullptr: none). A source must live until the process ends:
/// blocks it gave may be released at any time after.
void set_block_source(BlockSource* source);

}  // namespace engram::memory::detail
