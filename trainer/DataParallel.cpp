#include "trainer/DataParallel.h"

#include "common/Hash.h"
#include "memory/MemoryTracker.h"
#include "nn/Runtime.h"
#include "parallel/Communicator.h"
#include "trainer/Device.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <sstream>

namespace engram::trainer {
namespace {

/// What every rank must have in common, as text: a difference names itself.
std::vector<std::pair<std::string, std::string>> configuration(
    Workload& workload, const std::vector<at::Tensor>& parameters, const TrainingOptions& o) {
  std::ostringstream shapes;
  for (const auto& p : parameters) shapes << p.sizes() << ' ';
  std::ostringstream training;
  training << "steps " << o.steps << ", batch " << o.batch << ", lr " << o.learning_rate
           << ", optimizer " << o.optimizer
           << (o.optimizer == "sgd" ? " (momentum " + std::to_string(o.momentum) + ")" : "")
           << ", clip " << o.grad_clip << ", seed " << o.seed << ", grad sync "
           << parallel::grad_sync_name(o.dist.grad_sync) << " (k " << o.dist.ooo_k << ", chunk "
           << o.dist.chunk_layers << "), buckets " << o.dist.bucket_bytes << "/"
           << o.dist.first_bucket_bytes << ", sync batch norm " << o.dist.sync_batch_norm
           << ", memory";
  for (const auto& t : o.memory.techniques) training << ' ' << t;
  training << " budget " << o.memory.budget_bytes << ", curriculum " << o.curriculum;
  std::vector<std::pair<std::string, std::string>> items{
      {"the model's parameter shapes", shapes.str()}};
  // What the model's train function read (TrainingOptions::identity: its configuration on the
  // first line, then "NAME VALUE" lines, the data files' bytes and checksum among them): each
  // host reads its own copy of the data, so the ranks compare what they read, not only how much.
  std::istringstream identity(o.identity);
  bool first = true;
  for (std::string line; std::getline(identity, line); first = false) {
    const auto space = line.find(' ');
    if (first) {
      items.emplace_back("the model's configuration", line);
    } else if (space != std::string::npos) {
      const std::string name = line.substr(0, space);
      items.emplace_back(name == "data" || name == "corpus"
                             ? "the contents of the " + name + " file (bytes:FNV-1a)"
                             : "the " + name + " option",
                         line.substr(space + 1));
    }
  }
  items.emplace_back("the number of training examples", std::to_string(workload.num_examples()));
  // Where the ranks compute (each its own GPU N, so only the kind), and whether deterministically:
  // NCCL leaves out its nondeterministic algorithms only on the ranks that asked for it.
  items.emplace_back("the device (--device)", o.device == "cpu" ? "cpu" : "cuda");
  items.emplace_back("determinism (--deterministic)", o.deterministic ? "on" : "off");
  items.emplace_back("the training options", training.str());
  return items;
}

/// The layers' sum over replicas, on the communicator.
class CommunicatorSum : public nn::ReplicaSum {
 public:
  explicit CommunicatorSum(parallel::Communicator& comm) : comm_(comm) {}
  void sum(at::Tensor& tensor) override { comm_.allreduce(tensor, "batch-norm statistics"); }

