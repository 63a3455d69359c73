#include "bench/DpBench.h"

#include "bench/LinkPrediction.h"
#include "bench/NetnsHosts.h"

#include "bench/BenchSupport.h"
#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "datasets/Task.h"
#include "datasets/TraceFile.h"
#include "memory/MemoryTracker.h"
#include "nn/Width.h"
#include "npi/NpiData.h"
#include "npi/NpiModel.h"
#include "npi/NpiWorkload.h"
#include "parallel/Communicator.h"
#include "parallel/GradReducer.h"
#include "resnet/ResNet.h"
#include "resnet/ResNetWorkload.h"
#include "trainer/DataParallel.h"
#include "trainer/Device.h"
#include "trainer/Stepper.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <thread>

namespace engram::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

json options_json(const DpBenchOptions& o) {
  return {{"ranks", o.ranks},
          {"models", o.models},
          {"link_bandwidths", o.link_bandwidths},
          {"link_latency", o.link_latency},
          {"schedules", o.schedules},
          {"ooo_k", o.ooo_k},
          {"chunk_layers", o.chunk_layers},
          {"warmup", o.warmup},
          {"steps", o.steps},
          {"resnet_batch", o.resnet_batch},
          {"npi_batch", o.npi_batch},
          {"hidden", o.hidden},
          {"threads", o.threads},
          {"device", o.device},
          {"dist_backend", o.dist_backend},
          {"seed", o.seed},
          {"bucket_mb", o.bucket_mb},
          {"first_bucket_mb", o.first_bucket_mb},
          {"trace_dir", o.trace_dir},
          {"hosts", o.hosts},
          {"link_delay", o.link_delay},
          {"emulate", o.emulate},
          {"driver_pid", o.driver_pid},
          {"json_path", o.json_path}};
}

DpBenchOptions options_from(const json& j) {
  DpBenchOptions o;
  j.at("ranks").get_to(o.ranks);
  j.at("models").get_to(o.models);
  j.at("link_bandwidths").get_to(o.link_bandwidths);
  j.at("link_latency").get_to(o.link_latency);
  j.at("schedules").get_to(o.schedules);
  j.at("ooo_k").get_to(o.ooo_k);
  j.at("chunk_layers").get_to(o.chunk_layers);
  j.at("warmup").get_to(o.warmup);
  j.at("steps").get_to(o.steps);
  j.at("resnet_batch").get_to(o.resnet_batch);
  j.at("npi_batch").get_to(o.npi_batch);
  j.at("hidden").get_to(o.hidden);
  j.at("threads").get_to(o.threads);
  j.at("device").get_to(o.device);
  j.at("dist_backend").get_to(o.dist_backend);
  j.at("seed").get_to(o.seed);
  j.at("bucket_mb").get_to(o.bucket_mb);
  j.at("first_bucket_mb").get_to(o.first_bucket_mb);
  j.at("trace_dir").get_to(o.trace_dir);
  j.at("hosts").get_to(o.hosts);
  j.at("link_delay").get_to(o.link_delay);
  j.at("emulate").get_to(o.emulate);
  j.at("driver_pid").get_to(o.driver_pid);
  j.at("json_path").get_to(o.json_path);
  return o;
}

