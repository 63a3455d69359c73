// Schedule none: every rank trains on its own shard and nothing is exchanged, so the replicas
// drift apart; `bench dp` measures it as the step's compute alone.
#include "trainer/schedules/Schedules.h"

namespace engram::trainer::schedules {
namespace {

class NoExchange : public GradSchedule {
 public:
  const char* name() const override { return "none"; }
  nn::GradScheduler& scheduler() override { return scheduler_; }
  bool exchanges() const override { return false; }

 private:
  nn::ImmediateScheduler scheduler_;
};

}  // namespace

std::unique_ptr<GradSchedule> make_no_exchange(GradSchedule::Setup) {
  return std::make_unique<NoExchange>();
}

}  // namespace engram::trainer::schedules
