// Schedule ooo: out-of-order backprop (Oh et al., EuroSys 2022), "reverse first-k". The first
// step measures each layer's forward (between the calls of the layers' gate) and weight-gradient
// time (the tasks' durations) and chooses k (parallel/OooPlan.h) unless options.dist.ooo_k fixes
// it. From the second step the weight gradients of the k layers nearest the input run after the
// input-gradient chain, input-first, each layer a bucket of its own whose exchange runs on into
// the next step; as the next forward reaches such a layer, the gate waits for its sum and has the
// optimizer update it (Setup::update_late). The other layers go as in overlap.
#include "trainer/schedules/Schedules.h"

#include "nn/Runtime.h"
#include "parallel/Communicator.h"
#include "parallel/OooPlan.h"
#include "trainer/Device.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace engram::trainer::schedules {
namespace {

using Clock = std::chrono::steady_clock;

class OutOfOrder : public ReducingSchedule, public nn::ParameterGate {
 public:
  explicit OutOfOrder(const GradSchedule::Setup& setup)
      : ReducingSchedule(
            setup, parallel::GradReducer::Layout::buckets,
            std::make_unique<nn::DeferredScheduler>(nn::DeferredScheduler::Order::reverse,
                                                    [this](const nn::WeightGradTask& task) {
                                                      return reducer_.deferred(task.parameters);
                                                    })),
        update_late_(setup.update_late),
        broadcast_seconds_(setup.broadcast_seconds) {
    if (!update_late_) throw std::logic_error("schedule ooo needs the Stepper's late update");
    for (std::size_t i = 0; i < parameters_.size(); ++i)
      index_of_[parameters_[i].unsafeGetTensorImpl()] = i;
    scheduler_->on_ready([this](const nn::WeightGradTask& task) { time_weight_grad(task); });
    // On CUDA the profile times kernels, not their launches: the first step synchronises.
    device_ = parameters_device(parameters_);
    scheduler_->time_kernels(device_.is_cuda());
  }

  const char* name() const override { return "ooo"; }
  nn::ParameterGate* gate() override { return this; }
  OooChoice ooo_choice() const override { return ooo_; }

  void before(StepPhase phase) override {
    if (phase == StepPhase::forward && profiling_) {
      profile_.open = kNone;
      in_forward_ = true;
    }
    if (phase == StepPhase::backward) {
      settle();  // a deferred layer the forward did not reach
      if (profiling_) profile_.backward_start = profile_now();
    }
    ReducingSchedule::before(phase);
  }

  void after(StepPhase phase) override {
    if (phase == StepPhase::forward && profiling_) {
      close_layer(profile_now());
      in_forward_ = false;
    }
    if (phase == StepPhase::backward && profiling_) {
      profile_.backward =
          std::chrono::duration<double>(profile_now() - profile_.backward_start).count();
      choose_deferred();
      profiling_ = false;
      scheduler_->time_kernels(false);
    }
    ReducingSchedule::after(phase);
    if (phase == StepPhase::backward && ooo_.made)
      ooo_.k = reducer_.deferred_layers().size();  // rank 0's choice
  }

  void before_forward(const std::vector<at::Tensor>& parameters) override {
    if (profiling_) {
      if (in_forward_) open_layer(parameters);  // not a recomputed unit's forward in backward
      return;
    }
    if (reducer_.has_pending()) apply(reducer_.take(parameters));
  }

  void settle() override {
    if (reducer_.has_pending()) apply(reducer_.take_all());
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  /// The first step's measurements, per layer (the gate's parameter groups, in forward order).
  struct Profile {
    std::vector<std::vector<std::size_t>> layers;  ///< parameter indices
    std::map<std::size_t, std::size_t> layer_of;   ///< parameter index -> layer
    std::vector<double> forward, weight_grad;      ///< seconds
    std::size_t open = kNone;                      ///< the layer whose forward runs
    Clock::time_point opened, backward_start;
    double backward = 0;
  };

  void time_weight_grad(const nn::WeightGradTask& task) {
    if (!profiling_ || task.parameters.empty()) return;
    auto it = index_of_.find(task.parameters.front().unsafeGetTensorImpl());
    if (it == index_of_.end()) return;
    auto layer = profile_.layer_of.find(it->second);
    if (layer != profile_.layer_of.end()) profile_.weight_grad[layer->second] += task.seconds;
  }

  /// Now, once the device has finished what was launched (on CUDA; the profiling step only).
  Clock::time_point profile_now() const { return device_now(device_); }

  void open_layer(const std::vector<at::Tensor>& parameters) {
    const auto now = profile_now();
    close_layer(now);
    // A parameter belongs to the first layer that read it (a tied one is not a second layer's).
    std::vector<std::size_t> indices;
    std::size_t known_layer = kNone;
    for (const auto& p : parameters) {
      auto it = index_of_.find(p.unsafeGetTensorImpl());
      if (it == index_of_.end()) continue;
      auto layer = profile_.layer_of.find(it->second);
      if (layer == profile_.layer_of.end())
        indices.push_back(it->second);
      else if (known_layer == kNone)
        known_layer = layer->second;
    }
    if (indices.empty() && known_layer == kNone) return;
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
  }

  void close_layer(Clock::time_point now) {
    if (profile_.open >= profile_.layers.size()) return;
    profile_.forward[profile_.open] += std::chrono::duration<double>(now - profile_.opened).count();
    profile_.open = kNone;
  }

  void choose_deferred() {
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
    std::vector<parallel::LayerCost> costs(n);
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
    ooo_.automatic = dist_.ooo_k < 0;
    ooo_.costs = costs;
    ooo_.predicted_seconds.clear();
    for (std::size_t k = 0; k <= n; ++k)
      ooo_.predicted_seconds.push_back(parallel::predict_ooo_step(costs, k));
    ooo_.k = ooo_.automatic ? parallel::choose_ooo_k(costs)
                            : std::min(n, static_cast<std::size_t>(dist_.ooo_k));
    // Rank 0's choice is every rank's (the reducer shares it with its buckets).
    reducer_.set_deferred({profile_.layers.begin(), profile_.layers.begin() + ooo_.k});
  }

  /// The late update of these parameters (their sums are in .grad).
  void apply(const std::vector<std::size_t>& indices) {
    if (!indices.empty()) update_late_(indices);
  }

  std::function<void(const std::vector<std::size_t>&)> update_late_;
  double broadcast_seconds_;
  std::map<const void*, std::size_t> index_of_;  ///< TensorImpl* -> parameter index
  bool profiling_ = true;                        ///< the first step
  c10::Device device_{c10::kCPU};                ///< where the parameters live
  bool in_forward_ = false;
  Profile profile_;
  OooChoice ooo_;
};

}  // namespace

std::unique_ptr<GradSchedule> make_out_of_order(GradSchedule::Setup setup) {
  return std::make_unique<OutOfOrder>(setup);
}

}  // namespace engram::trainer::schedules