void validate(const DpBenchOptions& o) {
  if (o.ranks < 2 || o.ranks > 64) throw InvalidOption("ranks", "must be between 2 and 64");
  // The DDP peer listens on the next port.
  if (o.port < 0 || o.port > 65534)
    throw InvalidOption("port", "must be 0 (a free one) or a TCP port in 1..65534");
  if (o.models.empty()) throw InvalidOption("models", "names no model");
  for (const auto& m : o.models)
    if (m != "resnet" && m != "npi")
      throw InvalidOption("models", "'" + m + "' is not one of resnet, npi");
  for (const auto& s : o.schedules) parallel::grad_sync_from_name(s);  // InvalidOption
  if (o.ooo_k < -1) throw InvalidOption("ooo_k", "must be a number of layers, or -1 (auto)");
  if (o.chunk_layers < -1 || o.chunk_layers == 0)
    throw InvalidOption("chunk_layers", "must be 1 or more layers, or -1 (searched)");
  if (o.link_bandwidths.empty()) throw InvalidOption("link_bandwidths", "names no link");
  for (double b : o.predict_links) {
    if (!(b > 0) || !std::isfinite(b))
      throw InvalidOption("predict_links", "must be bytes per second above 0");
    if (std::find(o.link_bandwidths.begin(), o.link_bandwidths.end(), b) != o.link_bandwidths.end())
      throw InvalidOption("predict_links",
                          "are predicted from the other links, so they must not be among them");
  }
  if (!o.predict_links.empty() && o.link_bandwidths.size() < 2)
    throw InvalidOption("link_bandwidths", "need at least two links to predict others from");
  for (double b : o.link_bandwidths)
    if (!(b >= 0) || !std::isfinite(b))
      throw InvalidOption("link_bandwidths", "must be bytes per second (0: unthrottled)");
  if (!(o.link_latency >= 0)) throw InvalidOption("link_latency", "must not be negative");
  if (o.hosts != "loopback" && o.hosts != "netns")
    throw InvalidOption("hosts", "'" + o.hosts + "' is not one of loopback, netns");
  if (!(o.link_delay >= 0) || !std::isfinite(o.link_delay))
    throw InvalidOption("link_delay", "must be seconds, not negative");
  if (o.link_delay > 0 && o.hosts != "netns")
    throw InvalidOption("link_delay", "is a shaper's delay: it needs --hosts netns");
  if (o.steps < 1) throw InvalidOption("steps", "must be at least 1");
  if (o.warmup < 1) throw InvalidOption("warmup", "must be at least 1 (the buckets are learned)");
  if (o.resnet_batch < 1 || o.resnet_batch > 65536)
    throw InvalidOption("resnet_batch", "must be between 1 and 65536");
  if (o.npi_batch < 1 || o.npi_batch > 65536)
    throw InvalidOption("npi_batch", "must be between 1 and 65536");
  nn::check_width(o.hidden, "hidden");
  if (o.threads < 1) throw InvalidOption("threads", "must be at least 1");
  trainer::check_device_name(o.device, "device");
  parallel::DistOptions backend;
  backend.backend = o.dist_backend;
  parallel::validate(backend);
  dp_backend(o);  // nccl on the CPU or on ranks that share a GPU: refused
  if (!(o.bucket_mb > 0 && o.bucket_mb <= parallel::kMaxBucketMib))
    throw InvalidOption("bucket_mb", "must be a positive size up to 1048576 MiB (1 TiB)");
  if (!(o.first_bucket_mb > 0 && o.first_bucket_mb <= parallel::kMaxBucketMib))
    throw InvalidOption("first_bucket_mb", "must be a positive size up to 1048576 MiB (1 TiB)");
}

/// A model and what its workload refers to.
struct Model {
  std::string name;
  int batch = 0;
  std::unique_ptr<npi::NpiModel> npi_model;
  std::unique_ptr<npi::NpiDataset> npi_data;
  std::unique_ptr<trainer::Workload> workload;
};

Model make_model(const std::string& name, const DpBenchOptions& o) {
  Model m;
  m.name = name;
  torch::manual_seed(o.seed);
  if (name == "resnet") {
    m.batch = o.resnet_batch;
    resnet::SyntheticImages images;
    images.num_examples = static_cast<std::size_t>(o.resnet_batch) * o.ranks * 8;
    images.seed = o.seed;
    m.workload = std::make_unique<resnet::ResNetWorkload>(resnet::ResNet(), images);
  } else {
    m.batch = o.npi_batch;
    const auto& task = datasets::task_by_name("addition");
    const auto traces = datasets::generate_traces(task, datasets::default_generate_options(task));
    npi::NpiConfig config = npi::NpiConfig::for_task(task);
    config.hidden = o.hidden;
    m.npi_model = std::make_unique<npi::NpiModel>(config);
    m.npi_data = std::make_unique<npi::NpiDataset>(task, traces.traces);
    m.workload = std::make_unique<npi::NpiWorkload>(*m.npi_model, *m.npi_data);
  }
  return m;
}

/// Every rank's `value`, in rank order.
std::vector<double> gather(parallel::Communicator& comm, double value) {
  at::Tensor t = at::zeros({comm.world_size()}, at::kDouble);
  t[comm.rank()] = value;
  comm.allreduce(t, "timings");
  return {t.data_ptr<double>(), t.data_ptr<double>() + comm.world_size()};
}

double slowest(parallel::Communicator& comm, double value) {
  const auto all = gather(comm, value);
  return *std::max_element(all.begin(), all.end());
}

/// The device this rank trains on, as its sessions resolve it (trainer::job_device_name: the
/// GPU of its LOCAL_RANK for "cuda").
c10::Device rank_device(const DpBenchOptions& o, const parallel::DistEnv& env) {
  trainer::TrainingOptions t;
  t.device = o.device;
  t.job = env;
  return trainer::resolve_device(trainer::job_device_name(t));
}

/// The median over the timed steps of each step's slowest rank: a step of data parallelism
/// ends when its last rank does, and the median keeps one step slowed by something else on the
/// machine from moving the figure (a mean of 5 steps moved by a fifth with one such step).
double median_step(parallel::Communicator& comm, const std::vector<double>& seconds) {
  const auto n = static_cast<std::int64_t>(seconds.size());
  at::Tensor t = at::zeros({comm.world_size(), n}, at::kDouble);
  for (std::int64_t i = 0; i < n; ++i) t[comm.rank()][i] = seconds[static_cast<std::size_t>(i)];
  comm.allreduce(t, "timings");
  const at::Tensor step = std::get<0>(t.max(0)).contiguous();
  return median({step.data_ptr<double>(), step.data_ptr<double>() + n});
}

