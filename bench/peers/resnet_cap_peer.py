#!/usr/bin/env python3
"""Python PyTorch peer of `engram bench memory --device cuda --find-max-batch`: the largest batch
of the same ResNet (resnet_memory_peer.py's network and synthetic batch) that trains on the GPU
when PyTorch's caching allocator may hold at most --cap-bytes
(torch.cuda.set_per_process_memory_fraction), for plain eager PyTorch and PyTorch's activation
checkpointing of the same units as Engram's recompute (the stem and every block, as
resnet_checkpoint_peer.py): torch.utils.checkpoint in both modes, and selective activation
checkpointing (torch.utils.checkpoint.create_selective_checkpoint_contexts, where the pinned
torch has it: every convolution's output saved, everything else recomputed).

    "$ENGRAM_VENV"/bin/python bench/peers/resnet_cap_peer.py --cap-bytes 8589934592 \
        --start 64 --limit 4096 --precision 0.125 --steps 2 --equal-batch-limit 900 \
        --device cuda:0 [--monotonic-deadline S] [network options of resnet_memory_peer.py]

A trial at batch B builds the model from the seed on the device with torch.optim.Adam(fused=True)
and trains one warm-up step and --steps timed steps (zero_grad(set_to_none=True), the batch made
on the CPU and copied, forward, backward, optimizer.step(), synchronized on both ends); it trained
unless torch.cuda.OutOfMemoryError was raised, or an error that says the device ran out of memory
(says_out_of_memory, as Engram's search counts them), after which everything is dropped and the
cache emptied. The search is bench/BatchSearch.cpp's: from --start grow until a trial fails or
--limit (aimed at --cap-bytes by the line through what the allocator reserved in the two largest
trials that trained, or through the first with slope --prior-bytes-per-example, Engram's none
row's; else doubling), halve while the start fails, then bisect until the failed and trained
batches are within --precision of the trained one, or adjacent. Per variant: the largest batch,
every trial, and at the largest batch the median step, images per second,
torch.cuda.max_memory_allocated and max_memory_reserved. Then at the equal batch, the smaller of
--equal-batch-limit (the largest batch of the row Engram times against these: all's, else its
largest row's) and the largest any variant reached, every variant that trained there is timed
again.
With --monotonic-deadline (Engram's --time-limit, as a time of CLOCK_MONOTONIC, which
time.monotonic() and C++'s steady_clock read) no trial starts after it (bench/BatchSearch.cpp's
may_go_on): a variant's search is cut (its largest batch one that trained), later variants and
equal-batch trials are left out, and the report says which.

Prints one JSON object on stdout.
"""

import functools
import gc
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from resnet_checkpoint_peer import CheckpointedResNet  # noqa: E402
from resnet_memory_peer import (LEARNING_RATE, ResNet, cuda_device, make_batch,  # noqa: E402
                                network_arguments, network_parser, versions)


def allocator_fraction(cap_bytes, total):
    """The fraction of a device of `total` bytes that limits the caching allocator to exactly
    `cap_bytes`, as trainer/MemoryCap's allocator_fraction gives Engram's rows: the allocator keeps
    int(fraction * total), which for cap_bytes / total can come out a byte short."""
    fraction = cap_bytes / total
    while int(fraction * total) < cap_bytes:
        fraction = math.nextafter(fraction, 2.0)
    return fraction


def selective_checkpointing_available():
    return hasattr(torch.utils.checkpoint, "create_selective_checkpoint_contexts")


def save_convolutions(ctx, op, *args, **kwargs):
    """The SAC policy: a convolution's output is saved, every other op recomputed."""
    from torch.utils.checkpoint import CheckpointPolicy
    if op in (torch.ops.aten.convolution.default, torch.ops.aten.cudnn_convolution.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


class SelectiveResNet(ResNet):
    """The same network; the stem and each block under non-reentrant checkpointing with the
    selective policy above."""

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
        context = functools.partial(create_selective_checkpoint_contexts, save_convolutions)
        h = checkpoint(self.stem, x, use_reentrant=False, context_fn=context)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=False, context_fn=context)
        return self.fc(h.mean((2, 3)))


def variants():
    names = ["none", "checkpoint_reentrant", "checkpoint_nonreentrant"]
    if selective_checkpointing_available():
        names.append("selective_checkpoint")
    return names


def build(variant, args, device):
    torch.manual_seed(args.seed)
    network, keywords = network_arguments(args)
    if variant == "none":
        model = ResNet(*network, **keywords)
    elif variant == "selective_checkpoint":
        model = SelectiveResNet(*network, **keywords)
    else:
        model = CheckpointedResNet(*network, **keywords,
                                   reentrant=variant == "checkpoint_reentrant")
        model.anchor = model.anchor.to(device).detach().requires_grad_(True)
    model = model.to(device)
    model.train()
    return model, torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, fused=True)


