#include "parallel/GradReducer.h"

#include "memory/MemoryTracker.h"
#include "parallel/Communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace engram::parallel {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& order,
                                                     const std::vector<std::size_t>& bytes,
                                                     std::size_t first_cap, std::size_t cap) {
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> open;
  std::size_t filled = 0;
  for (std::size_t p : order) {
    open.push_back(p);
    filled += bytes.at(p);
    if (filled >= (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(open));
      open.clear();
      filled = 0;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

GradReducer::GradReducer(Communicator& comm, std::vector<at::Tensor> parameters,
                         Options options)
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
  bucket_deferred_.assign(1, 0);
  pending_parameter_.assign(n, 0);
  parameter_deferred_.assign(n, 0);
  expected_.assign(n, 0);
  seen_.assign(n, 0);
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

std::size_t GradReducer::index_of(const at::Tensor& parameter) const {
  auto it = index_of_.find(parameter.unsafeGetTensorImpl());
  return it == index_of_.end() ? static_cast<std::size_t>(-1) : it->second;
}

void GradReducer::begin_step() {
  if (pending_parameters_ > 0) {
    throw std::logic_error(
        "GradReducer: a deferred layer's sum was not taken before the next "
        "backward");
  }
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
  if (buffers_.size() != buckets_.size()) {
    // Allocated once per bucket layout, as gradients.
    memory::TagGuard tag(memory::Tag::gradient);
    buffers_.clear();
    for (const auto& bucket : buckets_) {
      std::int64_t numel = 0;
      for (std::size_t i : bucket) numel += parameters_[i].numel();
      // Layer chunks are summed in host memory whatever device the parameters live on.
      auto options = parameters_[0].options();
      if (options_.layout == Layout::layer_chunks) options = options.device(at::kCPU);
      buffers_.push_back(at::empty({numel}, options));
    }
  }
}

void GradReducer::ready(const std::vector<at::Tensor>& parameters) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_backward_) return;  // a backward outside a step (planning) is not exchanged
  const bool learning = steps_ == 0;
  if (learning) ready_groups_.emplace_back();
  for (const at::Tensor& t : parameters) {
    auto it = index_of_.find(t.unsafeGetTensorImpl());
    if (it == index_of_.end()) continue;  // not a trained parameter
    const std::size_t i = it->second;
    ++seen_[i];
    if (learning) {
      ready_order_.push_back(i);
      ready_groups_.back().push_back(i);
      continue;
    }
    if (options_.layout == Layout::one_bucket || expected_[i] == 0) continue;
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
  if (bucket_deferred_[b]) {
    // The local gradient is in the buffer now; the optimizer must not see it, and take() puts
    // the sum in its place.
    for (std::size_t i : buckets_[b]) {
      parameters_[i].mutable_grad() = at::Tensor();
      pending_parameter_[i] = 1;
      ++pending_parameters_;
    }
  }
}

void GradReducer::write_sums(std::size_t b, std::vector<std::size_t>* written) {
  pending_[b]->wait();
  std::int64_t offset = 0;
  for (std::size_t i : buckets_[b]) {
    at::Tensor& p = parameters_[i];
    at::Tensor sum = buffers_[b].narrow(0, offset, p.numel()).view(p.sizes());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(sum);
    } else {
      memory::TagGuard tag(memory::Tag::gradient);
      p.mutable_grad() = sum.to(p.device(), p.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
    }
    offset += p.numel();
    if (pending_parameter_[i]) {
      pending_parameter_[i] = 0;
      --pending_parameters_;
    }
    if (written != nullptr) written->push_back(i);
  }
  pending_[b].reset();
}

void GradReducer::end_backward() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_backward_ = false;
    std::fill(waiting_.begin(), waiting_.end(), 0);
    launch_in_order();
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    if (!bucket_deferred_[b]) write_sums(b, nullptr);
  if (steps_ == 0 && options_.layout != Layout::one_bucket) learn_buckets();
  ++steps_;
}

void GradReducer::learn_buckets() {
  const std::size_t n = parameters_.size();
  // Per parameter in send order: its index, its reports per step, and its deferred layer (-1:
  // none). This rank's order: each parameter where its last report came, then the unreported
  // ones.
  // ooo: the deferred layers; host: every layer, in the order backward first reported them.
  std::vector<std::int64_t> layer_of(n, -1);
  if (options_.layout == Layout::layer_chunks) {
    std::int64_t next = 0;
    for (const auto& group : ready_groups_) {
      bool fresh = !group.empty();
      for (std::size_t i : group) fresh = fresh && layer_of[i] < 0;
      if (!fresh) continue;  // a layer reporting again (one used several times in the step)
      for (std::size_t i : group) layer_of[i] = next;
      ++next;
    }
  } else {
    for (std::size_t l = 0; l < deferred_layers_.size(); ++l)
      for (std::size_t i : deferred_layers_[l]) layer_of[i] = static_cast<std::int64_t>(l);
  }
  std::vector<std::int64_t> plan(3 * n, 0);
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
      plan[2 * n + k] = layer_of[order[k]];
    }
  }
  // Every rank takes rank 0's, so that buckets and their send order agree.
  at::Tensor shared = at::tensor(plan, at::kLong);
  comm_.broadcast(shared, 0);
  const auto* v = shared.data_ptr<std::int64_t>();
  std::vector<std::size_t> order;
  std::vector<std::vector<std::size_t>> layers;
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = static_cast<std::size_t>(v[k]);
    expected_[i] = static_cast<int>(v[n + k]);
    const std::int64_t layer = v[2 * n + k];
    if (layer < 0) {
      order.push_back(i);
      continue;
    }
    if (static_cast<std::size_t>(layer) >= layers.size()) layers.resize(layer + 1);
    layers[layer].push_back(i);
  }
  if (options_.layout == Layout::layer_chunks) {
    layers_ = std::move(layers);
    unreported_ = std::move(order);
    set_chunk(1);
    return;
  }
  for (const auto& layer : layers)
    for (std::size_t i : layer) parameter_deferred_[i] = 1;
  buckets_ = assign_buckets(order, bytes_, options_.first_bucket_bytes, options_.bucket_bytes);
  bucket_deferred_.assign(buckets_.size(), 0);
  for (auto& layer : layers) {
    if (layer.empty()) continue;
    buckets_.push_back(layer);
    bucket_deferred_.push_back(1);
  }
  deferred_layers_ = std::move(layers);
  deferred_layers_.erase(std::remove_if(deferred_layers_.begin(), deferred_layers_.end(),
                                        [](const auto& l) { return l.empty(); }),
                         deferred_layers_.end());
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t i : buckets_[b]) bucket_of_[i] = b;
  buffers_.clear();
}

