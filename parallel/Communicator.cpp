#include "parallel/Communicator.h"

#include "common/Errors.h"
#include "common/OneLine.h"
#include "memory/MemoryTracker.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace engram::parallel {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(500);
/// A rank whose counter has not moved for this long is not answering.
constexpr auto kStaleAfter = std::chrono::milliseconds(1600);
/// NCCL's blocking wait throws once the timeout has passed since the launch, after aborting its
/// communicator; an abort that hangs (a proxy thread stuck in a socket poll) is ended this long
/// after the timeout by the heartbeat thread (Impl::watched).
constexpr double kNcclAbortGraceSeconds = 10;

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string text_of(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

c10::intrusive_ptr<c10d::TCPStore> connect_store(const DistEnv& env, double timeout_seconds,
                                                 bool counted) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(env.master_port);
  o.isServer = !env.agent_store && env.rank == 0 && counted;
  o.timeout = to_ms(timeout_seconds);
  if (counted && !env.agent_store) {
    o.numWorkers = static_cast<std::size_t>(env.world_size);
    o.waitWorkers = true;
  } else {
    o.waitWorkers = false;
  }
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
}

}  // namespace

std::string error_text(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e))
    return one_line(c10->what_without_backtrace());
  return one_line(e.what());
}

/// When a CUDA stream reached a point, on the host's clock (DeviceTimeline over CUDA events). An
/// emulated link takes a bucket of CUDA gradients when the device has written it.
class DeviceClock : public std::enable_shared_from_this<DeviceClock> {
 public:
  /// A point on `device`'s current stream, and the call that says (blocking) when it was reached.
  LinkQueue::StartTime mark(c10::DeviceIndex device) {
    const auto stream = c10::cuda::getCurrentCUDAStream(device);
    // The device's first point is one the host waits for here: its host time is now.
    timeline_.anchor_once(device, [&stream] {
      auto first = std::make_shared<at::cuda::CUDAEvent>(cudaEventBlockingSync);
      first->record(stream);
      first->synchronize();
      return DeviceTimeline<at::cuda::CUDAEvent>::Anchor{first, Clock::now()};
    });
    auto point = std::make_shared<at::cuda::CUDAEvent>(cudaEventBlockingSync);
    point->record(stream);
    return [self = shared_from_this(), device, point] {
      return self->timeline_.reached(device, point);
    };
  }

 private:
  DeviceTimeline<at::cuda::CUDAEvent> timeline_;
};

// ---------------------------------------------------------------------------------------------
struct PendingCollective::State {
  c10::intrusive_ptr<c10d::Work> work;
  std::shared_ptr<LinkQueue> link;  ///< the emulated link's timeline
  std::shared_ptr<LinkQueue::Ticket> on_link;  ///< this collective's place on it
  std::string name;
  std::int64_t launched_ns = 0;  ///< on the tracker's clock
  Clock::time_point launched_at;
  std::shared_ptr<std::atomic<std::int64_t>> completed_ns;  ///< set by the backend's thread
  /// NCCL's future completes when the collective is enqueued: its end is when wait() returns.
  bool ends_at_wait = false;
  std::function<PeerFailure(const std::string&, const std::string&)> fail;
  /// Waits for `work` as its backend needs (Communicator::Impl::wait).
  std::function<void(c10d::Work&)> wait;
  bool waited = false;
};

PendingCollective::PendingCollective(std::unique_ptr<State> state) : state_(std::move(state)) {}
PendingCollective::~PendingCollective() = default;

void PendingCollective::wait() {
  if (state_->waited) return;
  state_->waited = true;
  try {
    state_->wait(*state_->work);
  } catch (const std::exception& e) {
    throw state_->fail("all-reduce of " + state_->name, error_text(e));
  }
  auto* tracker = memory::MemoryTracker::installed();
  if (tracker != nullptr && state_->ends_at_wait) state_->completed_ns->store(tracker->now_ns());
  const Clock::time_point link_done = state_->link->done_at(state_->on_link);
  std::this_thread::sleep_until(link_done);  // a timed wait: no CPU spent
  if (tracker != nullptr) {
    // The span ends when both the backend and the emulated link are done with it.
    const std::int64_t now = tracker->now_ns();
    const std::int64_t emulated =
        state_->launched_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  link_done - state_->launched_at)
                                  .count();
    const std::int64_t real = state_->completed_ns->load();
    const std::int64_t end = real > 0 ? std::min(std::max(real, emulated), now) : now;
    tracker->record_span({state_->name, "communication", state_->launched_ns, end, 0});
  }
}

