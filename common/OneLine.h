#pragma once
/// \file
/// A library's error message on the one line Engram's errors take.
///
/// \code
///   engram::one_line("NCCL error in: pg.cpp:89, remote process exited\nLast error:\n  x");
///   // "NCCL error in: pg.cpp:89, remote process exited Last error: x"
/// \endcode

#include <cstddef>
#include <string>

namespace engram {

/// `message` on one line: its lines trimmed and joined by one space, blank ones dropped. A
/// library's message may give its cause after the first line: NCCL's "NCCL error in: file:line,
/// unhandled system error" goes on with "Last error:" and what the system said.
inline std::string one_line(const std::string& message) {
  const char* const blank = " \t\r";
  std::string joined;
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    const std::size_t first = message.find_first_not_of(blank, start);
    if (first != std::string::npos && first < end) {
      const std::size_t last = message.find_last_not_of(blank, end - 1);
      if (!joined.empty()) joined += ' ';
      joined.append(message, first, last - first + 1);
    }
    start = end + 1;
  }
  return joined;
}

}  // namespace engram
