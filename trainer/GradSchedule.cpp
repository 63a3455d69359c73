#include "trainer/GradSchedule.h"

#include "trainer/schedules/Schedules.h"

#include <stdexcept>

namespace engram::trainer {

GradSchedule::~GradSchedule() = default;

std::unique_ptr<GradSchedule> make_grad_schedule(GradSchedule::Setup setup) {
  switch (setup.options.dist.grad_sync) {
    case parallel::GradSync::none:
      return schedules::make_no_exchange(std::move(setup));
    case parallel::GradSync::after:
      return schedules::make_after_backward(std::move(setup));
    case parallel::GradSync::overlap:
      return schedules::make_overlap(std::move(setup));
    case parallel::GradSync::ooo:
      return schedules::make_out_of_order(std::move(setup));
    case parallel::GradSync::host:
      return schedules::make_host_chunks(std::move(setup));
  }
  throw std::logic_error("make_grad_schedule: a GradSync without a schedule");
}

namespace schedules {

ReducingSchedule::ReducingSchedule(const GradSchedule::Setup& setup,
                                   parallel::GradReducer::Layout layout,
                                   std::unique_ptr<nn::GradScheduler> scheduler)
    : comm_(setup.comm),
      parameters_(setup.parameters),
      dist_(setup.options.dist),
      reducer_(setup.comm, setup.parameters,
               {layout, setup.options.dist.bucket_bytes, setup.options.dist.first_bucket_bytes}),
      scheduler_(std::move(scheduler)) {
  scheduler_->on_ready([this](const nn::WeightGradTask& task) { reducer_.ready(task.parameters); });
}

void ReducingSchedule::before(StepPhase phase) {
  if (phase == StepPhase::backward) reducer_.begin_step();
}

void ReducingSchedule::after(StepPhase phase) {
  if (phase == StepPhase::backward) reducer_.end_backward();
}

ExchangeFigures ReducingSchedule::figures() const {
  return {reducer_.bytes_per_step(), reducer_.buckets().size(), reducer_.sent_during_backward(),
          reducer_.bucket_bytes()};
}

}  // namespace schedules
}  // namespace engram::trainer
