#pragma once
/// \file
/// Resumable training: everything a training session's next step depends on, saved to one
/// checkpoint file (trainer/Checkpoint.h: atomic, checksummed) and loaded back, so that a run
/// interrupted at step k and resumed computes the same bytes as a run never interrupted.
///
/// The state is the parameters, the optimizer's moments and step counts, the batch sampler
/// (generator, epoch order, position), torch's CPU generator, and the loop's own bookkeeping
/// (the step, the partial sums of the current metrics window, how many metrics lines were
/// written). It is checked on load against the run that resumes it: the same model and data
/// (TrainingOptions::identity, set by the model), batch, learning rate, optimizer (with SGD's
/// momentum), clip, seed and world
/// size, or a FormatError that says what differs.
///
/// \code
///   engram::trainer::LoopState loop{/*step=*/120};
///   engram::trainer::save_training_state("run.ckpt", session, loop);
///   engram::trainer::LoopState back = engram::trainer::load_training_state("run.ckpt", session);
/// \endcode

#include <map>
#include <string>

namespace engram::trainer {

class TrainingSession;

/// The training loop's own state at the end of a step.
struct LoopState {
  long step = 0;                       ///< steps done
  std::map<std::string, double> sums;  ///< metrics summed since the last metrics line
  int logged = 0;                      ///< steps in `sums`
  long metrics_lines = 0;              ///< metrics lines written so far
  double seconds = 0;                  ///< training seconds so far
};

/// Writes the session's state and `loop` to `path` atomically. Throws std::runtime_error on I/O
/// failure.
void save_training_state(const std::string& path, TrainingSession& session, const LoopState& loop);

/// Reads the state at `path` into `session` and returns the loop's. Throws std::runtime_error when
/// the file is missing, FormatError when it is corrupt, not a training state, or of another run
/// (model, data, batch, learning rate, optimizer, clip, seed or world size differ: the message
/// names which); nothing of the session changes then.
LoopState load_training_state(const std::string& path, TrainingSession& session);

/// "<bytes>:<fnv1a-64 hex>" of the file at `path`, for TrainingOptions::identity (a model's
/// training data). Throws std::runtime_error when it cannot be read.
std::string file_identity(const std::string& path);

}  // namespace engram::trainer
