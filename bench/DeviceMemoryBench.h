#pragma once
/// \file
/// `engram bench memory --device cuda`: the memory and time of a ResNet training step on a GPU,
/// measured exactly on LibTorch's CUDA caching allocator (memory/CudaMemoryTracker.h), beside
/// PyTorch eager's own figures for the same network and batch on the same GPU in the same
/// invocation (bench/peers/resnet_cuda_peer.py: torch.cuda.max_memory_allocated, Adam with
/// fused=True; deterministic as the rows are). Called by run_memory_bench (bench/MemoryBench.h) for
/// a device other than the CPU; the ResNets, and the rows `none` first, then relu, recompute, swap,
/// reuse, algo or several joined by '+' ("all": the first three), the techniques that act on device
/// memory, each on a fresh copy of the same network (under options.memory_cap, if given). With rows
/// beside none every row computes deterministically, and each says against none its peak,
/// activation-peak, reserved-peak and time ratios and whether its losses and final parameters are
/// none's bit for bit (bit_identical_to_none; the largest parameter difference beside it). A row
/// that swaps adds "swap": bytes out and in per step, prefetched and on-demand reads, the stall per
/// step, and the pinned copies' rate each way against the bus's peak (memory/PinnedCopy.h's
/// measure_bus_bandwidth, once per report). A row that reuses adds "reuse": the device arena that
/// served its measured steps (memory/DeviceArenaReuse.h: hit rate, misses, conflicts, the arena
/// against its lower bound); every other row adds "device_arena_plan": fixed-structure reuse
/// planned, not served: memory/ArenaPlanner's arena for the last measured step's allocations that
/// it makes and releases (memory::step_blocks over the CUDA tracker's events, 512-byte alignment),
/// its lower bound, and what a step served from it would hold (what was live at the step's start,
/// what the step keeps, the arena) against the caching allocator's reserved peak for the same step.
///
/// Per measured step (after one warm-up step, three when a row reuses): peak_bytes (live bytes'
/// maximum, what max_memory_allocated counts), activation_peak_bytes (as on the CPU: live bytes
/// minus parameters, gradients and optimizer state, so it includes the cuBLAS handles' workspaces
/// that live from the first step on) and activation_peak_above_step_start_bytes (without what was
/// live at the step's start besides those), live bytes by tag at the step's start, the allocator's
/// reserved bytes at the live peak and their maximum, and fragmentation_bytes (reserved minus live
/// at the peak). The row reports the largest over the steps, the median step time (CUDA
/// synchronised at both ends), and against the peer peak_ratio_vs_torch (ours /
/// max_memory_allocated) and time_ratio_vs_torch (ours / eager's median step).

#include "bench/MemoryBench.h"

#include <ostream>

namespace engram::bench {

/// Measures and writes the report (options.json_path; the Chrome trace of the last step at
/// options.trace_path); the caller validated the options and resolved the device.
void run_device_memory_bench(const MemoryBenchOptions& options, std::ostream& out);

/// `engram bench memory --device cuda --memory-cap C --find-max-batch`: for each row (technique,
/// none first), the largest batch that trains while the caching allocator may hold at most C
/// (bench/BatchSearch.h: from --batch, default 8, for none, then from none's largest; doubling,
/// then bisecting to 12.5%; at most --max-batch). A trial is a fresh network and training
/// session at that batch under the cap (trainer/Trainer.h: recompute, swap and algo planned per
/// unit and layer under what the cap leaves, then the allocator limited to C), one warm-up and
/// --steps measured steps; it trained unless c10::OutOfMemoryError was thrown, or an error that
/// says it ran out of memory (bench/BatchSearch.h's says_out_of_memory: cuDNN with no engine whose
/// workspace fits), or the planner found no plan under the cap.
/// Every trial is in the report with why it failed; at each row's largest batch: median step,
/// images per second, live peak and reserved peak (memory/CudaMemoryTracker.h), and for
/// recompute rows how many units the plan recomputes. Beside them, unless options.skip_peer,
/// PyTorch under the same cap (torch.cuda.set_per_process_memory_fraction) with the same search,
/// bench/peers/resnet_cap_peer.py: eager, torch.utils.checkpoint in both modes, and selective
/// activation checkpointing where the pinned torch has it. Then at the equal batch (the smaller
/// of the compared row's largest and the largest any peer reached) the compared row, `all` where
/// it trained, else the row with the largest batch, is timed again against the fastest peer
/// that trains there (equal_batch.time_ratio_vs_fastest_peer). The report judges issue 35's
/// goals (`goals`, bench/MaxBatchReport.h: all at least 2.5x none's batch, no slower than the
/// fastest peer at the equal batch), undecided where the run lacks what judges one. With
/// --time-limit no trial, Engram's or the peer's, starts past it: a cut search's row says so
/// (cut_by_time_limit; its largest batch one that trained, without a ratio to none), the rows,
/// peer and equal-batch trial not reached say so, and the report's `complete` is false.
void run_max_batch_bench(const MemoryBenchOptions& options, std::ostream& out);

}  // namespace engram::bench
