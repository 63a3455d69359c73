// Schedule after: every weight gradient is computed first, then summed in one all-reduce once
// backward has finished (the exchange does not overlap any compute).
#include "trainer/schedules/Schedules.h"

namespace engram::trainer::schedules {
namespace {

class AfterBackward : public ReducingSchedule {
 public:
  explicit AfterBackward(const GradSchedule::Setup& setup)
      : ReducingSchedule(setup, parallel::GradReducer::Layout::one_bucket,
                         std::make_unique<nn::ImmediateScheduler>()) {}
  const char* name() const override { return "after"; }
};

}  // namespace

std::unique_ptr<GradSchedule> make_after_backward(GradSchedule::Setup setup) {
  return std::make_unique<AfterBackward>(setup);
}

}  // namespace engram::trainer::schedules
