#!/usr/bin/env python3
"""Python PyTorch peer of `engram bench memory --workload resnet --device cuda`: the same CIFAR
ResNet-18 and synthetic batch as resnet_memory_peer.py (imported from it), trained on the GPU in
PyTorch eager mode, with the figures PyTorch's own CUDA caching allocator keeps.

    "$ENGRAM_VENV"/bin/python bench/peers/resnet_cuda_peer.py --batch 32 --steps 5 [--device cuda]

The step is the C++ bench's: gradients freed (zero_grad(set_to_none=True)), the batch drawn on the
CPU and copied to the device, forward, backward, the optimizer step. The optimizer is
torch.optim.Adam(fused=True), the one multi-tensor kernel Engram's FusedAdam calls on CUDA, so
that the two steps allocate alike. `warmup` warm-up steps (Adam's state, cuDNN's plans; the C++
bench passes its rows' count), then `steps` measured steps, each after
torch.cuda.reset_peak_memory_stats(): peak_bytes is torch.cuda.max_memory_allocated() during the
step (the largest over the steps), start_bytes torch.cuda.memory_allocated() at its start,
reserved_peak_bytes torch.cuda.max_memory_reserved().
step_ms is the median wall time of a step, timed after torch.cuda.synchronize() on both ends.
With --deterministic (given when the C++ bench computes its rows deterministically), the same
settings as Engram's trainer::make_deterministic: cuDNN's deterministic algorithms, no benchmark
mode, torch.use_deterministic_algorithms, no fill of new tensors, cuBLAS's fixed workspace.

Prints one JSON object on stdout.
"""

import json
import statistics
import time

import torch
import torch.nn.functional as F

from resnet_memory_peer import (LEARNING_RATE, build_resnet, cuda_device, make_batch,
                                make_deterministic, network_arguments, network_parser, versions)


def step(model, optimizer, args, device):
    optimizer.zero_grad(set_to_none=True)
    images, labels = make_batch(args.batch, args.in_channels, args.image_size, args.num_classes,
                                args.seed)
    images, labels = images.to(device), labels.to(device)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    parser = network_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--warmup", type=int, default=1, help="steps before the measured ones")
    parser.add_argument("--deterministic", action="store_true",
                        help="compute as Engram's deterministic rows do")
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(versions()))
        return
    if not torch.cuda.is_available():
        raise SystemExit("resnet_cuda_peer.py: no CUDA device is visible")
    if args.deterministic:
        make_deterministic()
    device = cuda_device(args.device)
    torch.cuda.set_device(device)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = build_resnet(args).to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, fused=True)

    losses = [step(model, optimizer, args, device) for _ in range(max(1, args.warmup))]
    peaks, starts, reserved, times = [], [], [], []
    for _ in range(args.steps):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        starts.append(torch.cuda.memory_allocated(device))
        begin = time.perf_counter()
        losses.append(step(model, optimizer, args, device))
        torch.cuda.synchronize()
        times.append((time.perf_counter() - begin) * 1e3)
        peaks.append(torch.cuda.max_memory_allocated(device))
        reserved.append(torch.cuda.max_memory_reserved(device))

    print(json.dumps({
        "device": torch.cuda.get_device_name(device),
        "peak_bytes": max(peaks),
        "peak_bytes_per_step": peaks,
        "start_bytes": max(starts),
        "reserved_peak_bytes": max(reserved),
        "step_ms": statistics.median(times),
        "step_ms_per_step": times,
        "losses": losses,
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "batch": args.batch,
        "image_size": args.image_size,
        "widths": network_arguments(args)[0][0],
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        **versions(),
    }))


if __name__ == "__main__":
    main()
