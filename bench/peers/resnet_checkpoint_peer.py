#!/usr/bin/env python3
"""Python PyTorch peer of Engram's recompute rows: PyTorch's own activation checkpointing
(torch.utils.checkpoint.checkpoint in both of its modes: use_reentrant=True, the older
default, and use_reentrant=False) on the same CIFAR ResNet-18 and the same synthetic batch as
resnet_memory_peer.py (whose network, batch, step and measuring code it imports), measured side
by side with the plain network in one process.

    "$ENGRAM_VENV"/bin/python bench/peers/resnet_checkpoint_peer.py --batch 32 --image-size 32 \
        --widths 64,128,256,512 [--blocks-per-stage 2] [--num-classes 10] [--seed 1] \
        [--threads 1] [--steps 3]
    "$ENGRAM_VENV"/bin/python bench/peers/resnet_checkpoint_peer.py --probe   # torch and Python versions

Rows: "none" is the plain network; "checkpoint_reentrant" and "checkpoint_nonreentrant"
checkpoint Engram's recompute units, the stem and then every BasicBlock, each its own
torch.utils.checkpoint.checkpoint call, with use_reentrant=True and False; the head (global
average pool and fc) is not checkpointed. With use_reentrant=True a unit's parameters get
gradients only if one of its inputs requires grad, which the image batch does not, so the stem's
call is also given a one-element anchor tensor that requires grad (it is not a parameter, and
backward gives it no gradient); the non-reentrant mode needs none. Each row trains a fresh model
built from the same seed, with torch.optim.Adam as resnet_memory_peer.py.

How the figures are taken, per row: one warm-up step (Adam allocates its state), then one step
profiled exactly as resnet_memory_peer.py's activation_peak_bytes: gradients freed before it
(zero_grad(set_to_none=True)), torch.profiler with profile_memory=True, the allocations that end
the step as a parameter's .grad found by address and left out for their whole life, and the
maximum of the running sum of the remaining allocation events taken over the forward and
backward passes only (the recomputation runs inside backward, so it counts). Then --steps
measured steps, each timed with time.perf_counter from zero_grad(set_to_none=True) through
making the batch, forward, backward and optimizer.step(), as Engram's train_step times it;
step_ms is their median. Each checkpoint row's activation_peak_ratio and time_ratio are its
figures over the none row's; "best" names the better of the two modes (the lower activation
peak, then the lower step time), and checkpoint_activation_peak_ratio and checkpoint_time_ratio
are its ratios, the ones Engram's rows are compared with.

The known flaw of checkpointing a network with batch norm: backward reruns each unit's forward
in training mode, so every BatchNorm inside a checkpointed unit updates its running statistics
twice per step (in both modes).
bn_running_stat_updates_per_step is measured, not assumed: the change of num_batches_tracked of
the first BatchNorm of the first residual block (stage1[0].bn1) over the warm-up step.

relu_zero_fraction: the fraction of elements equal to zero over all ReLU outputs of one forward
(the first training step's: a fresh model from the same seed, training mode, the same batch,
under no_grad), counted by forward hooks on the in-place nn.ReLU modules (each call of a module
counted, so a block's ReLU counts twice).

Prints one JSON object on stdout.
"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

from resnet_memory_peer import (  # noqa: E402
    LEARNING_RATE,
    ResNet,
    gradient_allocations,
    make_batch,
    network_arguments,
    network_parser,
    profiled_step,
    running_peak,
    train_step,
    versions,
)

TECHNIQUES = ("none", "checkpoint_reentrant", "checkpoint_nonreentrant")


class CheckpointedResNet(ResNet):
    """The same network (same modules, names and parameters); the stem and each BasicBlock run
    under torch.utils.checkpoint.checkpoint in the given mode, the head does not."""

    def __init__(self, *args, reentrant, **kwargs):
        super().__init__(*args, **kwargs)
        self.reentrant = reentrant
        # Not a parameter or buffer: only makes the stem's reentrant checkpoint output require
        # grad.
        self.anchor = torch.ones(1, requires_grad=True)

    def forward(self, x):
        if self.reentrant:
            h = checkpoint(lambda images, _anchor: self.stem(images), x, self.anchor,
                           use_reentrant=True)
        else:
            h = checkpoint(self.stem, x, use_reentrant=False)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=self.reentrant)
        return self.fc(h.mean((2, 3)))


def build(technique, widths, args):
    """A fresh model from the seed (identical weights for every technique) and its Adam."""
    torch.manual_seed(args.seed)
    network, keywords = network_arguments(args)
    if technique == "none":
        model = ResNet(*network, **keywords)
    else:
        model = CheckpointedResNet(*network, **keywords,
                                   reentrant=technique == "checkpoint_reentrant")
    model.train()
    return model, torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)


def timed_step(model, optimizer, args):
    """One step as Engram's train_step times it: zero_grad through optimizer.step(); ms."""
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    train_step(model, optimizer, args)
    return 1e3 * (time.perf_counter() - start)


