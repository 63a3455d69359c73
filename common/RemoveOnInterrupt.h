#pragma once
/// \file
/// What a command is in the middle of writing, removed when SIGINT or SIGTERM ends it: a
/// temporary file that is not yet its output (AtomicFile), a folder being filled before it is
/// renamed into place (`data stdlib`), a private scratch folder (ScratchDir). Each registers here
/// while it exists. A handler, installed for a signal whose action is the default one (a signal
/// the process ignores, as a shell's background job ignores SIGINT, is left ignored), removes
/// them, writes a line per output on stderr, and ends the process by the same signal, so that the
/// shell still sees 128 + the signal.
///
/// Training installs its own handler while it runs (trainer/Trainer.cpp: it stops after the step,
/// saves the training state and exits 128 + signal by an exception, whose unwinding removes what
/// is registered); it gives this one back when the training ends.
///
/// \code
///   engram::RemoveOnInterrupt staging(out + ".tmp.partial", /*folder=*/true, out);
///   ... fill the folder, rename it to `out` ...
///   // the destructor unregisters it (removing nothing)
/// \endcode
///
/// The handler only makes system calls (unlink, the directory reads of a folder's removal,
/// write), as a signal handler must. At most 64 paths, each shorter than 4096 bytes, are
/// registered at once; a path beyond that is not (its owner still removes it on every way out
/// but a signal).

#include <string>

namespace engram {

class RemoveOnInterrupt {
 public:
  /// Registers `path` (a file; with `folder`, a folder removed with everything in it) until the
  /// destructor. `output`: the file or folder the user asked for, which the signal leaves as it
  /// was, named on stderr ("" for none: a scratch folder).
  RemoveOnInterrupt(const std::string& path, bool folder, const std::string& output = "");
  ~RemoveOnInterrupt();
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

  /// Whether the path found a place (see the file comment).
  bool registered() const { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

}  // namespace engram