struct Measured {
  double step_seconds = 0;
  std::size_t bytes_per_step = 0, buckets = 0, sent_early = 0;
  std::vector<std::size_t> bucket_bytes;
  trainer::OooChoice ooo;      ///< `ooo`: the layers deferred and the model's predictions
  trainer::ChunkChoice chunk;  ///< `host`: the chunk and its search
};

std::string link_label(double bandwidth) {
  if (bandwidth <= 0) return "loopback";
  const double bits = bandwidth * 8;
  if (bits >= 1e9) return fixed(bits / 1e9, bits >= 1e10 ? 0 : 1) + " Gb/s";
  return fixed(bits / 1e6, 0) + " Mb/s";
}

Measured measure_schedule(Model& m, parallel::GradSync sync, const parallel::DistEnv& env,
                          parallel::Communicator& comm, const DpBenchOptions& o,
                          const std::string& trace_name) {
  trainer::TrainingOptions t;
  t.batch = m.batch;
  t.steps = o.warmup + o.steps;
  t.grad_clip = 0;  // as the peer: DDP has none by default
  t.seed = o.seed;
  t.threads = o.threads;
  t.device = o.device;
  t.dist.backend = o.dist_backend;
  t.job = env;  // the session joins the job through `comm`, which this bench holds
  t.dist.grad_sync = sync;
  t.dist.ooo_k = o.ooo_k;
  t.dist.chunk_layers = o.chunk_layers;
  t.dist.check_every = 1L << 40;
  t.dist.bucket_bytes = parallel::bytes_of_mib(o.bucket_mb);
  t.dist.first_bucket_bytes = parallel::bytes_of_mib(o.first_bucket_mb);
  trainer::TrainingSession session(*m.workload, t);
  for (long i = 0; i < o.warmup; ++i) session.step();
  // `host` searches its chunk on its first steps: those are warm-up too (at most 2 per size).
  if (auto* dp = session.data_parallel(); dp != nullptr && sync == parallel::GradSync::host)
    for (long i = 0; i < 64 && !dp->schedule().chunk_choice().settled; ++i) session.step();
  auto* tracker = memory::MemoryTracker::installed();
  const c10::Device device = rank_device(o, env);
  const bool on_cuda = device.is_cuda();
  // The rank's own GPU current while its steps are timed (the session's guard is inside step).
  std::optional<c10::cuda::CUDAGuard> on_device;
  if (on_cuda) {
    on_device.emplace(device);
    c10::cuda::device_synchronize();
  }
  std::vector<double> seconds;
  for (long i = 0; i < o.steps; ++i) {
    const bool traced = tracker != nullptr && i + 1 == o.steps;
    if (traced) tracker->begin_window();
    const auto start = Clock::now();
    session.step();
    // The step's kernels, not their launches: the compute stream's, which waited for every
    // bucket the step waited for. Not the whole device: ooo's deferred sums on NCCL's stream run
    // on into the next step's forward, as they would in training, and a device-wide wait would
    // also wait for them (with no deadline, were a peer gone).
    if (on_cuda) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    if (traced) {
      const memory::MemoryWindow window = tracker->end_window();
      memory::write_chrome_trace(
          o.trace_dir + "/" + trace_name + "-rank" + std::to_string(comm.rank()) + ".json", window,
          "engram bench dp " + trace_name);
    }
  }
  session.settle();  // ooo's last late updates, outside the timed steps
  Measured r;
  r.step_seconds = median_step(comm, seconds);
  const trainer::GradSchedule& schedule = session.data_parallel()->schedule();
  r.ooo = schedule.ooo_choice();
  r.chunk = schedule.chunk_choice();
  const trainer::ExchangeFigures figures = schedule.figures();
  r.bytes_per_step = figures.bytes_per_step;
  r.buckets = figures.buckets;
  r.sent_early = figures.sent_during_backward;
  r.bucket_bytes = figures.bucket_bytes;
  if (sync == parallel::GradSync::none) {
    // What is there to send: every gradient in one bucket.
    std::size_t bytes = 0;
    for (const auto& p : m.workload->parameters()) bytes += p.numel() * p.element_size();
    r.bucket_bytes = {bytes};
  }
  return r;
}

/// CPU seconds this process has used, every thread.
double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Communication {
  double seconds = 0;      ///< per step, the median of the slowest rank's
  double cpu_seconds = 0;  ///< CPU this rank's collectives used per step (Gloo's threads), mean
};

