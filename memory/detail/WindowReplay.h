#pragma once
/// \file
/// What the CPU tracker (memory/MemoryTracker.cpp) and the CUDA ledger
/// (memory/CudaMemoryTracker.cpp) share when a window closes: the retags made while it was open
/// and the replay of its events into peak and activation-peak bytes under their final tags.
/// Internal to memory/.

#include "memory/MemoryTracker.h"

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace engram::memory::detail {

/// Whether bytes under `tag` outlive a step (parameters, gradients, optimizer state): the
/// activation peak leaves them out.
inline bool is_persistent(Tag tag) {
  return tag == Tag::parameter || tag == Tag::gradient || tag == Tag::optimizer_state;
}

/// An allocation retagged while a window was open: its tag when the window began (or when it was
/// allocated in it), its final tag, and its bytes.
struct WindowRetag {
  Tag before = Tag::activation;
  Tag after = Tag::activation;
  std::int64_t bytes = 0;
};
/// A window's retags by allocation id.
using WindowRetags = std::unordered_map<std::uint64_t, WindowRetag>;

/// Notes that allocation `id` (of `bytes`) went from tag `before` to `after` in an open window;
/// a second retag of it keeps the first one's `before`.
void note_retag(WindowRetags& retags, std::uint64_t id, Tag before, Tag after,
                std::int64_t bytes);

/// Gives a closed window its final tags: an allocation from before it (an id below `first_id`)
/// counts under its final tag from the window's start, and each event under its allocation's
/// final tag; then sorts the spans by their end.
void apply_retags(MemoryWindow& window, const WindowRetags& retags, std::uint64_t first_id);

/// The live bytes of persistent tags when `window` began.
std::int64_t persistent_at_start(const MemoryWindow& window);

/// Replays `window`'s events from its start, setting peak_bytes and activation_peak_bytes.
/// `before(i)` runs before event i and once after the last (i = events.size()); `at_new_peak()`
/// runs after each event that takes live bytes above every earlier instant of the window.
template <class Before, class AtNewPeak>
void replay_peaks(MemoryWindow& window, Before&& before, AtNewPeak&& at_new_peak) {
  std::int64_t live = window.start_live_bytes;
  std::int64_t persistent = persistent_at_start(window);
  window.peak_bytes = live;
  window.activation_peak_bytes = live - persistent;
  for (std::size_t i = 0; i < window.events.size(); ++i) {
    before(i);
    const MemoryEvent& event = window.events[i];
    live += event.bytes;
    if (is_persistent(event.tag)) persistent += event.bytes;
    if (live > window.peak_bytes) {
      window.peak_bytes = live;
      at_new_peak();
    }
    if (live - persistent > window.activation_peak_bytes)
      window.activation_peak_bytes = live - persistent;
  }
  before(window.events.size());
}

}  // namespace engram::memory::detail
