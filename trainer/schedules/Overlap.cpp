// Schedule overlap, PyTorch DDP's: gradients in buckets in the order backward produces them
// (learned on the first step, rank 0's order for all), each bucket all-reduced as soon as its
// last gradient is ready while backward goes on with the layers below.
#include "trainer/schedules/Schedules.h"

namespace engram::trainer::schedules {
namespace {

class Overlap : public ReducingSchedule {
 public:
  explicit Overlap(const GradSchedule::Setup& setup)
      : ReducingSchedule(setup, parallel::GradReducer::Layout::buckets,
                         std::make_unique<nn::ImmediateScheduler>()) {}
  const char* name() const override { return "overlap"; }
};

}  // namespace

std::unique_ptr<GradSchedule> make_overlap(GradSchedule::Setup setup) {
  return std::make_unique<Overlap>(setup);
}

}  // namespace engram::trainer::schedules