def step(model, optimizer, args, batch, device):
    optimizer.zero_grad(set_to_none=True)
    images, labels = make_batch(batch, args.in_channels, args.image_size, args.num_classes,
                                args.seed)
    loss = F.cross_entropy(model(images.to(device)), labels.to(device))
    loss.backward()
    optimizer.step()
    return loss


# bench/BatchSearch.cpp's says_out_of_memory: what ATen's cuDNN convolution (no engine whose
# workspace fits), cuDNN, cuBLAS and the CUDA runtime say when an allocation of their own fails,
# raised as a plain RuntimeError, not torch.cuda.OutOfMemoryError.
OUT_OF_MEMORY_SAYS = ("unable to find an engine", "ALLOC_FAILED", "ALLOCATION_FAILED",
                      "out of memory")


def says_out_of_memory(message):
    return any(says in message for says in OUT_OF_MEMORY_SAYS)


def trial(variant, batch, args, device):
    """Trains at `batch`; the figures, or None when the allocator ran out of memory."""
    model = optimizer = None
    try:
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        model, optimizer = build(variant, args, device)
        step(model, optimizer, args, batch, device)  # warm-up: Adam's state, cuDNN's plans
        # The peaks of the timed steps only, as Engram's rows (bench/MaxBatchBench.cpp): not the
        # model's building or the warm-up's first cuDNN plans.
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        times = []
        for _ in range(args.steps):
            torch.cuda.synchronize(device)
            begin = time.perf_counter()
            step(model, optimizer, args, batch, device)
            torch.cuda.synchronize(device)
            times.append((time.perf_counter() - begin) * 1e3)
        ms = statistics.median(times)
        return {"batch": batch, "step_ms": ms, "images_per_s": batch / (ms / 1e3),
                "step_ms_per_step": times,
                "peak_bytes": torch.cuda.max_memory_allocated(device),
                "reserved_peak_bytes": torch.cuda.max_memory_reserved(device)}
    except torch.cuda.OutOfMemoryError:
        return None
    except RuntimeError as error:
        if not says_out_of_memory(str(error)):
            raise
        return None
    finally:
        del model, optimizer
        gc.collect()
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


class Cut(Exception):
    """The time limit came before a trial (bench/BatchSearch.cpp's may_go_on)."""


def may_go_on(args):
    """Whether a trial may start: before the deadline (args.deadline, time.monotonic()'s; 0:
    none)."""
    return not getattr(args, "deadline", 0) or time.monotonic() < args.deadline


def held_points(trials):
    """(batch, held bytes) of the trials that trained and held memory, by batch."""
    return sorted((t["batch"], t["held_bytes"]) for t in trials
                  if t["trained"] and t.get("held_bytes", 0) > 0)


def slope(held):
    """Bytes per example of the line through the two largest of held_points; 0 when there are
    not two, or memory does not grow between them."""
    if len(held) < 2:
        return 0
    (b1, y1), (b2, y2) = held[-2], held[-1]
    return (y2 - y1) / (b2 - b1) if y2 > y1 else 0


def bytes_per_example(trials):
    """bench/BatchSearch.cpp's bytes_per_example: the slope of the line through the two largest
    trained batches that held memory; 0 when there are not two, or memory does not grow."""
    return slope(held_points(trials))


def batch_at_cap(trials, cap_bytes, prior_bytes_per_example=0):
    """bench/BatchSearch.cpp's batch_at_cap: the batch at which that line reaches cap_bytes
    (rounded down); with one such batch, the line through it with the prior slope; 0 when there
    is no line, or memory does not grow along it."""
    held = held_points(trials)
    if not held:
        return 0
    per_example = slope(held) if len(held) >= 2 else max(0.0, prior_bytes_per_example)
    if not 0 < per_example < math.inf:
        return 0
    b2, y2 = held[-1]
    at_cap = b2 + (cap_bytes - y2) / per_example
    return 0 if at_cap < 1 else int(math.floor(min(at_cap, 1e15)))