// ---------------------------------------------------------------------------------------------
struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;  ///< prefixed with this attempt's namespace
  c10::intrusive_ptr<c10d::Backend> gloo;  ///< host tensors, barriers; CUDA tensors without NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;  ///< CUDA tensors with the nccl backend
  /// The group that sums `t`: NCCL for a CUDA tensor when the job has it, else Gloo (which takes
  /// CUDA tensors too, through host memory).
  c10d::Backend& backend_for(const at::Tensor& t) {
    if (t.is_cuda() && nccl) return *nccl;
    return *gloo;
  }
  /// A collective `start`ed on `backend`: on NCCL under comm.within_timeout(), since NCCL makes
  /// its communicator at the first collective on a device, waiting for every rank without a
  /// deadline (a rank that died before making its own would hold this one).
  c10::intrusive_ptr<c10d::Work> launch(
      Communicator& comm, const c10d::Backend& backend, const std::string& during,
      const std::function<c10::intrusive_ptr<c10d::Work>()>& start) const {
    if (&backend != nccl.get()) return start();
    c10::intrusive_ptr<c10d::Work> work;
    comm.within_timeout(during + " (NCCL's launch)", [&] { work = start(); });
    return work;
  }
  /// Waits for `work`, a collective on `backend`: on NCCL, whose blocking wait aborts the
  /// communicator once the timeout has passed (which may hang), under watched() until
  /// kNcclAbortGraceSeconds after the timeout.
  void wait(const c10d::Backend& backend, c10d::Work& work, const std::string& during) {
    if (&backend != nccl.get()) {
      work.wait();
      return;
    }
    watched(during + " (NCCL's wait)", timeout_seconds + kNcclAbortGraceSeconds,
            [&work] { work.wait(); });
  }
  std::shared_ptr<LinkQueue> link;  ///< the emulated link's timeline
  std::shared_ptr<DeviceClock> device_clock = std::make_shared<DeviceClock>();  ///< CUDA's start
  std::mutex link_mutex;             ///< guards the communicator's link_

  // Heartbeats: this rank's counter goes up every period; every rank's last change is watched.
  std::thread heartbeat;
  std::mutex beat_mutex;
  std::condition_variable beat_cv;
  bool stopping = false;
  bool store_lost = false;
  std::vector<std::int64_t> beats;
  std::vector<Clock::time_point> last_change;

  explicit Impl(LinkModel model) : link(std::make_shared<LinkQueue>(model)) {}
  ~Impl() {
    if (nccl) {
      // After a failure a collective may still wait on a rank that is gone (a deferred bucket
      // nobody waited for): shutdown() would flush it forever, abort() does not. So too when an
      // error that was no collective's ends the job (out of memory, say).
      const bool abort = failed || std::uncaught_exceptions() > 0;
      // NCCL's finalize, destroy and abort wait for its peers without a deadline, and its
      // destructor joins its watchdog threads: the heartbeat, still beating, ends the process if
      // they have not returned in time.
      watched(abort ? "NCCL's abort" : "NCCL's shutdown", timeout_seconds, [&] {
        try {
          if (abort)
            nccl->abort();
          else
            nccl->shutdown();
        } catch (const std::exception&) {
          // Nothing left to free in order.
        }
        nccl.reset();
      });
    }
    stop_heartbeat();  // also when the constructor throws after starting it
  }
  std::atomic<bool> failed{false};  ///< a collective or the rendezvous failed

  // Calls that may block past the timeout inside a library that takes no deadline
  // (within_timeout), by a number of their own (threads may launch at once): the heartbeat
  // thread ends the process if one has not returned by its deadline. Guarded by beat_mutex.
  struct BlockedCall {
    Clock::time_point until;
    std::string during;
    double seconds = 0;
  };
  std::map<std::uint64_t, BlockedCall> blocked;
  std::uint64_t next_blocked = 0;
  double timeout_seconds = 0;  ///< the job's, from start_heartbeat

  /// Runs `call`; if it has not returned within `seconds`, the heartbeat thread ends the process
  /// (end_blocked_call), naming `during`. Needs the heartbeat running.
  void watched(const std::string& during, double seconds, const std::function<void()>& call) {
    std::uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(beat_mutex);
      id = next_blocked++;
      blocked[id] = {Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds)),
                     during, seconds};
    }
    struct Done {
      Impl& impl;
      std::uint64_t id;
      ~Done() {
        std::lock_guard<std::mutex> lock(impl.beat_mutex);
        impl.blocked.erase(id);
      }
    } done{*this, id};
    call();
  }

  void start_heartbeat(const DistEnv& env, double timeout, const std::string& prefix) {
    timeout_seconds = timeout;
    beats.assign(env.world_size, -1);
    last_change.assign(env.world_size, Clock::now());
    c10::intrusive_ptr<c10d::Store> client = c10::make_intrusive<c10d::PrefixStore>(
        prefix + "heartbeat", connect_store(env, timeout, /*counted=*/false));
    heartbeat = std::thread([this, client, env] {
      std::unique_lock<std::mutex> lock(beat_mutex);
      while (!stopping) {
        const bool beating = !store_lost;
        lock.unlock();
        bool lost = false;
        std::vector<std::int64_t> now(env.world_size, -1);
        if (beating) {
          try {
            client->add(std::to_string(env.rank), 1);
            for (int r = 0; r < env.world_size; ++r) now[r] = client->add(std::to_string(r), 0);
          } catch (const std::exception&) {
            lost = true;
          }
        }
        lock.lock();
        if (lost) store_lost = true;
        if (beating && !lost) {
          for (int r = 0; r < env.world_size; ++r) {
            if (now[r] != beats[r]) {
              beats[r] = now[r];
              last_change[r] = Clock::now();
            }
          }
        }
        for (const auto& [id, call] : blocked)
          if (Clock::now() > call.until) end_blocked_call(env, call);
        beat_cv.wait_for(lock, kHeartbeatPeriod, [this] { return stopping; });
      }
    });
  }

  /// The ranks that stopped beating; waits up to kStaleAfter for a stopped rank to show.
  std::string who_stopped(const DistEnv& env) {
    std::unique_lock<std::mutex> lock(beat_mutex);
    const auto give_up = Clock::now() + kStaleAfter + kHeartbeatPeriod;
    for (;;) {
      std::string who = stopped_now(env);
      if (!who.empty()) return who;
      if (Clock::now() > give_up) return "a rank stopped answering (every rank still beats)";
      beat_cv.wait_for(lock, std::chrono::milliseconds(100));
    }
  }

  /// The store gone or the ranks that stopped answering, as the heartbeats tell now; empty when
  /// every rank answers. Caller holds beat_mutex.
  std::string stopped_now(const DistEnv& env) const {
    if (store_lost) {
      return env.agent_store ? "the rendezvous store at " + env.master_addr + ":" +
                                   std::to_string(env.master_port) + " is gone"
                             : "rank 0 (which hosts the rendezvous store) is gone";
    }
    std::vector<int> stale;
    for (int r = 0; r < env.world_size; ++r)
      if (r != env.rank && Clock::now() - last_change[r] > kStaleAfter) stale.push_back(r);
    if (stale.empty()) return "";
    std::ostringstream out;
    out << (stale.size() == 1 ? "rank " : "ranks ");
    for (std::size_t i = 0; i < stale.size(); ++i) out << (i ? ", " : "") << stale[i];
    out << " stopped answering";
    return out.str();
  }

  /// The call within_timeout() watches has not returned in time: one line on stderr, as the
  /// command line reports a failure, and the process ends (exit 1). Nothing can interrupt the
  /// call (NCCL's blocking communicator creation has no deadline), so the process cannot wait
  /// for it to unwind. Caller holds beat_mutex.
  [[noreturn]] void end_blocked_call(const DistEnv& env, const BlockedCall& call) const {
    std::string who = stopped_now(env);
    if (who.empty()) who = "every rank still answers";
    std::ostringstream line;
    line << program_invocation_short_name << ": error: rank " << env.rank << ": " << who
         << " during " << call.during << " (it did not return within " << call.seconds
         << " s)\n";
    const std::string text = line.str();
    std::fflush(stdout);  // what the rank printed before stays printed
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
    std::_Exit(1);
  }

  void stop_heartbeat() {
    {
      std::lock_guard<std::mutex> lock(beat_mutex);
      stopping = true;
    }
    beat_cv.notify_all();
    if (heartbeat.joinable()) heartbeat.join();
  }
};

