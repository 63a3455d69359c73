#include "trainer/DataParallel.h"

#include "common/Hash.h"
#include "dist/Communicator.h"
#include "dist/GradReducer.h"
#include "nn/GradScheduler.h"
#include "nn/Runtime.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

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
           << ", clip " << o.grad_clip << ", seed " << o.seed << ", grad sync "
           << dist::grad_sync_name(o.dist.grad_sync) << ", buckets " << o.dist.bucket_bytes << "/"
           << o.dist.first_bucket_bytes << ", sync batch norm " << o.dist.sync_batch_norm
           << ", memory";
  for (const auto& t : o.memory.techniques) training << ' ' << t;
  training << " budget " << o.memory.budget_bytes << ", curriculum " << o.curriculum;
  return {{"the model's parameter shapes", shapes.str()},
          {"the number of training examples", std::to_string(workload.num_examples())},
          {"the training options", training.str()}};
}

/// The layers' sum over replicas, on the communicator.
class CommunicatorSum : public nn::ReplicaSum {
 public:
  explicit CommunicatorSum(dist::Communicator& comm) : comm_(comm) {}
  void sum(at::Tensor& tensor) override { comm_.allreduce(tensor, "batch-norm statistics"); }

 private:
  dist::Communicator& comm_;
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
    const at::Tensor c = p.detach().contiguous();
    h = fnv1a(c.data_ptr(), c.numel() * c.element_size(), h);
  }
  return h;
}

DataParallel::DataParallel(dist::Communicator& comm, Workload& workload,
                           std::vector<at::Tensor> parameters, const TrainingOptions& options)
    : comm_(comm),
      parameters_(std::move(parameters)),
      exchanges_(options.dist.grad_sync != dist::GradSync::none) {
  for (const auto& [what, value] : configuration(workload, parameters_, options))
    comm_.agree(what, value);
  if (workload.num_examples() < static_cast<std::size_t>(comm_.world_size())) {
    throw std::runtime_error("data-parallel training on " + std::to_string(comm_.world_size()) +
                             " ranks needs at least as many examples; there are " +
                             std::to_string(workload.num_examples()));
  }
  {
    // Every replica starts from rank 0's parameters, as PyTorch DDP does.
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> flat;
    for (const auto& p : parameters_) flat.push_back(p.detach().reshape({-1}));
    at::Tensor all = at::cat(flat);
    comm_.broadcast(all, 0);
    std::int64_t offset = 0;
    for (auto& p : parameters_) {
      p.detach().copy_(all.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
  }
  reducer_ = std::make_unique<dist::GradReducer>(comm_, parameters_, options.dist);
  scheduler_ = std::make_unique<nn::ImmediateScheduler>();
  if (options.dist.sync_batch_norm) replicas_ = std::make_unique<CommunicatorSum>(comm_);
  scheduler_->on_ready(
      [this](const nn::WeightGradTask& task) { reducer_->ready(task.parameters); });
}

DataParallel::~DataParallel() = default;

std::vector<std::size_t> DataParallel::shard(const std::vector<std::size_t>& global) const {
  return shard_of(global, comm_.rank(), comm_.world_size());
}

nn::GradScheduler* DataParallel::scheduler() { return scheduler_.get(); }

nn::ReplicaSum* DataParallel::replicas() { return replicas_.get(); }

void DataParallel::before(StepPhase phase) {
  if (phase == StepPhase::backward) reducer_->begin_step();
}

void DataParallel::after(StepPhase phase) {
  if (phase == StepPhase::backward) reducer_->end_backward();
}

void DataParallel::check_replicas(long step) {
  if (!exchanges_) return;  // without an exchange the replicas drift apart by design
  const int world = comm_.world_size();
  at::Tensor hashes = at::zeros({world}, at::kLong);
  hashes[comm_.rank()] = static_cast<std::int64_t>(parameter_hash(parameters_));
  comm_.allreduce(hashes, "the parameters' hashes");
  const auto* h = hashes.data_ptr<std::int64_t>();
  for (int r = 1; r < world; ++r) {
    if (h[r] != h[0]) {
      throw std::runtime_error("the replicas' parameters differ after step " +
                               std::to_string(step) + ": rank " + std::to_string(r) +
                               "'s hash is not rank 0's");
    }
  }
}

}  // namespace engram::trainer