def search(variant, args, device):
    """bench/BatchSearch.cpp's search, aimed at args.cap_bytes by each trained trial's
    reserved_peak_bytes; returns (largest, its figures, trials, cut): cut when the time limit
    stopped it, largest then a batch that trained."""
    trials, figures = [], {}

    def trains(batch, aimed=False):
        if not may_go_on(args):
            raise Cut()
        result = trial(variant, batch, args, device)
        trials.append({"batch": batch, "trained": result is not None, "aimed": aimed,
                       "held_bytes": result.get("reserved_peak_bytes", 0) if result else 0})
        if result is not None:
            figures[batch] = result
        return result is not None

    trained = failed = 0
    try:
        if trains(args.start):
            trained = args.start
            aiming, checking = getattr(args, "cap_bytes", 0) > 0, False
            while trained < args.limit:
                step = max(1, int(args.precision * trained))
                following, aimed, own_line = trained * 2, False, False
                if aiming and checking:
                    following = trained + step
                elif aiming:
                    at_cap = batch_at_cap(trials, args.cap_bytes,
                                          getattr(args, "prior_bytes_per_example", 0))
                    if at_cap > 0:
                        following, aimed = max(at_cap, trained + step), True
                        own_line = bytes_per_example(trials) > 0
                following = min(args.limit, following)
                if not trains(following, aimed):
                    failed = following
                    break
                if checking:
                    aiming = False  # the line fell short of what trains: doubling on
                checking = own_line  # a batch the prior slope named gives the row its own line
                trained = following
        else:
            failed = args.start
            while failed > 1:
                following = failed // 2
                if trains(following):
                    trained = following
                    break
                failed = following
        while trained > 0 and failed > 0 and failed - trained > 1 and \
                failed - trained > args.precision * trained:
            middle = trained + (failed - trained) // 2
            if trains(middle):
                trained = middle
            else:
                failed = middle
    except Cut:  # trained holds what the trials so far showed
        return trained, figures.get(trained), trials, True
    return trained, figures.get(trained), trials, False


def main():
    parser = network_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--cap-bytes", type=int, required=False, default=0)
    parser.add_argument("--start", type=int, default=8)
    parser.add_argument("--limit", type=int, default=4096)
    parser.add_argument("--precision", type=float, default=0.125)
    parser.add_argument("--prior-bytes-per-example", type=float, default=0,
                        help="slope for a line through a variant's first trained batch (0: none)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--equal-batch-limit", type=int, default=0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--monotonic-deadline", type=float, default=0,
                        help="no trial starts once time.monotonic() reaches it (0: none)")
    args = parser.parse_args()
    args.deadline = args.monotonic_deadline
    if args.probe:
        print(json.dumps(versions()))
        return
    if not torch.cuda.is_available():
        sys.exit("resnet_cap_peer.py: no CUDA device is visible")
    if args.cap_bytes <= 0 or args.start < 1 or args.limit < args.start or args.steps < 1 or \
            not (0 <= args.precision < math.inf) or not args.prior_bytes_per_example >= 0:
        sys.exit("resnet_cap_peer.py: --cap-bytes, --start, --limit and --steps must be positive "
                 "(limit at least start), --precision finite and not negative")
    device = cuda_device(args.device)
    torch.cuda.set_device(device)
    torch.set_num_threads(args.threads)
    total = torch.cuda.get_device_properties(device).total_memory
    if args.cap_bytes > total:
        sys.exit(f"resnet_cap_peer.py: the cap {args.cap_bytes} is above the device's {total}")
    torch.cuda.set_per_process_memory_fraction(allocator_fraction(args.cap_bytes, total), device)

    rows, not_reached = [], []
    for variant in variants():
        if rows and not may_go_on(args):
            not_reached.append(variant)
            continue
        largest, figures, trials, cut = search(variant, args, device)
        rows.append({"variant": variant, "largest_batch": largest, "at_largest": figures,
                     "cut_by_time_limit": cut, "trials": trials})
    reached = max(r["largest_batch"] for r in rows)
    equal = min(reached, args.equal_batch_limit) if args.equal_batch_limit > 0 else reached
    at_equal, equal_not_run = {}, []
    if equal > 0:
        for r in rows:
            if r["largest_batch"] >= equal:
                if not may_go_on(args):
                    equal_not_run.append(r["variant"])
                    continue
                result = trial(r["variant"], equal, args, device)
                if result is not None:
                    at_equal[r["variant"]] = result
    cut = bool(not_reached or equal_not_run or any(r["cut_by_time_limit"] for r in rows))
    network, keywords = network_arguments(args)
    print(json.dumps({
        **versions(),
        "device": torch.cuda.get_device_name(device),
        "cap_bytes": args.cap_bytes,
        "memory_fraction": args.cap_bytes / total,
        "selective_checkpointing": selective_checkpointing_available(),
        "rows": rows,
        "variants_not_reached": not_reached,
        "equal_batch": {"batch": equal, "rows": at_equal, "not_run": equal_not_run},
        "monotonic_deadline": args.monotonic_deadline,
        "cut_by_time_limit": cut,
        "parameters": sum(p.numel() for p in build("none", args, "cpu")[0].parameters()),
        "batch": args.batch,
        "image_size": args.image_size,
        "widths": network[0],
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }))


if __name__ == "__main__":
    main()