Communicator::Communicator(const DistEnv& env, const DistOptions& options)
    : env_(env), options_(options), link_{options.link_bandwidth, options.link_latency} {
  validate(options_);
  if (options_.backend == "auto")
    throw InvalidOption("dist.backend",
                        "is auto: resolve it for the model's device first "
                        "(parallel::resolved_backend)");
  // c10d logs its own errors (a refused connection, a timeout) before throwing; Engram reports
  // each failure in one line of its own, so only fatal log lines stay.
  FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 3);
  c10::UpdateLoggingLevelsFromFlags();
  if (options_.backend == "nccl") {
    // NCCL's blocking wait: wait() returns when the collective is done on the device, and
    // throws when it has not finished within the timeout, so that a dead or hung rank ends this
    // one within --dist-timeout, named as with Gloo; without it the watchdog would end the
    // process itself, naming no rank. Set whatever the environment said (the bound is this
    // flag's promise), and before this process starts threads that read the environment.
    ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/1);
  }
  impl_ = std::make_unique<Impl>(link_);
  const std::string prefix = "engram/" + std::to_string(env_.restart_count) + "/";
  try {
    auto tcp = connect_store(env_, options_.timeout_seconds, /*counted=*/true);
    impl_->store = c10::make_intrusive<c10d::PrefixStore>(prefix, tcp);
  } catch (const std::exception& e) {
    throw PeerFailure("rank " + std::to_string(env_.rank) + " could not join the job at " +
                      env_.master_addr + ":" + std::to_string(env_.master_port) + ": " +
                      error_text(e));
  }
  impl_->start_heartbeat(env_, options_.timeout_seconds, prefix);
  // A rank launched with another WORLD_SIZE would wait for ranks that never come: compare first.
  agree("WORLD_SIZE", std::to_string(env_.world_size));
  // Ranks on different backends would each wait in a process group the others never join.
  agree("the backend (--dist-backend)", options_.backend);

  auto gloo = c10d::ProcessGroupGloo::Options::create(to_ms(options_.timeout_seconds));
  if (!env_.gloo_interface.empty()) {
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(env_.gloo_interface));
  } else if (env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost") {
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  try {
    impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", impl_->store), env_.rank, env_.world_size,
        gloo);
  } catch (const std::exception& e) {
    throw failure("creating the Gloo process group", error_text(e));
  }
  if (options_.backend == "nccl") create_nccl();
}

