#include "nn/Runtime.h"

namespace engram::nn {
namespace {

memory::ActivationStore* default_store() {
  static memory::PlainStore store;
  return &store;
}

GradScheduler* default_scheduler() {
  static ImmediateScheduler scheduler;
  return &scheduler;
}

thread_local Runtime current{nullptr, nullptr, nullptr, nullptr};

}  // namespace

Runtime current_runtime() {
  return Runtime{current.store ? current.store : default_store(),
                 current.scheduler ? current.scheduler : default_scheduler(), current.replicas,
                 current.gate};
}

RuntimeGuard::RuntimeGuard(memory::ActivationStore* store, GradScheduler* scheduler,
                           ReplicaSum* replicas, ParameterGate* gate)
    : previous_(current) {
  if (store) current.store = store;
  if (scheduler) current.scheduler = scheduler;
  if (replicas) current.replicas = replicas;
  if (gate) current.gate = gate;
}

RuntimeGuard::~RuntimeGuard() { current = previous_; }

}  // namespace engram::nn