void GradReducer::set_chunk(std::size_t layers) {
  if (options_.layout != Layout::layer_chunks)
    throw std::logic_error("GradReducer::set_chunk: only for Layout::layer_chunks");
  if (in_backward_) throw std::logic_error("GradReducer::set_chunk: not during a step");
  const std::size_t chunk = std::max<std::size_t>(1, layers);
  buckets_.clear();
  for (std::size_t l = 0; l < layers_.size(); l += chunk) {
    buckets_.emplace_back();
    for (std::size_t k = l; k < std::min(layers_.size(), l + chunk); ++k)
      buckets_.back().insert(buckets_.back().end(), layers_[k].begin(), layers_[k].end());
  }
  if (!unreported_.empty()) buckets_.push_back(unreported_);  // sent by end_backward()
  bucket_deferred_.assign(buckets_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t i : buckets_[b]) bucket_of_[i] = b;
  buffers_.clear();  // the next begin_step() allocates them for these buckets
}

void GradReducer::set_deferred(std::vector<std::vector<std::size_t>> layers) {
  std::vector<char> seen(parameters_.size(), 0);
  for (const auto& layer : layers) {
    for (std::size_t i : layer) {
      if (i >= parameters_.size() || seen[i])
        throw std::invalid_argument("GradReducer::set_deferred: parameter " + std::to_string(i) +
                                    " is not a parameter or is named twice");
      seen[i] = 1;
    }
  }
  deferred_layers_ = std::move(layers);
}

bool GradReducer::deferred(const std::vector<at::Tensor>& parameters) const {
  for (const at::Tensor& p : parameters) {
    const std::size_t i = index_of(p);
    if (i < parameter_deferred_.size() && parameter_deferred_[i]) return true;
  }
  return false;
}

std::vector<std::size_t> GradReducer::take(const std::vector<at::Tensor>& parameters) {
  std::vector<std::size_t> written;
  if (pending_parameters_ == 0) return written;
  for (const at::Tensor& p : parameters) {
    const std::size_t i = index_of(p);
    if (i < pending_parameter_.size() && pending_parameter_[i]) write_sums(bucket_of_[i], &written);
  }
  return written;
}

std::vector<std::size_t> GradReducer::take_all() {
  std::vector<std::size_t> written;
  for (std::size_t b = 0; b < buckets_.size() && pending_parameters_ > 0; ++b)
    if (bucket_deferred_[b] && pending_[b]) write_sums(b, &written);
  return written;
}

}  // namespace engram::parallel
