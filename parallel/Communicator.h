#pragma once
/// \file
/// The ranks of a data-parallel job and the collectives between them, over PyTorch's c10d: a
/// TCPStore rendezvous at MASTER_ADDR:MASTER_PORT (hosted by rank 0, or torchrun's agent), a
/// ProcessGroupGloo for host tensors (and for CUDA tensors with the gloo backend), and with the
/// nccl backend a ProcessGroupNCCL for CUDA tensors beside it, as PyTorch's "cpu:gloo,cuda:nccl":
/// each collective goes to the group of its tensor's device. NCCL runs a collective on a stream
/// of its own that waits for what the current stream has written, and wait() makes the current
/// stream wait for it; NCCL's wait is a blocking one, so that a hang throws within the timeout.
/// The one place that includes c10d (Communicator.cpp).
///
/// Every collective's completion is delayed as the emulated link says (parallel/LinkModel.h). A
/// failed or timed-out collective throws PeerFailure naming the rank that stopped answering:
/// each rank beats a counter in the store every half second, and the ranks whose counter stood
/// still (or rank 0, when its store is gone) are the ones named.
///
/// \code
///   engram::parallel::Communicator comm(env, options);          // blocks until every rank joined
///   comm.agree("task", "addition");                          // throws if a rank says otherwise
///   at::Tensor g = ...;
///   auto pending = comm.allreduce_async(g, "bucket 0");      // sum over ranks, in place
///   ...                                                      // compute goes on
///   pending->wait();                                         // g holds the sum
/// \endcode

#include "parallel/DistOptions.h"
#include "parallel/LinkModel.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace engram::parallel {

/// A rank stopped answering (died, hung past the timeout, or left the job).
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a failed collective's exception says, on one line and without LibTorch's backtrace: the
/// reason a PeerFailure gives. NCCL's errors give their cause on the lines after the first.
std::string error_text(const std::exception& e);

/// A collective in flight. wait() returns when it is complete on this rank and the emulated link
/// has carried it; it throws PeerFailure when it failed (on NCCL, a wait that outlives the timeout
/// by 10 s ends the process, as Communicator::within_timeout does). Waiting twice is harmless;
/// wait before the Communicator that launched it is destroyed.
class PendingCollective {
 public:
  struct State;
  explicit PendingCollective(std::unique_ptr<State> state);
  ~PendingCollective();
  void wait();

 private:
  std::unique_ptr<State> state_;
};

class Communicator {
 public:
  /// Joins the job `env` describes (validates `options`, whose backend is gloo or nccl, never
  /// auto: InvalidOption). Throws PeerFailure when the other ranks do not join within the
  /// timeout, std::runtime_error when WORLD_SIZE or the backend differs between ranks or the
  /// nccl backend finds no CUDA device.
  Communicator(const DistEnv& env, const DistOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  const DistOptions& options() const { return options_; }
  const LinkModel& link() const { return link_; }
  /// From now on collectives are delayed as `link` says (benchmarks try several on one job).
  void set_link(LinkModel link);

  /// Starts summing `buffer` (contiguous) over the ranks, in place; `name` labels its trace span.
  std::unique_ptr<PendingCollective> allreduce_async(at::Tensor buffer, std::string name);
  /// allreduce_async and wait; `name` says what is summed, for errors and traces.
  void allreduce(at::Tensor buffer, std::string name);
  /// `buffer` on every rank becomes root's.
  void broadcast(at::Tensor buffer, int root);
  /// Root's text on every rank.
  std::string broadcast_text(const std::string& text, int root);
  /// Returns when every rank has called it.
  void barrier();
  /// Runs `call`, which may block past the timeout inside a library that takes no deadline
  /// (NCCL makes its communicator at the first collective on a device and waits for every rank
  /// without one): if it has not returned within the timeout, the process ends with exit code 1
  /// after one line on stderr that names the ranks that stopped answering and `during`, as a
  /// failed collective is reported. The NCCL launches run under it, and NCCL's waits with 10 s
  /// more (its blocking wait aborts the communicator before it throws, and an abort may hang).
  void within_timeout(const std::string& during, const std::function<void()>& call);
  /// Every rank calls it with its `value` of `what`; throws std::runtime_error naming the ranks
  /// and both values when they differ ("the ranks disagree on the task: rank 0 has
  /// 'addition', rank 1 has 'sort'").
  void agree(const std::string& what, const std::string& value);

 private:
  struct Impl;
  /// The PeerFailure for a collective that threw `what`.
  PeerFailure failure(const std::string& during, const std::string& what);
  /// The NCCL group beside the Gloo one (the nccl backend).
  void create_nccl();
  DistEnv env_;
  DistOptions options_;
  LinkModel link_;
  long agreements_ = 0;
  std::unique_ptr<Impl> impl_;
};

/// This process's communicator for the job `env` describes: the one alive now (joined by an
/// earlier session that still runs, or held by a benchmark across its sessions), else a new one
/// (Communicator's constructor: the rendezvous, with its errors). A process is in one job: a
/// communicator alive for another rank or world size is a std::logic_error. Thread-safe.
std::shared_ptr<Communicator> join_job(const DistEnv& env, const DistOptions& options);

}  // namespace engram::parallel