void Communicator::create_nccl() {
  if (c10::cuda::device_count() == 0)
    throw std::runtime_error("rank " + std::to_string(env_.rank) +
                             ": the nccl backend sums CUDA tensors, and this process sees no CUDA "
                             "device");
  // TORCH_NCCL_BLOCKING_WAIT is set (the constructor): wait() blocks until the collective is
  // done on the device, or throws at the timeout.
  auto o = c10d::ProcessGroupNCCL::Options::create();
  o->timeout = to_ms(options_.timeout_seconds);
  try {
    impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>("nccl", impl_->store), env_.rank, env_.world_size,
        o);
  } catch (const std::exception& e) {
    throw failure("creating the NCCL process group", error_text(e));
  }
}

Communicator::~Communicator() = default;

void Communicator::set_link(LinkModel link) {
  std::lock_guard<std::mutex> lock(impl_->link_mutex);
  link_ = link;
  impl_->link->reset(link);
}

PeerFailure Communicator::failure(const std::string& during, const std::string& what) {
  impl_->failed = true;
  return PeerFailure("rank " + std::to_string(env_.rank) + ": " + impl_->who_stopped(env_) +
                     " during " + during + " (" + what + ")");
}

std::unique_ptr<PendingCollective> Communicator::allreduce_async(at::Tensor buffer,
                                                                 std::string name) {
  auto state = std::make_unique<PendingCollective::State>();
  const std::size_t bytes = buffer.numel() * buffer.element_size();
  auto* tracker = memory::MemoryTracker::installed();
  state->launched_ns = tracker != nullptr ? tracker->now_ns() : 0;
  state->launched_at = Clock::now();
  state->completed_ns = std::make_shared<std::atomic<std::int64_t>>(0);
  state->name = std::move(name);
  state->fail = [this](const std::string& during, const std::string& what) {
    return failure(during, what);
  };
  // On the link from its launch, or, for CUDA buffers, from when the device has written them.
  LinkModel link;
  {
    std::lock_guard<std::mutex> lock(impl_->link_mutex);
    link = link_;
  }
  const Clock::time_point launched_at = state->launched_at;
  LinkQueue::StartTime start = [launched_at] { return launched_at; };
  if (buffer.is_cuda() && link.emulated())
    start = impl_->device_clock->mark(buffer.device().index());
  state->link = impl_->link;
  state->on_link =
      impl_->link->push(link.allreduce_seconds(bytes, env_.world_size), std::move(start));
  c10d::Backend& backend = impl_->backend_for(buffer);
  state->ends_at_wait = &backend == impl_->nccl.get();
  state->wait = [impl = impl_.get(), on = &backend,
                 during = "the all-reduce of " + state->name](c10d::Work& work) {
    impl->wait(*on, work, during);
  };
  std::vector<at::Tensor> tensors{std::move(buffer)};
  try {
    state->work = impl_->launch(*this, backend, "the all-reduce of " + state->name,
                                [&] { return backend.allreduce(tensors); });
  } catch (const std::exception& e) {
    throw failure("all-reduce of " + state->name, error_text(e));
  }
  if (tracker != nullptr && !state->ends_at_wait) {
    auto completed = state->completed_ns;
    state->work->getFuture()->addCallback(
        [completed, tracker](c10::ivalue::Future&) { completed->store(tracker->now_ns()); });
  }
  return std::make_unique<PendingCollective>(std::move(state));
}

