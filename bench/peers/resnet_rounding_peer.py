#!/usr/bin/env python3
"""How far float32 rounding alone moves the first step's gradients of a ResNet (the network and
batch of resnet_memory_peer.py), in PyTorch: the yardstick for a lossy memory technique that only
changes the order of a convolution's sums (`bench memory`'s algo row, whose first_step_grad_rel_l2
is measured the same way, against the none row).

    "$ENGRAM_VENV"/bin/python bench/peers/resnet_rounding_peer.py --batch 8 --image-size 224 \
        --blocks 3,4,6,3 --bottleneck --imagenet-stem --num-classes 1000 [--threads 1]

One model from --seed (PyTorch's initialisation), one batch, one forward and backward with cross
entropy, computed three ways: float32 with oneDNN's convolutions (PyTorch's default on the CPU),
float32 with ATen's own (torch.backends.mkldnn disabled), and float64. Reported: the relative L2
norm of the difference of all parameters' gradients, ||a - b|| / ||b||, between the two float32
ways, and between each and float64.

Prints one JSON object on stdout.
"""

import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from resnet_memory_peer import build_resnet, make_batch, network_parser, versions  # noqa: E402


def gradients(args, dtype, onednn):
    """All parameters' gradients of one step, flattened into one float64 vector."""
    torch.manual_seed(args.seed)
    model = build_resnet(args).to(dtype)
    model.train()
    images, labels = make_batch(args.batch, args.in_channels, args.image_size, args.num_classes,
                                args.seed)
    with torch.backends.mkldnn.flags(enabled=onednn):
        F.cross_entropy(model(images.to(dtype)), labels).backward()
    return torch.cat([p.grad.flatten().to(torch.float64) for p in model.parameters()])


def relative_l2(a, b):
    return ((a - b).norm() / b.norm()).item()


def main():
    args = network_parser(__doc__.split("\n\n")[0]).parse_args()
    if args.probe:
        print(json.dumps(versions()))
        return
    torch.set_num_threads(args.threads)
    # torch.backends.mkldnn.flags also sets oneDNN's TF32 switch, which warns on a CPU build.
    warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
    onednn = gradients(args, torch.float32, True)
    aten = gradients(args, torch.float32, False)
    exact = gradients(args, torch.float64, True)
    print(json.dumps({
        **versions(),
        "batch": args.batch,
        "image_size": args.image_size,
        "threads": args.threads,
        "float32_onednn_vs_aten_conv_rel_l2": relative_l2(aten, onednn),
        "float32_onednn_vs_float64_rel_l2": relative_l2(onednn, exact),
        "float32_aten_conv_vs_float64_rel_l2": relative_l2(aten, exact),
    }))


if __name__ == "__main__":
    main()
