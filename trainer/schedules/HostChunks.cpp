// Schedule host: host-side accumulation in chunks (US10949746B2, US11164079B2). After the first
// step the reducer's buckets are chunks of consecutive layers (each layer the parameters one
// weight-gradient task reports, in backward order), copied into host buffers and summed over the
// CPU process group while backward goes on. With options.dist.chunk_layers = -1 the chunk is
// searched from the second step: 1, 2, 4, ... layers, two steps each (the first reallocates the
// buffers, the second is timed and averaged over the ranks, so every rank decides alike),
// growing while a step gets faster and keeping the fastest (parallel/ChunkSearch.h).
#include "trainer/schedules/Schedules.h"

#include "parallel/ChunkSearch.h"
#include "parallel/Communicator.h"
#include "trainer/Device.h"
#include "trainer/Workload.h"

#include <ATen/ATen.h>

#include <chrono>

namespace engram::trainer::schedules {
namespace {

using Clock = std::chrono::steady_clock;

class HostChunks : public ReducingSchedule {
 public:
  explicit HostChunks(const GradSchedule::Setup& setup)
      : ReducingSchedule(setup, parallel::GradReducer::Layout::layer_chunks,
                         std::make_unique<nn::ImmediateScheduler>()),
        device_(parameters_device(parameters_)) {}

  const char* name() const override { return "host"; }
  ChunkChoice chunk_choice() const override { return chunk_; }
  void add_metrics(std::map<std::string, double>& metrics) const override {
    metrics["chunk_layers"] = static_cast<double>(chunk_.chunk);
  }

  void before(StepPhase phase) override {
    // The search's steps time the device's work, not its launches (on CUDA, synchronising).
    if (phase == StepPhase::batch && !chunk_.settled) step_start_ = device_now(device_);
    ReducingSchedule::before(phase);
  }

  void after(StepPhase phase) override {
    const bool first = phase == StepPhase::backward && !chunk_.settled && chunk_.chunk == 0;
    ReducingSchedule::after(phase);
    if (first) start_search();
    if (phase == StepPhase::optimizer && !chunk_.settled)
      search(std::chrono::duration<double>(device_now(device_) - step_start_).count());
  }

 private:
  /// The first step learned the layers; the search starts at one layer per chunk.
  void start_search() {
    chunk_.layers = reducer_.layers().size();
    chunk_.automatic = dist_.chunk_layers < 0;
    if (chunk_.automatic && chunk_.layers > 0) {
      search_ = std::make_unique<parallel::ChunkSearch>(chunk_.layers);
      chunk_.chunk = search_->current();
      chunk_.settled = search_->done();
    } else {
      chunk_.chunk = chunk_.automatic ? 1 : static_cast<std::size_t>(dist_.chunk_layers);
      chunk_.settled = true;
    }
    reducer_.set_chunk(chunk_.chunk);
    steps_with_chunk_ = -1;  // this step is not one of the chunk's
  }

  /// After a step of `seconds`: the search's next chunk, or its end.
  void search(double seconds) {
    if (++steps_with_chunk_ < 2) return;
    at::Tensor t = at::tensor({seconds}, at::kDouble);
    comm_.allreduce(t, "the chunk search's step time");
    search_->record(t.item<double>() / comm_.world_size());
    chunk_.path = search_->path();
    chunk_.chunk = search_->current();
    chunk_.settled = search_->done();
    reducer_.set_chunk(chunk_.chunk);
    steps_with_chunk_ = 0;
  }

  c10::Device device_;  ///< where the parameters live
  ChunkChoice chunk_;
  std::unique_ptr<parallel::ChunkSearch> search_;
  long steps_with_chunk_ = 0;
  Clock::time_point step_start_;
};

}  // namespace

std::unique_ptr<GradSchedule> make_host_chunks(GradSchedule::Setup setup) {
  return std::make_unique<HostChunks>(setup);
}

}  // namespace engram::trainer::schedules
