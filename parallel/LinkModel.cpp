#include "parallel/LinkModel.h"

#include <algorithm>
#include <exception>

namespace engram::parallel {

double LinkModel::allreduce_seconds(std::size_t bytes, int world) const {
  if (!emulated() || world <= 1) return 0;
  const double moved = 2.0 * (world - 1) / world * static_cast<double>(bytes);
  return latency + (bandwidth > 0 ? moved / payload_rate() : 0);
}

double LinkModel::broadcast_seconds(std::size_t bytes, int world) const {
  if (!emulated() || world <= 1) return 0;
  return latency + (bandwidth > 0 ? static_cast<double>(bytes) / payload_rate() : 0);
}

LinkSchedule::Clock::time_point LinkSchedule::complete_at(Clock::time_point launched,
                                                          double seconds) {
  const auto start = std::max(launched, free_at_);
  free_at_ =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  return free_at_;
}

std::shared_ptr<LinkQueue::Ticket> LinkQueue::push(double seconds, StartTime start) {
  auto ticket = std::make_shared<Ticket>();
  ticket->seconds = seconds;
  ticket->start = std::move(start);
  std::lock_guard<std::mutex> lock(queue_mutex_);
  pending_.push_back(ticket);
  return ticket;
}

LinkQueue::Clock::time_point LinkQueue::done_at(const std::shared_ptr<Ticket>& ticket) {
  std::lock_guard<std::mutex> settling(settle_mutex_);
  settle_through(*ticket);
  return *ticket->done;
}

void LinkQueue::settle_through(const Ticket& last) {
  while (!last.done) {
    std::shared_ptr<Ticket> first;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      first = pending_.front();  // `last` itself is pending until settled
    }
    settle_first(first);
  }
}

void LinkQueue::settle_first(const std::shared_ptr<Ticket>& first) {
  std::exception_ptr failed;
  Clock::time_point start;
  try {
    start = first->start();
  } catch (...) {
    // Settled from now, so that the collectives after it are not held by its failure.
    failed = std::current_exception();
    start = Clock::now();
  }
  first->done = schedule_.complete_at(start, first->seconds);
  first->start = nullptr;  // what it held (a CUDA event) goes now
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    pending_.pop_front();
  }
  if (failed) std::rethrow_exception(failed);
}

void LinkQueue::reset(LinkModel model) {
  std::lock_guard<std::mutex> settling(settle_mutex_);
  // The collectives launched before keep the link they were launched on.
  std::shared_ptr<Ticket> last;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (!pending_.empty()) last = pending_.back();
  }
  if (last) settle_through(*last);
  schedule_ = LinkSchedule(model);
}

}  // namespace engram::parallel
