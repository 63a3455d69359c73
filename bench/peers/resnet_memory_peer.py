#!/usr/bin/env python3
"""Python PyTorch peer of `engram bench memory --workload resnet`: the same CIFAR ResNet-18
(resnet/ResNet.h: same layout, module names and parameter count), the same synthetic batch
(resnet/ResNetWorkload.h) and the same step, measured by PyTorch's own profiler, so that the
activation peak Engram's allocator reports can be checked against it in the same invocation.

    "$ENGRAM_VENV"/bin/python bench/peers/resnet_memory_peer.py --batch 32 --image-size 32 \
        --widths 64,128,256,512 [--blocks-per-stage 2] [--num-classes 10] [--seed 1] [--threads 1]
    "$ENGRAM_VENV"/bin/python bench/peers/resnet_memory_peer.py --probe   # torch and Python versions

How the figure is taken: one warm-up step (Adam allocates its state), then the profiled step
(torch.profiler.profile(activities=[CPU], profile_memory=True)) makes the input batch, runs
forward, backward and the optimizer step. Parameters and Adam states exist before it, so they do
not appear in it. As in the C++ step, gradients are freed before it (zero_grad(set_to_none=True))
and backward allocates them; the allocations that end the step as a parameter's .grad are found
by address among the profiler's allocation events (experimental_event_tree) and left out for
their whole life, which is how MemoryTracker's final tags leave gradients out. The activation
peak is the maximum, over the forward and backward passes, of the running sum of the remaining
allocation events (+bytes allocated, -bytes freed) in time order. The optimizer step is left
out of that maximum because the two optimizers differ there, not the networks: Engram's
FusedAdam updates in place and allocates nothing, torch.optim.Adam allocates temporaries of the
size of each parameter (the denominator sqrt(v) / c2 + eps and the like), which at small widths
outweigh every activation; activation_peak_bytes_whole_step includes them.

A second profiled step follows the other common recipe: gradients kept allocated and zeroed in
place (zero_grad(set_to_none=False)), so that nothing needs leaving out; its figure
(activation_peak_bytes_grads_kept) is higher by the weight-gradient results that backward then
allocates as temporaries, adds into .grad and frees.

Two cross-checks are reported beside it: the running sum at the end of the forward pass, and
saved_tensor_bytes, the bytes of the distinct non-parameter tensors autograd saved for backward
in the warm-up step (counted through torch.autograd.graph.saved_tensors_hooks, storages counted
once).

Prints one JSON object on stdout.
"""

import argparse
import json
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

LEARNING_RATE = 1e-3  # bench/MemoryBench.cpp
ALL_PHASES = ("idle", "forward", "backward", "optimizer")


class Stem(nn.Module):
    """resnet::ResNetStemImpl: CIFAR's 3x3 convolution, or ImageNet's 7x7 (stride 2) and a 3x3
    max pool (stride 2)."""

    def __init__(self, cin, cout, imagenet=False):
        super().__init__()
        self.imagenet = imagenet
        if imagenet:
            self.conv = nn.Conv2d(cin, cout, 7, stride=2, padding=3, bias=False)
        else:
            self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.relu(self.bn(self.conv(x)))
        return F.max_pool2d(h, 3, stride=2, padding=1) if self.imagenet else h


class Residual(nn.Module):
    """What both blocks share: the projection shortcut (a 1x1 convolution at the block's stride
    and a BatchNorm) when the shape changes, else the identity."""

    def add_shortcut(self, cin, cout, stride):
        self.projection = stride != 1 or cin != cout
        if self.projection:
            self.shortcut_conv = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
            self.shortcut_bn = nn.BatchNorm2d(cout)

    def shortcut(self, x):
        return self.shortcut_bn(self.shortcut_conv(x)) if self.projection else x


