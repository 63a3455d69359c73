#include "dist/GradReducer.h"

#include "dist/Communicator.h"
#include "memory/MemoryTracker.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace engram::dist {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& order,
                                                     const std::vector<std::size_t>& bytes,
                                                     std::size_t first_cap, std::size_t cap) {
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t filled = 0;
  for (std::size_t p : order) {
    const std::size_t limit = buckets.size() == 1 ? first_cap : cap;
    if (buckets.empty() || (filled > 0 && filled + bytes.at(p) > limit)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(p);
    filled += bytes.at(p);
  }
  return buckets;
}

GradReducer::GradReducer(Communicator& comm, std::vector<at::Tensor> parameters,
                         const DistOptions& options)
    : comm_(comm), parameters_(std::move(parameters)), options_(options) {
  const std::size_t n = parameters_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const at::Tensor& p = parameters_[i];
    if (p.scalar_type() != parameters_[0].scalar_type())
      throw std::invalid_argument("data-parallel training needs parameters of one type");
    index_of_[p.unsafeGetTensorImpl()] = i;
    bytes_.push_back(p.numel() * p.element_size());
    total_bytes_ += bytes_.back();
  }
  // Before the first step: one bucket, every parameter, in the reverse of the workload's order
  // (roughly the order backward produces them).
  std::vector<std::size_t> all(n);
  std::iota(all.rbegin(), all.rend(), 0);
  buckets_ = {all};
  bucket_of_.assign(n, 0);
  expected_.assign(n, 0);
  seen_.assign(n, 0);
  if (options_.grad_sync == GradSync::none) total_bytes_ = 0;
}

GradReducer::~GradReducer() = default;

std::vector<std::size_t> GradReducer::bucket_bytes() const {
  std::vector<std::size_t> sizes;
  for (const auto& bucket : buckets_) {
    std::size_t bytes = 0;
    for (std::size_t i : bucket) bytes += bytes_[i];
    sizes.push_back(bytes);
  }
  return sizes;
}

void GradReducer::begin_step() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fill(seen_.begin(), seen_.end(), 0);
  ready_order_.clear();
  pending_.clear();
  pending_.resize(buckets_.size());
  waiting_.assign(buckets_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) waiting_[b] = buckets_[b].size();
  next_launch_ = 0;
  sent_early_ = 0;
  in_backward_ = true;
  if (buffers_.size() != buckets_.size() && options_.grad_sync != GradSync::none) {
    // Allocated once per bucket layout, as gradients.
    memory::TagGuard tag(memory::Tag::gradient);
    buffers_.clear();
    for (const auto& bucket : buckets_) {
      std::int64_t numel = 0;
      for (std::size_t i : bucket) numel += parameters_[i].numel();
      buffers_.push_back(at::empty({numel}, parameters_[0].options()));
    }
  }
}

void GradReducer::ready(const std::vector<at::Tensor>& parameters) {
  if (options_.grad_sync == GradSync::none) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_backward_) return;  // a backward outside a step (planning) is not exchanged
  const bool learning = steps_ == 0;
  for (const at::Tensor& t : parameters) {
    auto it = index_of_.find(t.unsafeGetTensorImpl());
    if (it == index_of_.end()) continue;  // not a trained parameter
    const std::size_t i = it->second;
    ++seen_[i];
    if (learning) {
      ready_order_.push_back(i);
      continue;
    }
    if (options_.grad_sync != GradSync::overlap || expected_[i] == 0) continue;
    const std::size_t b = bucket_of_[i];
    if (b < next_launch_) {
      throw std::logic_error("parameter " + std::to_string(i) +
                             " was reported ready after its bucket was sent: its layer ran more "
                             "often in this step than in the first");
    }
    if (seen_[i] == expected_[i] && --waiting_[b] == 0) launch_in_order();
  }
}

void GradReducer::launch_in_order() {
  while (next_launch_ < buckets_.size() && waiting_[next_launch_] == 0) {
    launch(next_launch_);
    ++next_launch_;
    if (in_backward_) ++sent_early_;
  }
}

void GradReducer::launch(std::size_t b) {
  at::Tensor& buffer = buffers_.at(b);
  std::int64_t offset = 0;
  for (std::size_t i : buckets_[b]) {
    const at::Tensor& p = parameters_[i];
    at::Tensor slice = buffer.narrow(0, offset, p.numel());
    const at::Tensor& g = p.grad();
    if (g.defined())
      slice.copy_(g.reshape({-1}));
    else
      slice.zero_();
    offset += p.numel();
  }
  pending_[b] = comm_.allreduce_async(buffer, "bucket " + std::to_string(b));
}

void GradReducer::end_backward() {
  if (options_.grad_sync == GradSync::none) {
    ++steps_;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_backward_ = false;
    std::fill(waiting_.begin(), waiting_.end(), 0);
    launch_in_order();
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b]->wait();
    std::int64_t offset = 0;
    for (std::size_t i : buckets_[b]) {
      at::Tensor& p = parameters_[i];
      at::Tensor sum = buffers_[b].narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(sum);
      } else {
        memory::TagGuard tag(memory::Tag::gradient);
        p.mutable_grad() = sum.clone();
      }
      offset += p.numel();
    }
  }
  pending_.clear();
  if (steps_ == 0 && options_.grad_sync == GradSync::overlap) learn_buckets();
  ++steps_;
}

void GradReducer::learn_buckets() {
  const std::size_t n = parameters_.size();
  // This rank's order: each parameter where its last report came, then the unreported ones.
  std::vector<std::int64_t> plan(2 * n, 0);
  {
    std::vector<char> placed(n, 0);
    std::vector<std::size_t> order;
    for (auto it = ready_order_.rbegin(); it != ready_order_.rend(); ++it) {
      if (!placed[*it]) {
        placed[*it] = 1;
        order.push_back(*it);
      }
    }
    std::reverse(order.begin(), order.end());
    for (std::size_t i = n; i-- > 0;)
      if (!placed[i]) order.push_back(i);
    for (std::size_t k = 0; k < n; ++k) {
      plan[k] = static_cast<std::int64_t>(order[k]);
      plan[n + k] = seen_[order[k]];
    }
  }
  // Every rank takes rank 0's, so that buckets and their send order agree.
  at::Tensor shared = at::tensor(plan, at::kLong);
  comm_.broadcast(shared, 0);
  const auto* v = shared.data_ptr<std::int64_t>();
  std::vector<std::size_t> order(n);
  for (std::size_t k = 0; k < n; ++k) {
    order[k] = static_cast<std::size_t>(v[k]);
    expected_[order[k]] = static_cast<int>(v[n + k]);
  }
  buckets_ = assign_buckets(order, bytes_, options_.first_bucket_bytes, options_.bucket_bytes);
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t i : buckets_[b]) bucket_of_[i] = b;
  buffers_.clear();
}

}  // namespace engram::dist
