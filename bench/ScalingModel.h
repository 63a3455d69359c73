#pragma once
/// \file
/// `engram bench scale`: the data-parallel step predicted for many GPUs, on paper, from one GPU's
/// measured backward (`engram bench streams`' profile: the chain's and each weight-gradient
/// task's kernel time and the task's gradient bytes, and the forward's and the whole step's
/// time) and the link model (parallel/LinkModel.h: a ring all-reduce moves 2(N-1)/N of the
/// bytes through each GPU's link), for `after`, `overlap` and `ooo` (parallel/OooPlan.h's
/// predict_ooo_step, k = 0 and the best k). Layer l of the model is task l of the profile, in
/// forward order: its input gradient the chain before the task, its weight gradient the task,
/// its forward the profiled forward shared as the chains are, its all-reduce its bytes over the
/// link; the chain after the last task is one more layer without parameters; what the step
/// spends outside forward and backward (batch, optimizer) is added unchanged. Latency: each
/// collective of a ring crosses 2(N-1) links; DDP's 25 MiB buckets make one collective of many
/// layers, so each layer carries a share of its bucket's latency by its bytes.
///
/// The links are assumptions, not measurements, and are written into the output: NVLink 4 within
/// a node of 8 (450 GB/s each way per GPU, 1 us a hop), and 100 and 400 Gb/s per GPU between
/// nodes (RDMA, no TCP framing; 5 us a hop); 8 GPUs use the NVLink, 64 and 512 the network. The
/// one-GPU prediction (no exchange) is checked against the one-stream step the same run measured.

#include <ostream>
#include <string>

namespace engram::bench {

struct ScalingOptions {
  std::string from_path;  ///< a `bench streams` JSON, or a results file of them ({"runs": [...]})
  std::string json_path;  ///< where the predictions go (written atomically)
};

/// Reads, predicts, prints a table on `out` and writes the JSON; UsageError for bad options,
/// std::runtime_error for an input it cannot read, FormatError for one that is not a streams
/// profile or holds times or byte counts no measurement gives (zero steps, negative values).
void run_scaling_model(const ScalingOptions& options, std::ostream& out);

}  // namespace engram::bench
