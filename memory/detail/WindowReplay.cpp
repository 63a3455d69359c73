#include "memory/detail/WindowReplay.h"

#include <algorithm>

namespace engram::memory::detail {

void note_retag(WindowRetags& retags, std::uint64_t id, Tag before, Tag after,
                std::int64_t bytes) {
  auto [entry, inserted] = retags.try_emplace(id, WindowRetag{before, after, bytes});
  if (!inserted) entry->second.after = after;
}

void apply_retags(MemoryWindow& window, const WindowRetags& retags, std::uint64_t first_id) {
  for (const auto& [id, retag] : retags) {
    if (id >= first_id) continue;
    window.start_live_by_tag[static_cast<std::size_t>(retag.before)] -= retag.bytes;
    window.start_live_by_tag[static_cast<std::size_t>(retag.after)] += retag.bytes;
  }
  for (MemoryEvent& event : window.events) {
    const auto found = retags.find(event.allocation);
    if (found != retags.end()) event.tag = found->second.after;
  }
  std::stable_sort(window.spans.begin(), window.spans.end(),
                   [](const Span& a, const Span& b) { return a.end_ns < b.end_ns; });
}

std::int64_t persistent_at_start(const MemoryWindow& window) {
  std::int64_t persistent = 0;
  for (std::size_t t = 0; t < kNumTags; ++t) {
    if (is_persistent(static_cast<Tag>(t))) persistent += window.start_live_by_tag[t];
  }
  return persistent;
}

}  // namespace engram::memory::detail