/// The buckets all-reduced back to back over the current link, no compute: seconds per step,
/// and the CPU they took from the cores the compute also runs on (on one machine the loopback
/// transfers are CPU work).
Communication measure_communication(parallel::Communicator& comm,
                                    const parallel::DistEnv& comm_env,
                                    const std::vector<std::size_t>& bytes,
                                    const DpBenchOptions& o) {
  // On the device the ranks train on, as the sessions' gradients.
  const c10::Device device = rank_device(o, comm_env);
  std::optional<c10::cuda::CUDAGuard> on_device;
  if (device.is_cuda()) on_device.emplace(device);
  const auto floats = at::dtype(at::kFloat).device(device);
  std::vector<at::Tensor> buffers;
  for (std::size_t b : bytes)
    buffers.push_back(at::ones({static_cast<std::int64_t>(b / sizeof(float))}, floats));
  std::vector<double> seconds;
  double cpu = 0;
  for (long i = 0; i < o.warmup + o.steps; ++i) {
    comm.barrier();
    const double cpu_start = process_cpu_seconds();
    const auto start = Clock::now();
    std::vector<std::unique_ptr<parallel::PendingCollective>> pending;
    for (std::size_t k = 0; k < buffers.size(); ++k)
      pending.push_back(comm.allreduce_async(buffers[k], "bucket " + std::to_string(k)));
    for (auto& p : pending) p->wait();
    if (device.is_cuda()) c10::cuda::device_synchronize();
    if (i >= o.warmup) {
      seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      cpu += process_cpu_seconds() - cpu_start;
    }
  }
  return {median_step(comm, seconds), slowest(comm, cpu / o.steps)};
}

// ------------------------------------------------------------------------------- the driver

/// Rank `rank` of `world` as torchrun would start it (its variables replacing this process's),
/// its stderr into `err_path`: on loopback, or on host `rank` of `hosts`, bound to its interface.
ChildProcess spawn_rank(const std::vector<std::string>& argv, int rank, int world, int port,
                        const std::string& err_path, const NetnsHosts* hosts) {
  ProcessOptions io;
  io.stderr_path = err_path;
  // A driver started under torchrun must not hand its own job's variables to its ranks.
  io.unset_environment = {"TORCHELASTIC_USE_AGENT_STORE", "GLOO_SOCKET_IFNAME",
                          "LOCAL_WORLD_SIZE"};
  io.set_environment = {{"RANK", std::to_string(rank)},
                        {"LOCAL_RANK", std::to_string(hosts != nullptr ? 0 : rank)},
                        {"WORLD_SIZE", std::to_string(world)},
                        {"MASTER_ADDR", hosts != nullptr ? hosts->address_of(0) : "127.0.0.1"},
                        {"MASTER_PORT", std::to_string(port)}};
  if (hosts != nullptr)
    io.set_environment.push_back({"GLOO_SOCKET_IFNAME", hosts->interface_of(rank)});
  try {
    return ChildProcess(hosts != nullptr ? hosts->command_on(rank, argv) : argv, io);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("rank " + std::to_string(rank) + ": " + e.what());
  }
}

/// The ranks' job on `worker`'s options (its json_path names the rows they write): on loopback,
/// or one rank per host of `hosts`. Returns the rows; throws naming the rank that failed.
json run_ranks(const DpBenchOptions& worker, const ScratchDir& dir, const std::string& job,
               int port, const NetnsHosts* hosts) {
  write_file_atomically(dir.file(job + "-options.json"), options_json(worker).dump());
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::vector<std::string> argv{self, "bench", "dp", "--worker-options",
                                      dir.file(job + "-options.json")};
  std::vector<ChildProcess> ranks;
  const auto err_path = [&](int r) {
    return dir.file(job + "-rank" + std::to_string(r) + ".stderr");
  };
  for (int r = 0; r < worker.ranks; ++r)
    ranks.push_back(spawn_rank(argv, r, worker.ranks, port, err_path(r), hosts));
  // A rank that fails ends the others, which would wait for it in their next collective.
  if (const auto failed = wait_all(ranks)) {
    const std::string said = last_line(read_file(err_path(static_cast<int>(*failed))));
    const std::string host =
        hosts != nullptr ? " (host " + hosts->address_of(static_cast<int>(*failed)) + ")" : "";
    throw std::runtime_error("rank " + std::to_string(*failed) + host + " " +
                             ranks[*failed].outcome() + (said.empty() ? "" : ": " + said));
  }
  std::ifstream in(worker.json_path);
  return json::parse(in);
}

/// The DDP peer's arguments after its script, for `links` (comma-separated bytes per second)
/// emulated with `latency` seconds per collective.
std::vector<std::string> peer_arguments(const DpBenchOptions& o, const std::string& links,
                                        double latency, const std::string& out) {
  return {"--batch",   std::to_string(o.resnet_batch),
          "--warmup",  std::to_string(o.warmup),
          "--steps",   std::to_string(o.steps),
          "--links",   links,
          "--latency", exact(latency),
          "--threads", std::to_string(o.threads),
          "--seed",    std::to_string(o.seed),
          "--bucket-mb", exact(o.bucket_mb),
          "--device",  o.device,
          "--backend", dp_backend(o),
          "--out",     out};
}

