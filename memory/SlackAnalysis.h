#pragma once
/// \file
/// Timing slack on the dataflow graph of one training step cut into units (docs/ARCHITECTURE.md),
/// and the swap-in start points that follow from it. No torch here: durations in, schedule out.
///
/// \code
///   engram::memory::StepTimeline t;
///   t.forward_ms = {2, 3, 3};  t.backward_ms = {4, 6, 6};  t.head_ms = 1;
///   t.swap_out_ms = {0, 2, 2}; t.swap_in_ms = {0, 2, 2};   // units 1 and 2 are swapped
///   engram::memory::SwapInSchedule s = engram::memory::schedule_swap_ins(t);
///   s.trigger[1];         // when unit 1's swap-in starts (see SwapInSchedule)
///   s.prefetch_at[3];     // units whose swap-in starts when forward ends (3 = number of units)
/// \endcode
///
/// The graph (a Boost.Graph adjacency_list, a DAG), with n units and each vertex an operation
/// that takes its duration:
///   compute chain   F_0 -> F_1 -> ... -> F_{n-1} -> H -> B_{n-1} -> ... -> B_0
///                   (unit forwards, the head: its forward, the loss and its backward, then the
///                   unit backwards in reverse order)
///   per swapped unit i (swap_out_ms[i] > 0 or swap_in_ms[i] > 0):
///                   F_i -> SO_i -> SI_i -> B_i   (out after its forward, back before its backward)
///                   SO_i -> F_{i+1} (H for the last unit): the next unit's forward begins once
///                   unit i's tensors are written (memory/SwapStore.h's end_unit), so that the
///                   forward holds one unit's saved tensors at most beyond what it keeps
///   one transfer channel (a single I/O thread runs transfers first come, first served):
///                   SO_i -> SO_j for consecutive swapped units i < j, the last SO -> the first
///                   SI, and SI_j -> SI_i for consecutive swapped units j > i (swap-ins in
///                   backward order).
/// Earliest starts (ES) come from a pass in topological order, latest starts (LS) from a pass in
/// reverse topological order against the makespan (the earliest finish of B_0, the last vertex);
/// slack = LS - ES. A swap-in with LS(SI_i) >= ES(SI_i) delays nothing when it starts at any time
/// in [ES, LS].
///
/// Start points: a swap-in can start only at a trigger, a moment the training thread sees:
/// trigger n is the end of forward (ES(H)), trigger k < n the beginning of unit k's backward
/// (ES(B_k)). Unit i's swap-in gets the *latest* trigger t in {n, n-1, ..., i} with
/// ES(trigger t) <= LS(SI_i): as late as possible, so the unit's tensors are back in memory for
/// the shortest time, yet early enough not to delay B_i. When no trigger is early enough it gets
/// trigger n and predicted_stall_ms says by how much B_i is expected to wait.
///
/// predicted_stall_ms comes from simulating the step with those start points: the compute chain
/// as in the graph, the head ending at ES(H) + head_ms, each B_i beginning when B_{i+1} is done
/// and unit i's swap-in has finished (the wait is B_i's stall); trigger n fires at ES(H), trigger
/// k when B_k is ready to begin; a swap-in starts at max(its trigger, the channel free, its
/// swap-out done (graph time)). A transfer that cannot be hidden shows as a stall, not only as a
/// longer makespan.

#include <vector>

namespace engram::memory {

/// How swap-ins are placed: `slack`, at the latest trigger that does not delay the unit's
/// backward (see the file comment); `just_in_time`, at the unit's own backward (trigger i): less
/// memory (nothing comes back while other units run their backward), stalls for the transfers;
/// `on_demand`, no prefetch at all (prefetch_at empty): each tensor is read when backward loads
/// it, so only the tensors in use are back: the least memory. Its triggers and predicted stalls
/// are those of just_in_time (an estimate: reads start later but each waits for less).
enum class SwapInTiming : unsigned char { slack, just_in_time, on_demand };
/// "slack", "just_in_time", "on_demand".
const char* timing_name(SwapInTiming timing);

/// Durations of one training step, in milliseconds. Every per-unit vector has one entry per unit
/// (in forward order); a unit with swap_out_ms and swap_in_ms both 0 is not swapped.
struct StepTimeline {
  std::vector<double> forward_ms;
  std::vector<double> backward_ms;
  double head_ms = 0;
  std::vector<double> swap_out_ms;
  std::vector<double> swap_in_ms;
};

/// Where each swapped unit's swap-in starts, and the graph figures behind it.
struct SwapInSchedule {
  /// Per unit: the trigger of its swap-in (n: when forward ends; k < n: when unit k's backward
  /// begins), -1 for a unit that is not swapped.
  std::vector<int> trigger;
  /// The inverse, n + 1 entries: prefetch_at[t] lists the units whose swap-in starts at trigger
  /// t, in the order the transfers are queued (decreasing unit index).
  std::vector<std::vector<int>> prefetch_at;
  /// Per unit (0 for units that are not swapped): ES, LS and slack of SI_i in the graph.
  std::vector<double> earliest_start_ms, latest_start_ms, slack_ms;
  /// Per unit: the simulated wait of B_i for its swap-in (0 when hidden; 0 if not swapped).
  std::vector<double> predicted_stall_ms;
  /// Per unit: how long the forward waits after unit i for its swap-out (SO_i ending after F_i;
  /// 0 if not swapped), in the graph.
  std::vector<double> forward_wait_ms;
  /// Earliest finish of B_0 in the graph: the step time with the forward's waits for the
  /// swap-outs, and each swap-in as early as the graph allows.
  double makespan_ms = 0;
};

/// The schedule of `timeline` (see the file comment). Throws std::invalid_argument when the
/// per-unit vectors differ in length or a duration is negative or not finite.
SwapInSchedule schedule_swap_ins(const StepTimeline& timeline,
                                 SwapInTiming timing = SwapInTiming::slack);

}  // namespace engram::memory
