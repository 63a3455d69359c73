#pragma once
/// \file
/// Where a training step's backward spends its device time, stretch by stretch: the
/// input-gradient chain's kernels between weight-gradient tasks, and each task's own kernels.
/// The input of the one-GPU step model of `--ooo-streams 2` (parallel/OooPlan.h's
/// predict_two_stream_backward), measured on one stream with the device synchronised at each
/// task's start and end (nn::GradScheduler::time_kernels) and at the backward's ends, so that a
/// time is the kernels', not their launches'. The synchronisations make the profiled step
/// slower than a plain one; its stretches are what the model needs.
///
/// \code
///   engram::trainer::TrainingSession session(workload, options);        // one stream
///   session.step(examples);                                              // warm-up
///   auto profile = engram::trainer::profile_backward(session, examples);
///   double bound = engram::parallel::predict_two_stream_backward(profile.segments,
///                                                                profile.tail_chain);
/// \endcode

#include "parallel/OooPlan.h"

#include <cstddef>
#include <vector>

namespace engram::trainer {

class TrainingSession;

struct BackwardProfile {
  std::vector<parallel::BackwardSegment> segments;  ///< in backward order, seconds
  double tail_chain = 0;  ///< the chain's kernels after the last task, seconds
  double backward_seconds = 0;  ///< the whole backward (one stream, synchronised)
  double forward_seconds = 0;   ///< the forward, synchronised at its ends
  double step_seconds = 0;      ///< the whole profiled step (batch, forward, backward, update)
};

/// One step of `session` on `examples` with every weight-gradient task run at once on the
/// current stream and timed as above (the session's own scheduler set aside for that step).
/// The session must have no data-parallel job and a device of its own (CPU times are the
/// threads' either way).
BackwardProfile profile_backward(TrainingSession& session, std::vector<std::size_t> examples);

}  // namespace engram::trainer