 private:
  parallel::Communicator& comm_;
};

}  // namespace

std::vector<std::size_t> shard_of(const std::vector<std::size_t>& global, int rank, int world) {
  const std::size_t n = global.size();
  const std::size_t begin = n * static_cast<std::size_t>(rank) / world;
  const std::size_t end = n * static_cast<std::size_t>(rank + 1) / world;
  return {global.begin() + static_cast<std::ptrdiff_t>(begin),
          global.begin() + static_cast<std::ptrdiff_t>(end)};
}

std::uint64_t parameter_hash(const std::vector<at::Tensor>& parameters) {
  std::uint64_t h = kFnv1aSeed;
  for (const auto& p : parameters) {
    const at::Tensor c = p.detach().to(at::kCPU).contiguous();  // the bytes, wherever they live
    h = fnv1a(c.data_ptr(), c.numel() * c.element_size(), h);
  }
  return h;
}

JobScope::JobScope(const TrainingOptions& options) {
  // Before the process group: ProcessGroupNCCL leaves out NCCL's nondeterministic algorithms
  // only when deterministic algorithms are on at its making.
  if (options.deterministic) make_deterministic();
  if (options.job.distributed()) comm_ = parallel::join_job(options.job, job_dist_options(options));
}

JobScope::~JobScope() = default;

DataParallel::DataParallel(Workload& workload, std::vector<at::Tensor> parameters,
                           const TrainingOptions& options,
                           std::function<void(const std::vector<std::size_t>&)> update_late)
    : comm_(parallel::join_job(options.job, job_dist_options(options))),
      parameters_(std::move(parameters)) {
  for (const auto& [what, value] : configuration(workload, parameters_, options))
    comm_->agree(what, value);
  if (workload.num_examples() < static_cast<std::size_t>(comm_->world_size())) {
    throw std::runtime_error("data-parallel training on " + std::to_string(comm_->world_size()) +
                             " ranks needs at least as many examples; there are " +
                             std::to_string(workload.num_examples()));
  }
  double broadcast_seconds = 0;
  {
    // Every replica starts from rank 0's parameters, as PyTorch DDP does.
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> flat;
    for (const auto& p : parameters_) flat.push_back(p.detach().reshape({-1}));
    at::Tensor all = at::cat(flat);
    // NCCL makes its communicator at the first collective on a device: not part of what the
    // broadcast's time stands for (the link, which out-of-order backprop's model reads).
    if (all.is_cuda()) {
      at::Tensor warm = at::zeros({1}, all.options());
      comm_->allreduce(warm, "the first collective on the device");
    }
    const auto start = std::chrono::steady_clock::now();
    comm_->broadcast(all, 0);
    broadcast_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::int64_t offset = 0;
    for (auto& p : parameters_) {
      p.detach().copy_(all.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
  }
  schedule_ =
      make_grad_schedule({*comm_, parameters_, options, std::move(update_late), broadcast_seconds});
  if (options.dist.sync_batch_norm) replicas_ = std::make_unique<CommunicatorSum>(*comm_);
}

DataParallel::~DataParallel() = default;

int DataParallel::rank() const { return comm_->rank(); }

int DataParallel::world_size() const { return comm_->world_size(); }

std::vector<std::size_t> DataParallel::shard(const std::vector<std::size_t>& global) const {
  return shard_of(global, comm_->rank(), comm_->world_size());
}

void DataParallel::check_replicas(long step) {
  if (!schedule_->exchanges()) return;  // without an exchange the replicas drift apart
  settle();
  const int world = comm_->world_size();
  at::Tensor hashes = at::zeros({world}, at::kLong);
  hashes[comm_->rank()] = static_cast<std::int64_t>(parameter_hash(parameters_));
  comm_->allreduce(hashes, "the parameters' hashes");
  const auto* h = hashes.data_ptr<std::int64_t>();
  for (int r = 1; r < world; ++r) {
    if (h[r] != h[0]) {
      throw std::runtime_error("the replicas' parameters differ after step " +
                               std::to_string(step) + ": rank " + std::to_string(r) +
                               "'s hash is not rank 0's");
    }
  }
}

void DataParallel::combine_metrics(std::map<std::string, double>& mean) {
  std::vector<double> values;
  for (const auto& [k, v] : mean) values.push_back(v);
  at::Tensor t = at::tensor(values, at::kDouble);
  comm_->allreduce(t, "the logged metrics");
  const auto* sum = t.data_ptr<double>();
  std::size_t i = 0;
  for (auto& [k, v] : mean) {
    const bool is_loss = k == "loss" || k.size() > 5 && k.compare(k.size() - 5, 5, "_loss") == 0;
    v = is_loss ? sum[i] : sum[i] / comm_->world_size();
    ++i;
  }
}

bool DataParallel::log_on_one_rank(
    const std::function<bool(long, std::map<std::string, double>&)>& on_log, long step,
    std::map<std::string, double>& mean) {
  at::Tensor live = at::zeros({comm_->world_size()}, at::kLong);
  if (auto* tracker = memory::MemoryTracker::installed())
    live[comm_->rank()] = tracker->live_bytes();
  comm_->allreduce(live, "the ranks' memory in use");
  const int evaluator = static_cast<int>(live.argmin().item<std::int64_t>());
  std::string verdict;
  if (comm_->rank() == evaluator) {
    const bool stop = on_log(step, mean);
    verdict = nlohmann::json{{"stop", stop}, {"metrics", mean}}.dump();
  }
  const auto result = nlohmann::json::parse(comm_->broadcast_text(verdict, evaluator));
  mean = result.at("metrics").get<std::map<std::string, double>>();
  return result.at("stop").get<bool>();
}

int DataParallel::agreed_signal(int local) {
  at::Tensor noted = at::zeros({2}, at::kLong);
  if (local == SIGTERM) noted[0] = 1;
  if (local == SIGINT) noted[1] = 1;
  comm_->allreduce(noted, "the ranks' interrupt signals");
  if (noted[0].item<std::int64_t>() > 0) return SIGTERM;
  return noted[1].item<std::int64_t>() > 0 ? SIGINT : 0;
}

void DataParallel::barrier() { comm_->barrier(); }

}  // namespace engram::trainer
