#!/usr/bin/env python3
"""PyTorch DDP peer of `engram bench dp`: the same CIFAR ResNet-18 (resnet_memory_peer.py's, the
layout of resnet/ResNet.h), the same synthetic images, per-rank batch and thread count, trained
with torch.nn.parallel.DistributedDataParallel over Gloo with its default buckets (25 MiB, the
first 1 MiB), Adam at 1e-3 and no gradient clipping, as Engram's rows are. Started by torchrun:

    "$ENGRAM_VENV"/bin/torchrun --nproc_per_node 2 bench/peers/ddp_peer.py --batch 16 \
        --warmup 2 --steps 5 --links 0,1250000000,125000000,12500000 --latency 0 \
        --threads 1 --seed 1 --out peer.json

Link emulation is a DDP communication hook with Engram's delay model (parallel/LinkModel.h): each
bucket's all-reduce cannot complete before a serialised link of the given bandwidth would have
carried 2(N-1)/N of its bytes plus the latency after the previous bucket left it, from when the
bucket is ready (on CUDA, when the device has written it: a CUDA event, as Engram's LinkQueue);
the wait is a sleep in the all-reduce's completion callback, so it costs no CPU. The hook divides by the world
size as DDP's default hook does. Rank 0 writes {"rows": [{"link_bandwidth", "step_seconds"}],
"versions": ...} to --out: per link, the median over the timed steps of each step's slowest rank.
"""

import argparse
import collections
import json
import os
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_memory_peer import ResNet, make_batch  # noqa: E402


# parallel/LinkModel.h's kTcpPayloadShare: TCP's payload in a 1514-byte Ethernet frame.
TCP_PAYLOAD_SHARE = 1448.0 / 1514.0


class DeviceClock:
    """Engram's DeviceClock: when the current CUDA stream reached a point, on time.monotonic(),
    from CUDA events timed against the last point settled (the first one waited for)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = None
        self.last_at = 0.0

    def mark(self):
        with self.lock:
            if self.last is None:
                first = torch.cuda.Event(enable_timing=True, blocking=True)
                first.record()
                first.synchronize()
                self.last, self.last_at = first, time.monotonic()
        point = torch.cuda.Event(enable_timing=True, blocking=True)
        point.record()
        return lambda: self.reached(point)

    def reached(self, point):
        point.synchronize()
        with self.lock:
            at = self.last_at + self.last.elapsed_time(point) / 1000.0
            self.last, self.last_at = point, at
        return at


class Link:
    """Engram's LinkModel and LinkQueue: collectives enter the link in launch order, each when
    its data is ready."""

    def __init__(self, world):
        self.world = world
        self.bandwidth = 0.0
        self.latency = 0.0
        self.free_at = 0.0
        self.clock = DeviceClock()
        self.pending = collections.deque()
        self.queue_lock = threading.Lock()
        self.settle_lock = threading.Lock()

    def emulated(self):
        return self.bandwidth > 0 or self.latency > 0

    def seconds(self, nbytes):
        if self.bandwidth <= 0 and self.latency <= 0:
            return 0.0
        moved = 2.0 * (self.world - 1) / self.world * nbytes
        return self.latency + (moved / (self.bandwidth * TCP_PAYLOAD_SHARE)
                               if self.bandwidth > 0 else 0.0)

    def complete_at(self, launched, seconds):
        start = max(launched, self.free_at)
        self.free_at = start + seconds
        return self.free_at

    def push(self, seconds, start):
        ticket = {"seconds": seconds, "start": start, "done": None}
        with self.queue_lock:
            self.pending.append(ticket)
        return ticket

    def done_at(self, ticket):
        with self.settle_lock:
            while ticket["done"] is None:
                with self.queue_lock:
                    first = self.pending[0]
                first["done"] = self.complete_at(first["start"](), first["seconds"])
                first["start"] = None
                with self.queue_lock:
                    self.pending.popleft()
        return ticket["done"]


def delayed_allreduce(link, bucket):
    buffer = bucket.buffer()
    buffer.div_(link.world)
    launched = time.monotonic()
    start = (link.clock.mark() if buffer.is_cuda and link.emulated() else (lambda: launched))
    ticket = link.push(link.seconds(buffer.numel() * buffer.element_size()), start)
    future = dist.all_reduce(buffer, async_op=True).get_future()

    def done(f):
        # Gloo runs the callback once the all-reduce is done, so the device has passed the mark.
        # NCCL's future completes at launch, so the callback would wait in backward: bench dp
        # refuses NCCL with emulated links beside this peer.
        delay = link.done_at(ticket) - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return f.value()[0]

    return future.then(done)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--links", default="0")
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--device", default="cpu",
                   help="cpu, cuda (the GPU of LOCAL_RANK) or cuda:N (shared by the ranks)")
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--out", required=True)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    # With NCCL the CUDA tensors go over NCCL and the timings (host tensors) over Gloo, as
    # Engram's communicator does.
    dist.init_process_group("cpu:gloo,cuda:nccl" if args.backend == "nccl" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(args.device)
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)
    model = ResNet([64, 128, 256, 512], 2, 10, 3).to(device)
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb,
                                  device_ids=[device.index] if device.type == "cuda" else None)
    link = Link(world)
    ddp.register_comm_hook(link, delayed_allreduce)
    # On CUDA the one multi-tensor kernel Engram's FusedAdam calls there.
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3,
                                 fused=True if device.type == "cuda" else None)
    rows = []
    step = 0
    for bandwidth in [float(b) for b in args.links.split(",")]:
        link.bandwidth, link.latency = bandwidth, args.latency
        seconds = torch.zeros(world, args.steps, dtype=torch.float64)
        for i in range(args.warmup + args.steps):
            start = time.perf_counter()
            # The rank's own images, made inside the step as Engram's workload makes them.
            images, labels = make_batch(args.batch, 3, 32, 10, args.seed)
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(images), labels)
            loss.backward()
            optimizer.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # the step's kernels, not their launches
            if i >= args.warmup:
                seconds[rank, i - args.warmup] = time.perf_counter() - start
            step += 1
        dist.all_reduce(seconds)
        # As Engram's rows: the median over the steps of each step's slowest rank.
        slowest = seconds.max(dim=0).values
        rows.append({"link_bandwidth": bandwidth, "step_seconds": statistics.median(slowest.tolist())})
    if rank == 0:
        result = {"rows": rows, "bucket_cap_mb": args.bucket_mb, "latency": args.latency,
                  "threads": args.threads,
                  "versions": {"torch": torch.__version__, "python": sys.version.split()[0]}}
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, args.out)
    dist.destroy_process_group()
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    main()