/// The DDP peer across `hosts` (one torchrun per host, one process each, static rendezvous on
/// host 0's address) on the link they are shaped to: its rows, link_bandwidth as the shaper's.
json run_peer_on_hosts(const DpBenchOptions& o, const NetnsHosts& hosts, double bandwidth,
                       const ScratchDir& dir, const std::string& job, int port) {
  const std::string out = dir.file(job + "-peer.json");
  std::vector<ChildProcess> nodes;
  const auto err_path = [&](int h) {
    return dir.file(job + "-peer" + std::to_string(h) + ".stderr");
  };
  for (int h = 0; h < hosts.count(); ++h) {
    std::vector<std::string> argv = torchrun_command(o.torchrun, o.python);
    argv.insert(argv.end(), {"--nnodes", std::to_string(hosts.count()), "--node_rank",
                             std::to_string(h), "--nproc_per_node", "1", "--master_addr",
                             hosts.address_of(0), "--master_port", std::to_string(port),
                             peer_script("ddp_peer.py")});
    // Nothing emulated: the shaper is the link.
    for (auto& a : peer_arguments(o, "0", 0.0, out)) argv.push_back(a);
    ProcessOptions io;
    io.stderr_path = err_path(h);
    io.unset_environment = {"TORCHELASTIC_USE_AGENT_STORE"};
    io.set_environment = {{"GLOO_SOCKET_IFNAME", hosts.interface_of(h)}};
    nodes.emplace_back(hosts.command_on(h, argv), io);
  }
  if (const auto failed = wait_all(nodes)) {
    throw std::runtime_error("the DDP peer on host " + hosts.address_of(*failed) + " " +
                             nodes[*failed].outcome() + ": " +
                             peer_failure_line(read_file(err_path(static_cast<int>(*failed)))) +
                             " (see --no-peer)");
  }
  json peer = read_ddp_peer_report(out, o.bucket_mb, 0.0);
  for (auto& r : peer["rows"]) {
    r["link_bandwidth"] = bandwidth;
    r["link_kind"] = "shaped";
  }
  return peer;
}

}  // namespace

json read_ddp_peer_report(const std::string& path, double bucket_mb, double latency) {
  json peer;
  try {
    std::ifstream in(path);
    peer = json::parse(in);
    for (const char* key : {"bucket_cap_mb", "latency"}) peer.at(key).get<double>();
    if (!peer.at("rows").is_array()) throw std::runtime_error("'rows' is not a list");
  } catch (const std::exception& e) {
    throw std::runtime_error("the DDP peer's report '" + path + "' is not one it writes: " +
                             e.what());
  }
  for (const auto& [key, ours] :
       {std::pair<const char*, double>{"bucket_cap_mb", bucket_mb}, {"latency", latency}}) {
    if (peer.at(key).get<double>() != ours)
      throw std::runtime_error(std::string("the DDP peer ran with ") + key + " " +
                               exact(peer.at(key).get<double>()) + ", not " + exact(ours));
  }
  return peer;
}

