#include "common/RemoveOnInterrupt.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace engram {
namespace {

constexpr int kSlots = 64;
constexpr std::size_t kPathBytes = 4096;
constexpr std::size_t kMessageBytes = 2 * kPathBytes;
constexpr int kFolderDepth = 16;  ///< levels of folders below a registered folder that are removed

/// A slot's life: free -> filled (by a registration) -> ready -> free (its owner's destructor),
/// or ready -> removing (the handler, which then ends the process).
enum SlotState : int { kFree, kFilling, kReady, kRemoving };

struct Slot {
  std::atomic<int> state{kFree};
  bool folder = false;
  char path[kPathBytes] = {};
  char message[kMessageBytes] = {};
  std::size_t message_length = 0;
};

Slot slots[kSlots];

/// One record of the kernel's getdents64.
struct DirectoryEntry {
  std::uint64_t inode;
  std::int64_t offset;
  unsigned short length;
  unsigned char type;
  char name[1];
};

bool is_dot_or_dot_dot(const char* name) {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/// Removes what is in the folder open as `folder` (closing it), folders to `depth` levels, with
/// system calls only. Removing entries while reading may hide others from the read, so it reads
/// again from the start until a pass finds nothing or removes nothing.
void remove_contents(int folder, int depth) {
  alignas(8) char buffer[4096];
  for (int pass = 0; pass < 64; ++pass) {
    if (::lseek(folder, 0, SEEK_SET) < 0) break;
    bool found = false, removed = false;
    long n = 0;
    while ((n = ::syscall(SYS_getdents64, folder, buffer, sizeof buffer)) > 0) {
      for (long at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const DirectoryEntry*>(buffer + at);
        at += entry->length;
        if (is_dot_or_dot_dot(entry->name)) continue;
        found = true;
        bool is_folder = entry->type == DT_DIR;
        if (entry->type == DT_UNKNOWN) {
          struct stat status {};
          is_folder = ::fstatat(folder, entry->name, &status, AT_SYMLINK_NOFOLLOW) == 0 &&
                      S_ISDIR(status.st_mode);
        }
        if (is_folder && depth > 0) {
          const int inner =
              ::openat(folder, entry->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (inner >= 0) remove_contents(inner, depth - 1);
        }
        if (::unlinkat(folder, entry->name, is_folder ? AT_REMOVEDIR : 0) == 0) removed = true;
      }
    }
    if (!found || !removed) break;
  }
  ::close(folder);
}

void remove_registered(int signal) {
  const int saved_errno = errno;
  for (Slot& slot : slots) {
    int ready = kReady;
    if (!slot.state.compare_exchange_strong(ready, kRemoving, std::memory_order_acquire)) continue;
    if (slot.folder) {
      const int folder = ::open(slot.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (folder >= 0) remove_contents(folder, kFolderDepth);
      ::rmdir(slot.path);
    } else {
      ::unlink(slot.path);
    }
    for (std::size_t written = 0; written < slot.message_length;) {
      const ssize_t w =
          ::write(STDERR_FILENO, slot.message + written, slot.message_length - written);
      if (w <= 0) break;
      written += static_cast<std::size_t>(w);
    }
  }
  errno = saved_errno;
  // The action is the default one again (SA_RESETHAND): the signal ends the process, as it would
  // have without this handler.
  ::raise(signal);
}

/// Installs the handler for SIGINT and SIGTERM where their action is the default one.
void install_where_default() {
  for (const int signal : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction action {};
    action.sa_handler = remove_registered;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGINT);  // one removal at a time
    sigaddset(&action.sa_mask, SIGTERM);
    action.sa_flags = SA_RESETHAND;
    ::sigaction(signal, &action, nullptr);
  }
}

}  // namespace

RemoveOnInterrupt::RemoveOnInterrupt(const std::string& path, bool folder,
                                     const std::string& output) {
  if (path.empty() || path.size() >= kPathBytes) return;
  std::string message;
  if (!output.empty())
    message = "engram: interrupted while writing '" + output + "': it is left as it was\n";
  if (message.size() > kMessageBytes) message.clear();
  for (int i = 0; i < kSlots; ++i) {
    int free = kFree;
    if (!slots[i].state.compare_exchange_strong(free, kFilling, std::memory_order_acquire))
      continue;
    Slot& slot = slots[i];
    slot.folder = folder;
    std::memcpy(slot.path, path.c_str(), path.size() + 1);
    std::memcpy(slot.message, message.data(), message.size());
    slot.message_length = message.size();
    slot.state.store(kReady, std::memory_order_release);
    slot_ = i;
    break;
  }
  install_where_default();
}

RemoveOnInterrupt::~RemoveOnInterrupt() {
  if (slot_ < 0) return;
  int ready = kReady;  // not while the handler removes it: the process ends then
  slots[slot_].state.compare_exchange_strong(ready, kFree, std::memory_order_release);
}

}  // namespace engram
