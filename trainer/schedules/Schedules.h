#pragma once
/// \file
/// The gradient schedules' factories (one per file in this folder; make_grad_schedule() in
/// trainer/GradSchedule.cpp chooses among them) and what the exchanging ones share: a
/// parallel::GradReducer fed by the layers' ready callbacks, started before backward and waited
/// for after it.

#include "nn/GradScheduler.h"
#include "parallel/GradReducer.h"
#include "trainer/GradSchedule.h"

#include <memory>

namespace engram::trainer::schedules {

std::unique_ptr<GradSchedule> make_no_exchange(GradSchedule::Setup setup);
std::unique_ptr<GradSchedule> make_after_backward(GradSchedule::Setup setup);
std::unique_ptr<GradSchedule> make_overlap(GradSchedule::Setup setup);
std::unique_ptr<GradSchedule> make_out_of_order(GradSchedule::Setup setup);
std::unique_ptr<GradSchedule> make_host_chunks(GradSchedule::Setup setup);

/// A schedule that sums gradients through a GradReducer of `layout`, fed by `scheduler`'s ready
/// callbacks: begin_step() before backward, end_backward() after it.
class ReducingSchedule : public GradSchedule {
 public:
  ReducingSchedule(const GradSchedule::Setup& setup, parallel::GradReducer::Layout layout,
                   std::unique_ptr<nn::GradScheduler> scheduler);
  nn::GradScheduler& scheduler() override { return *scheduler_; }
  void before(StepPhase phase) override;
  void after(StepPhase phase) override;
  ExchangeFigures figures() const override;

 protected:
  parallel::Communicator& comm_;
  std::vector<at::Tensor> parameters_;
  const parallel::DistOptions dist_;
  parallel::GradReducer reducer_;
  std::unique_ptr<nn::GradScheduler> scheduler_;
};

}  // namespace engram::trainer::schedules