void run_dp_worker(const DpBenchOptions& o, const parallel::DistEnv& env) {
  trainer::set_compute_threads(o.threads);
  parallel::DistOptions d;
  d.backend = dp_backend(o);
  d.timeout_seconds = 600;
  // Held across the sessions, which join the job through it (parallel::join_job).
  const std::shared_ptr<parallel::Communicator> comm = parallel::join_job(env, d);
  if (!o.trace_dir.empty()) memory::MemoryTracker::install();
  json rows = json::array();
  for (const auto& name : o.models) {
    Model m = make_model(name, o);
    // Compute alone: no exchange, so no link either.
    const Measured none =
        measure_schedule(m, parallel::GradSync::none, env, *comm, o, name + "-none");
    for (double bandwidth : o.link_bandwidths) {
      // A shaped link is the network's to impose: nothing is emulated over it.
      if (o.emulate) comm->set_link({bandwidth, o.link_latency});
      std::map<std::string, Measured> by_schedule;
      for (const auto& s : o.schedules) {
        const parallel::GradSync sync = parallel::grad_sync_from_name(s);
        by_schedule[s] =
            sync == parallel::GradSync::none
                ? none
                : measure_schedule(
                      m, sync, env, *comm, o,
                      name + (o.emulate ? "-" : "-shaped-") +
                          std::to_string(static_cast<long>(bandwidth)) + "-" + s);
      }
      // The buckets of `overlap`; when it was not measured, the one bucket of everything that a
      // reducer keeps until it learns the order (as `none`'s).
      const std::vector<std::size_t>& buckets =
          by_schedule.count("overlap") ? by_schedule["overlap"].bucket_bytes : none.bucket_bytes;
      const Communication measured = measure_communication(*comm, env, buckets, o);
      const double communication = measured.seconds;
      std::size_t bucket_total = 0;
      for (std::size_t b : buckets) bucket_total += b;
      // What each rank's link carried per second in the back-to-back all-reduces (a ring moves
      // 2(N-1)/N of every bucket through each link): the payload rate the link achieved.
      const double moved = 2.0 * (o.ranks - 1) / o.ranks * static_cast<double>(bucket_total);
      for (const auto& s : o.schedules) {
        const Measured& r = by_schedule[s];
        const bool exchanges = s != "none";
        const double bound = std::max(none.step_seconds, exchanges ? communication : 0.0);
        rows.push_back({{"model", name},
                        {"link_bandwidth", bandwidth},
                        {"link", link_label(bandwidth)},
                        {"link_latency", o.emulate ? o.link_latency : 0.0},
                        {"link_kind", o.emulate ? "emulated" : "shaped"},
                        {"hosts", o.emulate ? "loopback" : "netns"},
                        {"schedule", s},
                        {"step_seconds", r.step_seconds},
                        {"compute_seconds", none.step_seconds},
                        {"communication_seconds", exchanges ? communication : 0.0},
                        {"communication_cpu_seconds", exchanges ? measured.cpu_seconds : 0.0},
                        {"link_throughput", exchanges && communication > 0 ? moved / communication
                                                                            : 0.0},
                        {"overlap_efficiency", bound / r.step_seconds},
                        {"bytes_per_step", exchanges ? r.bytes_per_step : 0},
                        {"buckets", r.buckets},
                        {"buckets_sent_during_backward", r.sent_early}});
        if (s == "host") {
          json path = json::array();
          for (const auto& [chunk, seconds] : r.chunk.path)
            path.push_back({{"chunk_layers", chunk}, {"step_seconds", seconds}});
          rows.back()["host"] = {{"chunk_layers", r.chunk.chunk},
                                 {"layers", r.chunk.layers},
                                 {"searched", r.chunk.automatic},
                                 {"search_path", path}};
        }
        if (s == "ooo") {
          rows.back()["ooo"] = {{"k", r.ooo.k},
                                {"layers", r.ooo.layers},
                                {"automatic", r.ooo.automatic},
                                {"predicted_step_seconds", r.ooo.predicted_seconds}};
          // The model's inputs (seconds per layer, forward order), for what-ifs beyond this run.
          json costs = json::array();
          for (const auto& c : r.ooo.costs)
            costs.push_back({c.forward, c.input_grad, c.weight_grad, c.allreduce});
          rows.back()["ooo"]["layer_costs"] = costs;
          rows.back()["ooo"]["layer_cost_fields"] = {"forward", "input_grad", "weight_grad",
                                                     "allreduce"};
        }
      }
    }
  }
  comm->barrier();
  if (comm->rank() == 0) write_file_atomically(o.json_path, rows.dump(2));
}

namespace {

/// Per model, schedule (but none) and target link of the rows of `kind` (emulated, shaped): the
/// step predicted from the other links' rows, the step measured there, and the relative error;
/// for shaped links, the sleep model's (emulated) step on the same link beside them.
json link_predictions(const DpBenchOptions& o, const json& rows, const std::string& kind) {
  json predictions = json::array();
  for (const auto& model : o.models) {
    for (const auto& schedule : o.schedules) {
      if (schedule == "none") continue;
      std::vector<LinkPoint> fit;
      std::map<double, double> measured, emulated;
      for (const auto& r : rows) {
        if (r["model"] != model || r["schedule"] != schedule) continue;
        const double b = r["link_bandwidth"].get<double>();
        const double step = r["step_seconds"].get<double>();
        if (r["link_kind"] != kind) {
          if (r["link_kind"] == "emulated") emulated[b] = step;
          continue;
        }
        if (std::find(o.predict_links.begin(), o.predict_links.end(), b) != o.predict_links.end())
          measured[b] = step;
        else
          fit.push_back({b, step});
      }
      for (double target : o.predict_links) {
        const double predicted = predict_step_seconds(fit, target);
        const double actual = measured.at(target);
        json p{{"model", model},
               {"schedule", schedule},
               {"link_kind", kind},
               {"link_bandwidth", target},
               {"link", link_label(target)},
               {"fit_link_bandwidths", o.link_bandwidths},
               {"predicted_step_seconds", predicted},
               {"measured_step_seconds", actual},
               {"error", std::abs(predicted - actual) / actual}};
        if (kind == "shaped" && emulated.count(target) != 0) {
          p["sleep_model_step_seconds"] = emulated[target];
          p["sleep_model_difference"] = std::abs(emulated[target] - actual) / actual;
        }
        predictions.push_back(p);
      }
    }
  }
  return predictions;
}

std::string comma_separated(const std::vector<double>& values) {
  std::string s;
  for (double v : values) s += (s.empty() ? "" : ",") + fixed(v, 0);
  return s;
}

void print_rows(std::ostream& out, const json& rows, const json& peer_rows) {
  out << std::left << std::setw(8) << "model" << std::setw(11) << "link" << std::setw(10)
      << "kind" << std::setw(9) << "schedule" << std::right << std::setw(10) << "step ms"
      << std::setw(12) << "compute ms" << std::setw(10) << "comm ms" << std::setw(12)
      << "efficiency" << std::setw(10) << "MB/step" << std::setw(12) << "link MB/s"
      << "\n";
  for (const auto& r : rows) {
    out << std::left << std::setw(8) << r["model"].get<std::string>() << std::setw(11)
        << r["link"].get<std::string>() << std::setw(10) << r["link_kind"].get<std::string>()
        << std::setw(9) << r["schedule"].get<std::string>() << std::right << std::setw(10)
        << fixed(r["step_seconds"].get<double>() * 1e3, 1) << std::setw(12)
        << fixed(r["compute_seconds"].get<double>() * 1e3, 1) << std::setw(10)
        << fixed(r["communication_seconds"].get<double>() * 1e3, 1) << std::setw(12)
        << fixed(r["overlap_efficiency"].get<double>(), 2) << std::setw(10)
        << fixed(r["bytes_per_step"].get<double>() / 1e6, 1) << std::setw(12)
        << fixed(r["link_throughput"].get<double>() / 1e6, 1) << "\n";
  }
  for (const auto& r : peer_rows) {
    out << std::left << std::setw(8) << "resnet" << std::setw(11)
        << link_label(r["link_bandwidth"].get<double>()) << std::setw(10)
        << r.value("link_kind", "emulated") << std::setw(9) << "DDP" << std::right
        << std::setw(10) << fixed(r["step_seconds"].get<double>() * 1e3, 1) << "\n";
  }
}

}  // namespace

