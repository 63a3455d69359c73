#include "trainer/DataParallel.h"

#include "common/Hash.h"
#include "dist/ChunkSearch.h"
#include "dist/Communicator.h"
#include "dist/GradReducer.h"
#include "dist/OooPlan.h"
#include "nn/GradScheduler.h"
#include "nn/Runtime.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
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
           << dist::grad_sync_name(o.dist.grad_sync) << " (k " << o.dist.ooo_k << ", chunk "
           << o.dist.chunk_layers << "), buckets " << o.dist.bucket_bytes << "/"
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
      options_(options),
      exchanges_(options.dist.grad_sync != dist::GradSync::none),
      out_of_order_(options.dist.grad_sync == dist::GradSync::ooo),
      chunked_(options.dist.grad_sync == dist::GradSync::host) {
  for (std::size_t i = 0; i < parameters_.size(); ++i)
    index_of_[parameters_[i].unsafeGetTensorImpl()] = i;
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
    const auto start = Clock::now();
    comm_.broadcast(all, 0);
    broadcast_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
    std::int64_t offset = 0;
    for (auto& p : parameters_) {
      p.detach().copy_(all.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
  }
  reducer_ = std::make_unique<dist::GradReducer>(comm_, parameters_, options.dist);
  if (out_of_order_) {
    // From the second step, the deferred layers' weight gradients wait for the input-gradient
    // chain and then run input-first.
    scheduler_ = std::make_unique<nn::DeferredScheduler>(
        nn::DeferredScheduler::Order::reverse,
        [this](const nn::WeightGradTask& task) { return reducer_->deferred(task.parameters); });
    profiling_ = true;
  } else {
    scheduler_ = std::make_unique<nn::ImmediateScheduler>();
  }
  if (options.dist.sync_batch_norm) replicas_ = std::make_unique<CommunicatorSum>(comm_);
  scheduler_->on_ready([this](const nn::WeightGradTask& task) {
    reducer_->ready(task.parameters);
    if (!profiling_ || task.parameters.empty()) return;
    auto it = index_of_.find(task.parameters.front().unsafeGetTensorImpl());
    if (it == index_of_.end()) return;
    auto layer = profile_.layer_of.find(it->second);
    if (layer != profile_.layer_of.end()) profile_.weight_grad[layer->second] += task.seconds;
  });
}

DataParallel::~DataParallel() = default;

std::vector<std::size_t> DataParallel::shard(const std::vector<std::size_t>& global) const {
  return shard_of(global, comm_.rank(), comm_.world_size());
}

nn::GradScheduler* DataParallel::scheduler() { return scheduler_.get(); }

nn::ReplicaSum* DataParallel::replicas() { return replicas_.get(); }

nn::ParameterGate* DataParallel::gate() { return out_of_order_ ? this : nullptr; }

void DataParallel::before(StepPhase phase) {
  if (phase == StepPhase::batch) step_start_ = Clock::now();
  if (phase == StepPhase::forward && profiling_) {
    profile_.open = static_cast<std::size_t>(-1);
    in_forward_ = true;
  }
  if (phase == StepPhase::backward) {
    settle();  // a deferred layer the forward did not reach
    if (profiling_) profile_.backward_start = Clock::now();
    reducer_->begin_step();
  }
}

void DataParallel::after(StepPhase phase) {
  if (phase == StepPhase::forward && profiling_) {
    close_layer(Clock::now());
    in_forward_ = false;
  }
  if (phase == StepPhase::backward) {
    if (profiling_) {
      profile_.backward =
          std::chrono::duration<double>(Clock::now() - profile_.backward_start).count();
      choose_deferred();
      profiling_ = false;
    }
    const bool first = !chunk_.settled && chunk_.chunk == 0;
    reducer_->end_backward();
    if (out_of_order_ && ooo_.made) ooo_.k = reducer_->deferred_layers().size();  // rank 0's choice
    if (chunked_ && first) {
      // The first step learned the layers; the search starts at one layer per chunk.
      chunk_.layers = reducer_->layers().size();
      chunk_.automatic = options_.dist.chunk_layers < 0;
      if (chunk_.automatic && chunk_.layers > 0) {
        search_ = std::make_unique<dist::ChunkSearch>(chunk_.layers);
        chunk_.chunk = search_->current();
        chunk_.settled = search_->done();
      } else {
        chunk_.chunk = chunk_.automatic ? 1 : static_cast<std::size_t>(options_.dist.chunk_layers);
        chunk_.settled = true;
      }
      reducer_->set_chunk(chunk_.chunk);
      chunk_steps_ = -1;  // this step is not one of the chunk's
    }
  }
  if (phase == StepPhase::optimizer && chunked_ && !chunk_.settled)
    search_chunk(std::chrono::duration<double>(Clock::now() - step_start_).count());
}

void DataParallel::search_chunk(double seconds) {
  // Two steps per size: the first reallocates the buffers, the second is timed. Every rank
  // records the mean over the ranks, so every rank decides alike.
  if (++chunk_steps_ < 2) return;
  at::Tensor t = at::tensor({seconds}, at::kDouble);
  comm_.allreduce(t, "the chunk search's step time");
  search_->record(t.item<double>() / comm_.world_size());
  chunk_.path = search_->path();
  chunk_.chunk = search_->current();
  chunk_.settled = search_->done();
  reducer_->set_chunk(chunk_.chunk);
  chunk_steps_ = 0;
}

void DataParallel::before_forward(const std::vector<at::Tensor>& parameters) {
  if (profiling_) {
    if (!in_forward_) return;  // a recomputed unit's forward, during backward
    const auto now = Clock::now();
    close_layer(now);
    // A parameter belongs to the first layer that read it (a tied one is not a second layer's).
    std::vector<std::size_t> indices;
    std::size_t known_layer = static_cast<std::size_t>(-1);
    for (const auto& p : parameters) {
      auto it = index_of_.find(p.unsafeGetTensorImpl());
      if (it == index_of_.end()) continue;
      auto layer = profile_.layer_of.find(it->second);
      if (layer == profile_.layer_of.end())
        indices.push_back(it->second);
      else if (known_layer == static_cast<std::size_t>(-1))
        known_layer = layer->second;
    }
    if (indices.empty() && known_layer == static_cast<std::size_t>(-1)) return;
    if (!indices.empty()) {
      const std::size_t layer = profile_.layers.size();
      for (std::size_t i : indices) profile_.layer_of.emplace(i, layer);
      profile_.layers.push_back(indices);
      profile_.forward.push_back(0);
      profile_.weight_grad.push_back(0);
      profile_.open = layer;
    } else {
      profile_.open = known_layer;
    }
    profile_.opened = now;
    return;
  }
  if (reducer_->has_pending()) apply(reducer_->take(parameters));
}

void DataParallel::close_layer(Clock::time_point now) {
  if (profile_.open >= profile_.layers.size()) return;
  profile_.forward[profile_.open] += std::chrono::duration<double>(now - profile_.opened).count();
  profile_.open = static_cast<std::size_t>(-1);
}

void DataParallel::choose_deferred() {
  const std::size_t n = profile_.layers.size();
  // dX: what backward spent beyond the weight gradients, shared as the forward times are (a
  // layer's input gradient costs about its forward).
  double weight_grads = 0, forward = 0;
  for (std::size_t l = 0; l < n; ++l) {
    weight_grads += profile_.weight_grad[l];
    forward += profile_.forward[l];
  }
  const double input_grads = std::max(0.0, profile_.backward - weight_grads);
  // The link: the emulated one's model, or what the initial broadcast of every parameter took
  // (a ring all-reduce of two ranks moves each byte once through each link, as a broadcast).
  std::size_t total_bytes = 0;
  for (const auto& p : parameters_) total_bytes += p.numel() * p.element_size();
  const int world = comm_.world_size();
  const double ring = 2.0 * (world - 1) / world;
  std::vector<dist::LayerCost> costs(n);
  for (std::size_t l = 0; l < n; ++l) {
    std::size_t bytes = 0;
    for (std::size_t i : profile_.layers[l])
      bytes += parameters_[i].numel() * parameters_[i].element_size();
    const double measured = total_bytes > 0
                                ? broadcast_seconds_ * ring * static_cast<double>(bytes) /
                                      static_cast<double>(total_bytes)
                                : 0;
    costs[l].forward = profile_.forward[l];
    costs[l].input_grad = forward > 0 ? input_grads * profile_.forward[l] / forward : 0;
    costs[l].weight_grad = profile_.weight_grad[l];
    costs[l].allreduce = std::max(measured, comm_.link().allreduce_seconds(bytes, world));
  }
  ooo_.made = true;
  ooo_.layers = n;
  ooo_.automatic = options_.dist.ooo_k < 0;
  ooo_.predicted_seconds.clear();
  for (std::size_t k = 0; k <= n; ++k)
    ooo_.predicted_seconds.push_back(dist::predict_ooo_step(costs, k));
  ooo_.k = ooo_.automatic ? dist::choose_ooo_k(costs)
                          : std::min(n, static_cast<std::size_t>(options_.dist.ooo_k));
  // Rank 0's choice is every rank's (the reducer shares it with its buckets).
  reducer_->set_deferred({profile_.layers.begin(), profile_.layers.begin() + ooo_.k});
}

void DataParallel::apply(const std::vector<std::size_t>& indices) {
  if (indices.empty()) return;
  if (stepper_ == nullptr)
    throw std::logic_error("DataParallel: out-of-order backprop needs the session's Stepper");
  stepper_->update_late(indices);
}

void DataParallel::settle() {
  if (out_of_order_ && reducer_->has_pending()) apply(reducer_->take_all());
}

void DataParallel::check_replicas(long step) {
  if (!exchanges_) return;  // without an exchange the replicas drift apart by design
  settle();
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
