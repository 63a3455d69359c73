#include "common/AtomicFile.h"
#include "memory/MemoryTracker.h"

#include <nlohmann/json.hpp>

#include <set>

namespace engram::memory {
namespace {

using Json = nlohmann::ordered_json;  // keeps the tags in enum order, so the stacking is stable

constexpr int kPid = 1;

double micros(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

Json live_counter(double ts, const std::array<std::int64_t, kNumTags>& live_by_tag) {
  Json args = Json::object();
  for (std::size_t t = 0; t < kNumTags; ++t) args[tag_name(static_cast<Tag>(t))] = live_by_tag[t];
  return Json{{"name", "live bytes"}, {"ph", "C"}, {"ts", ts}, {"pid", kPid}, {"args", args}};
}

}  // namespace

void write_chrome_trace(const std::string& path, const MemoryWindow& window,
                        const std::string& process_name) {
  Json events = Json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"args", {{"name", process_name}}}});
  std::set<std::uint64_t> threads;
  for (const Span& span : window.spans) threads.insert(span.thread);
  for (const std::uint64_t thread : threads) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", thread},
                      {"args", {{"name", "thread " + std::to_string(thread)}}}});
  }
  for (const Span& span : window.spans) {
    events.push_back({{"name", span.name},
                      {"cat", span.category},
                      {"ph", "X"},
                      {"ts", micros(span.begin_ns)},
                      {"dur", micros(span.end_ns - span.begin_ns)},
                      {"pid", kPid},
                      {"tid", span.thread}});
  }
  std::array<std::int64_t, kNumTags> live = window.start_live_by_tag;
  events.push_back(live_counter(0.0, live));
  for (const MemoryEvent& event : window.events) {
    live[static_cast<std::size_t>(event.tag)] += event.bytes;
    events.push_back(live_counter(micros(event.time_ns), live));
  }
  // Hold the last value to the end of the window.
  events.push_back(live_counter(micros(window.duration_ns), live));

  const Json trace{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  AtomicFile file(path);
  file.stream() << trace.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
  file.commit();
}

}  // namespace engram::memory