void check_ranks_have_gpus(const DpBenchOptions& o, int cuda_devices) {
  if (o.device != "cuda" || o.ranks <= cuda_devices) return;
  throw InvalidOption(
      "ranks", "is " + std::to_string(o.ranks) + " with --device cuda, where each rank trains on "
                   "the GPU of its LOCAL_RANK, and this process sees " +
                   std::to_string(cuda_devices) + " CUDA device" + (cuda_devices == 1 ? "" : "s") +
                   ": give at most that many ranks, or --device cuda:N --dist-backend gloo to "
                   "share one GPU");
}

std::string dp_backend(const DpBenchOptions& o) {
  using parallel::RankDevices;
  if (o.device == "cpu") return parallel::resolved_backend(o.dist_backend, RankDevices::cpu);
  const bool netns = o.hosts == "netns";
  if (o.ranks == 1 || (o.device == "cuda" && !netns))
    return parallel::resolved_backend(o.dist_backend, RankDevices::gpu_each);
  // Under --hosts netns each host's one rank takes GPU 0 of "cuda", or the GPU "cuda:N" names.
  const std::string gpu = o.device == "cuda" ? "0" : o.device.substr(5);
  return parallel::resolved_backend(
      o.dist_backend, RankDevices::gpu_shared,
      netns ? "GPU " + gpu + ": --hosts netns emulates the hosts on this machine" : o.device);
}