class BasicBlock(Residual):
    """nn::BasicBlockImpl (torchvision's BasicBlock): the addition in place on bn2's output."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.add_shortcut(cin, cout, stride)

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        out += self.shortcut(x)
        return self.relu(out)


class Bottleneck(Residual):
    """resnet::BottleneckImpl (torchvision's Bottleneck, the stride on the 3x3 convolution)."""

    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.add_shortcut(cin, cout, stride)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += self.shortcut(x)
        return self.relu(out)


class ResNet(nn.Module):
    """resnet::ResNetImpl: stem, stage1..stageN of BasicBlocks (or Bottlenecks), global average
    pool, fc. `blocks` names each stage's count (default: blocks_per_stage each)."""

    def __init__(self, widths, blocks_per_stage, num_classes, in_channels, blocks=None,
                 bottleneck=False, imagenet_stem=False):
        super().__init__()
        self.stem = Stem(in_channels, widths[0], imagenet_stem)
        self.blocks = []
        cin = widths[0]
        for s, width in enumerate(widths):
            stage = nn.ModuleList()
            for b in range(blocks[s] if blocks else blocks_per_stage):
                stride = 2 if s > 0 and b == 0 else 1
                if bottleneck:
                    stage.append(Bottleneck(cin, width, stride))
                    cin = width * Bottleneck.expansion
                else:
                    stage.append(BasicBlock(cin, width, stride))
                    cin = width
            self.add_module(f"stage{s + 1}", stage)
            self.blocks.extend(stage)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.fc(h.mean((2, 3)))


def make_batch(batch, channels, size, num_classes, seed):
    """resnet::ResNetWorkload::batch: example i from a generator seeded seed * 1000003 + i."""
    images = torch.empty(batch, channels, size, size)
    labels = torch.empty(batch, dtype=torch.long)
    for i in range(batch):
        g = torch.Generator().manual_seed(seed * 1000003 + i)
        images[i].normal_(0.0, 1.0, generator=g)
        labels[i].random_(0, num_classes, generator=g)
    return images, labels


def train_step(model, optimizer, args):
    """bench/MemoryBench.cpp train_step; zero_grad happens before it (outside the profiler)."""
    with record_function("forward"):
        images, labels = make_batch(args.batch, args.in_channels, args.image_size,
                                    args.num_classes, args.seed)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        with torch.no_grad():
            accuracy = (logits.argmax(1) == labels).double().mean().item()
    with record_function("backward"):
        loss.backward()
        del images, labels, logits, loss
    with record_function("optimizer"):
        optimizer.step()
    return accuracy


def saved_tensor_bytes(model, optimizer, args):
    """Runs a step; returns the bytes of the distinct non-parameter tensors autograd saved."""
    params = {p.data_ptr() for p in model.parameters()}
    storages = {}

    def pack(t):
        ptr = t.storage().data_ptr()
        if ptr not in params:
            storages[ptr] = max(storages.get(ptr, 0), t.storage().nbytes())
        return t

    optimizer.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        train_step(model, optimizer, args)
    return sum(storages.values())


def profiled_step(model, optimizer, args, set_to_none):
    """Zeroes the gradients (freed, or zeroed in place), then runs one step under the profiler.
    Returns the CPU allocation events [(time_ns, ptr, bytes)] in time order, the phase spans
    {name: (begin_ns, end_ns)} and the step's wall milliseconds."""
    optimizer.zero_grad(set_to_none=set_to_none)
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step(model, optimizer, args)
    ms = 1e3 * (time.perf_counter() - start)
    events, spans = [], {}
    # Depth first, children in order, so that events of the same nanosecond keep their order.
    stack = list(reversed(prof.profiler.kineto_results.experimental_event_tree()))
    while stack:
        node = stack.pop()
        fields = node.extra_fields
        if type(fields).__name__ == "_ExtraFields_Allocation":
            if fields.device.type == "cpu":
                events.append((node.start_time_ns, len(events), fields.ptr, fields.alloc_size))
        elif node.name in ("forward", "backward", "optimizer"):
            spans[node.name] = (node.start_time_ns, node.end_time_ns)
        stack.extend(reversed(node.children))
    events.sort()
    if not events:
        sys.exit("the profiler recorded no memory events")
    return [(t, ptr, size) for t, _, ptr, size in events], spans, ms


def running_peak(events, spans, excluded=frozenset(), phases=("forward", "backward")):
    """Maximum, over the events inside the spans of `phases`, of the bytes allocated in the step
    and not yet freed, leaving out the allocations with an index in `excluded`; the running sum
    at the end of the forward span; the phase of the peak; the final sum."""
    running = peak = end_of_forward = 0
    peak_phase = "idle"
    forward_end = spans.get("forward", (0, 0))[1]
    for k, (t, _, size) in enumerate(events):
        if k in excluded:
            continue
        running += size
        phase = next((n for n, (b, e) in spans.items() if b <= t <= e), "idle")
        if running > peak and phase in phases:
            peak, peak_phase = running, phase
        if t <= forward_end:
            end_of_forward = running
    return peak, end_of_forward, peak_phase, running


def gradient_allocations(events, model):
    """Indices of the allocation events of what ends the step as a parameter's .grad (matched by
    address; never freed within the step), and their bytes: what MemoryTracker tags `gradient`
    for its whole life."""
    live = {}  # address -> index of the allocation event of what lives there
    for k, (_, ptr, size) in enumerate(events):
        if size > 0:
            live[ptr] = k
        else:
            live.pop(ptr, None)
    excluded, grad_bytes = set(), 0
    for p in model.parameters():
        k = live.get(p.grad.storage().data_ptr()) if p.grad is not None else None
        if k is None:
            sys.exit("a parameter's gradient was not allocated in the profiled step")
        excluded.add(k)
        grad_bytes += events[k][2]
    return excluded, grad_bytes


def network_parser(description):
    """The command line every ResNet peer takes (network, batch, seed, threads, --probe); a peer
    adds its own options to it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--widths", default="64,128,256,512")
    parser.add_argument("--blocks-per-stage", type=int, default=2)
    parser.add_argument("--blocks", default="", help="blocks of each stage, comma-separated")
    parser.add_argument("--bottleneck", action="store_true")
    parser.add_argument("--imagenet-stem", action="store_true")
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--in-channels", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    return parser


def network_arguments(args):
    """ResNet's positional and keyword arguments for the network the command line names."""
    widths = [int(w) for w in args.widths.split(",")]
    blocks = [int(b) for b in args.blocks.split(",")] if args.blocks else None
    return ((widths, args.blocks_per_stage, args.num_classes, args.in_channels),
            {"blocks": blocks, "bottleneck": args.bottleneck,
             "imagenet_stem": args.imagenet_stem})


def build_resnet(args):
    positional, keywords = network_arguments(args)
    return ResNet(*positional, **keywords)


def cuda_device(name):
    """The GPU `name` ("cuda" or "cuda:N") names, with its index: "cuda" is the first visible GPU
    (torch.cuda.set_device refuses a device without an index)."""
    device = torch.device(name)
    if device.type != "cuda":
        raise SystemExit(f"--device {name}: a CUDA device (cuda or cuda:N) is needed")
    return device if device.index is not None else torch.device("cuda", 0)


def make_deterministic():
    """The settings of Engram's trainer::make_deterministic, before the first CUDA work (cuBLAS
    reads its workspace configuration when its handle is made): cuDNN's deterministic algorithms,
    no benchmark mode, torch.use_deterministic_algorithms, and no fill of new tensors."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = False


def versions():
    return {"torch_version": torch.__version__, "python_version": platform.python_version()}


def main():
    args = network_parser(__doc__.split("\n\n")[0]).parse_args()
    if args.probe:
        print(json.dumps(versions()))
        return

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = build_resnet(args)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)

    saved = saved_tensor_bytes(model, optimizer, args)  # also the warm-up step

    # As the C++ step: gradients freed by zero_grad, so backward allocates them; those
    # allocations are left out, found by address, as MemoryTracker's final tags leave them out.
    events, spans, ms = profiled_step(model, optimizer, args, set_to_none=True)
    excluded, grad_bytes = gradient_allocations(events, model)
    peak, end_of_forward, peak_phase, _ = running_peak(events, spans, excluded)
    step_peak, _, step_phase, _ = running_peak(events, spans, excluded, ALL_PHASES)
    # Gradients kept allocated and zeroed in place: nothing needs leaving out, but backward's
    # weight-gradient results are then temporaries (added into .grad and freed) and count.
    kept_events, kept_spans, _ = profiled_step(model, optimizer, args, set_to_none=False)
    kept_peak, _, kept_phase, kept_net = running_peak(kept_events, kept_spans)

    print(json.dumps({
        "activation_peak_bytes": peak,
        "activation_bytes_at_end_of_forward": end_of_forward,
        "activation_peak_phase": peak_phase,
        "activation_peak_bytes_whole_step": step_peak,
        "activation_peak_phase_whole_step": step_phase,
        "gradient_bytes_left_out": grad_bytes,
        "activation_peak_bytes_grads_kept": kept_peak,
        "activation_peak_phase_grads_kept": kept_phase,
        "net_bytes_grads_kept": kept_net,
        "saved_tensor_bytes": saved,
        "memory_events": len(events),
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "profiled_step_ms": ms,
        "batch": args.batch,
        "image_size": args.image_size,
        "widths": network_arguments(args)[0][0],
        "threads": torch.get_num_threads(),
        **versions(),
    }))


if __name__ == "__main__":
    main()