void Communicator::within_timeout(const std::string& during, const std::function<void()>& call) {
  impl_->watched(during, options_.timeout_seconds, call);
}

void Communicator::allreduce(at::Tensor buffer, std::string name) {
  allreduce_async(std::move(buffer), std::move(name))->wait();
}

void Communicator::broadcast(at::Tensor buffer, int root) {
  c10d::Backend& backend = impl_->backend_for(buffer);
  std::vector<at::Tensor> tensors{std::move(buffer)};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  try {
    const std::string during = "a broadcast from rank " + std::to_string(root);
    const auto work =
        impl_->launch(*this, backend, during, [&] { return backend.broadcast(tensors, o); });
    impl_->wait(backend, *work, during);
  } catch (const std::exception& e) {
    throw failure("broadcast from rank " + std::to_string(root), error_text(e));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(
      link_.broadcast_seconds(tensors[0].numel() * tensors[0].element_size(), env_.world_size)));
}

std::string Communicator::broadcast_text(const std::string& text, int root) {
  at::Tensor size = at::full({1}, static_cast<std::int64_t>(text.size()), at::kLong);
  broadcast(size, root);
  at::Tensor data = at::empty({size.item<std::int64_t>()}, at::kByte);
  if (env_.rank == root) std::copy(text.begin(), text.end(), data.data_ptr<std::uint8_t>());
  broadcast(data, root);
  const auto* p = data.data_ptr<std::uint8_t>();
  return std::string(p, p + data.numel());
}

void Communicator::barrier() {
  try {
    impl_->gloo->barrier()->wait();
  } catch (const std::exception& e) {
    throw failure("a barrier", error_text(e));
  }
}

void Communicator::agree(const std::string& what, const std::string& value) {
  auto& store = *impl_->store;
  // Numbered: every rank agrees on the same things in the same order, and a later session of
  // the same process (one per primitive family, say) must not read an earlier one's values.
  const std::string key = "agree/" + std::to_string(agreements_++) + "/" + what + "/";
  std::map<int, std::string> values;
  try {
    // Rank 0's value first, so that a wrong WORLD_SIZE is reported before waiting for absent
    // ranks; the other ranks read it before they publish theirs, so rank 0 (which hosts the
    // store and leaves on a disagreement) cannot be gone before they have it.
    if (env_.rank == 0) store.set(key + "0", bytes_of(value));
    values[0] = text_of(store.get(key + "0"));
    if (env_.rank != 0) store.set(key + std::to_string(env_.rank), bytes_of(value));
    if (values[0] == value && env_.rank == 0) {
      for (int r = 1; r < env_.world_size; ++r)
        values[r] = text_of(store.get(key + std::to_string(r)));
    }
  } catch (const std::exception& e) {
    throw failure("the start-up check of " + what, error_text(e));
  }
  const auto shown = [](const std::string& v) {
    return "'" + (v.size() > 60 ? v.substr(0, 57) + "..." : v) + "'";
  };
  for (const auto& [r, v] : values) {
    if (v != value) {
      throw std::runtime_error("the ranks disagree on " + what + ": rank " + std::to_string(r) +
                               " has " + shown(v) + ", rank " + std::to_string(env_.rank) +
                               " has " + shown(value));
    }
  }
}

std::shared_ptr<Communicator> join_job(const DistEnv& env, const DistOptions& options) {
  static std::mutex mutex;
  static std::weak_ptr<Communicator> alive;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto comm = alive.lock()) {
    if (comm->rank() != env.rank || comm->world_size() != env.world_size) {
      throw std::logic_error("join_job: this process is rank " + std::to_string(comm->rank()) +
                             " of " + std::to_string(comm->world_size()) + ", not rank " +
                             std::to_string(env.rank) + " of " + std::to_string(env.world_size));
    }
    return comm;
  }
  auto comm = std::make_shared<Communicator>(env, options);
  alive = comm;
  return comm;
}

}  // namespace engram::parallel