void run_dp_bench(const DpBenchOptions& options, std::ostream& out) {
  validate(options);
  if (options.json_path.empty()) throw InvalidOption("json_path", "is required");
  check_writable(options.json_path);  // fail before the ranks' work, not after it
  if (!options.trace_dir.empty()) {  // the ranks write NAME-rankR.json into it at the end
    std::error_code error;
    if (!std::filesystem::is_directory(options.trace_dir, error))
      throw std::runtime_error("cannot write traces into '" + options.trace_dir + "': " +
                               (std::filesystem::exists(options.trace_dir, error)
                                    ? "it is not a folder"
                                    : "no such folder"));
    check_writable((std::filesystem::path(options.trace_dir) / "rank0.json").string());
  }
  trainer::resolve_device(options.device);  // a GPU this process does not see: before any work
  check_ranks_have_gpus(options, trainer::cuda_device_count());
  const bool emulated = std::any_of(
      options.link_bandwidths.begin(), options.link_bandwidths.end(),
      [&](double b) { return parallel::LinkModel{b, options.link_latency}.emulated(); });
  const bool peer_runs =
      !options.skip_peer &&
      std::find(options.models.begin(), options.models.end(), "resnet") != options.models.end();
  if (peer_runs)  // its torchrun, else its python
    check_peer_launcher(torchrun_command(options.torchrun, options.python).front(),
                        options.torchrun.empty() ? "python" : "torchrun");
  if (dp_backend(options) == "nccl" && emulated && !options.skip_peer)
    throw InvalidOption("dist.backend",
                        "is nccl with emulated links: the DDP peer's delay would run in its "
                        "backward (NCCL's future completes at launch), so its rows would not "
                        "compare; give --no-peer, or --dist-backend gloo");
  // The hosts, and a first shaper on them, before any work: what this machine cannot do (no
  // root, no `tc`, a kernel without netem) fails now, not after the emulated links.
  std::optional<NetnsHosts> hosts;
  if (options.hosts == "netns") {
    NetnsHosts::check_available();
    hosts.emplace(options.ranks);
    hosts->shape({options.link_bandwidths.front(), options.link_delay});
  }
  ScratchDir dir("bench-dp");
  const int port = options.port > 0 ? options.port : parallel::free_loopback_port();
  // The targets of the what-if are measured like the other links, after them.
  std::vector<double> links = options.link_bandwidths;
  links.insert(links.end(), options.predict_links.begin(), options.predict_links.end());
  DpBenchOptions worker = options;
  worker.driver_pid = static_cast<int>(::getpid());
  worker.predict_links.clear();
  worker.link_bandwidths = links;
  worker.json_path = dir.file("emulated-rows.json");
  json rows = run_ranks(worker, dir, "emulated", port, nullptr);

  json peer = nullptr;
  if (peer_runs) {
    const std::string peer_out = dir.file("peer.json");
    std::vector<std::string> argv = torchrun_command(options.torchrun, options.python);
    argv.insert(argv.end(),
                {"--nproc_per_node", std::to_string(options.ranks), "--master_addr", "127.0.0.1",
                 "--master_port",
                 std::to_string(options.port > 0 ? port + 1 : parallel::free_loopback_port()),
                 peer_script("ddp_peer.py")});
    for (auto& a :
         peer_arguments(options, comma_separated(links), options.link_latency, peer_out))
      argv.push_back(a);
    run_peer(argv, dir);
    peer = read_ddp_peer_report(peer_out, options.bucket_mb, options.link_latency);
    for (auto& r : peer["rows"]) r["link_kind"] = "emulated";
  }

  if (hosts) {
    // One job per link: the shaper is set between jobs, never under a running step.
    for (std::size_t i = 0; i < links.size(); ++i) {
      const double bandwidth = links[i];
      hosts->shape({bandwidth, options.link_delay});
      const std::string job = "shaped" + std::to_string(i);
      worker.link_bandwidths = {bandwidth};
      worker.emulate = false;
      worker.json_path = dir.file(job + "-rows.json");
      // Each host's network is its own: the ports are free in it.
      for (auto& r : run_ranks(worker, dir, job, 29400 + static_cast<int>(i), &*hosts))
        rows.push_back(r);
      if (peer_runs) {
        const json shaped =
            run_peer_on_hosts(options, *hosts, bandwidth, dir, job, 29300 + static_cast<int>(i));
        for (const auto& r : shaped["rows"]) peer["rows"].push_back(r);
      }
    }
  }

  out << "data-parallel step on " << options.ranks << " ranks (" << options.threads
      << " compute thread each), median of " << options.steps << " steps after " << options.warmup
      << (options.hosts == "netns" ? "; shaped links: a host per rank" : "") << "\n";
  print_rows(out, rows, peer.is_null() ? json::array() : peer["rows"]);
  json report{{"bench", "dp"}, {"options", options_json(options)}, {"rows", rows},
              {"peer", peer},  {"machine", machine_json()},        {"versions", versions_json()}};
  report["options"].erase("emulate");
  report["options"].erase("driver_pid");
  if (!options.predict_links.empty()) {
    report["options"]["predict_links"] = options.predict_links;
    json predictions = link_predictions(options, rows, "emulated");
    if (options.hosts == "netns")
      for (const auto& p : link_predictions(options, rows, "shaped")) predictions.push_back(p);
    report["link_predictions"] = predictions;
    out << "link what-if: predicted from " << options.link_bandwidths.size()
        << " links, then measured\n";
    for (const auto& p : predictions) {
      out << std::left << std::setw(8) << p["model"].get<std::string>() << std::setw(11)
          << p["link"].get<std::string>() << std::setw(10) << p["link_kind"].get<std::string>()
          << std::setw(9) << p["schedule"].get<std::string>() << std::right << " predicted "
          << fixed(p["predicted_step_seconds"].get<double>() * 1e3, 1) << " ms, measured "
          << fixed(p["measured_step_seconds"].get<double>() * 1e3, 1) << " ms, error "
          << fixed(p["error"].get<double>() * 100, 1) << "%";
      if (p.contains("sleep_model_step_seconds"))
        out << "; sleep model " << fixed(p["sleep_model_step_seconds"].get<double>() * 1e3, 1)
            << " ms (" << fixed(p["sleep_model_difference"].get<double>() * 100, 1) << "% off)";
      out << "\n";
    }
  }
  report["options"].erase("json_path");
  write_file_atomically(options.json_path, report.dump(2) + "\n");
  out << "wrote " << options.json_path << "\n";
}

void run_dp_worker_from(const std::string& options_path, const parallel::DistEnv& env) {
  std::ifstream in(options_path);
  if (!in) throw std::runtime_error("cannot read '" + options_path + "'");
  const DpBenchOptions options = options_from(json::parse(in));
  // A rank whose driver is gone (killed, whatever the signal) ends too, rather than measuring
  // for nobody; checked after arming, in case the driver went first.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (options.driver_pid > 0 && ::getppid() != options.driver_pid)
    throw std::runtime_error("the driver (pid " + std::to_string(options.driver_pid) +
                             ") is gone");
  run_dp_worker(options, env);
}

}  // namespace engram::bench