def measure(technique, widths, args):
    model, optimizer = build(technique, widths, args)
    bn = model.stage1[0].bn1
    before = int(bn.num_batches_tracked)
    optimizer.zero_grad(set_to_none=True)
    train_step(model, optimizer, args)  # warm-up: Adam allocates its state
    bn_updates = int(bn.num_batches_tracked) - before

    events, spans, _ = profiled_step(model, optimizer, args, set_to_none=True)
    excluded, _ = gradient_allocations(events, model)
    peak, end_of_forward, peak_phase, _ = running_peak(events, spans, excluded)

    ms = [timed_step(model, optimizer, args) for _ in range(args.steps)]
    return {
        "technique": technique,
        "activation_peak_bytes": peak,
        "step_ms": statistics.median(ms),
        "bn_running_stat_updates_per_step": bn_updates,
        "activation_peak_phase": peak_phase,
        "activation_bytes_at_end_of_forward": end_of_forward,
        "step_ms_per_step": ms,
    }, sum(p.numel() for p in model.parameters())


def relu_zero_fraction(widths, args):
    """Zeros over elements of every in-place ReLU output of one training-mode forward."""
    model, _ = build("none", widths, args)
    counts = [0, 0]  # zeros, elements

    def hook(_module, _inputs, output):
        counts[0] += int((output == 0).sum())
        counts[1] += output.numel()

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, nn.ReLU) and m.inplace]
    images, _ = make_batch(args.batch, args.in_channels, args.image_size, args.num_classes,
                           args.seed)
    with torch.no_grad():
        model(images)
    for h in handles:
        h.remove()
    if counts[1] == 0:
        sys.exit("no in-place ReLU output was seen")
    return counts[0] / counts[1]


def main():
    parser = network_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(versions()))
        return
    if args.steps < 1:
        sys.exit("--steps must be at least 1")

    torch.set_num_threads(args.threads)
    widths = [int(w) for w in args.widths.split(",")]
    rows, parameters = [], set()
    for technique in TECHNIQUES:
        row, count = measure(technique, widths, args)
        rows.append(row)
        parameters.add(count)
    if len(parameters) != 1:
        sys.exit("the rows built networks with different parameter counts")
    none = rows[0]
    for row in rows[1:]:
        row["activation_peak_ratio"] = row["activation_peak_bytes"] / none["activation_peak_bytes"]
        row["time_ratio"] = row["step_ms"] / none["step_ms"]
    best = min(rows[1:], key=lambda r: (r["activation_peak_bytes"], r["step_ms"]))

    print(json.dumps({
        **versions(),
        "threads": torch.get_num_threads(),
        "parameters": parameters.pop(),
        "batch": args.batch,
        "image_size": args.image_size,
        "widths": widths,
        "steps": args.steps,
        "rows": rows,
        "best": best["technique"],
        "checkpoint_activation_peak_ratio": best["activation_peak_ratio"],
        "checkpoint_time_ratio": best["time_ratio"],
        "relu_zero_fraction": relu_zero_fraction(widths, args),
    }))


if __name__ == "__main__":
    main()
