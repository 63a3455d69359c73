#!/usr/bin/env python3
"""Python PyTorch peer of `engram bench npi`: the same NPI and the same training step as the C++
code (npi/NpiModel.cpp, npi/NpiData.cpp, npi/NpiWorkload.cpp, trainer/Trainer.cpp), timed the same
way, so that the two can be compared in one run.

    "$ENGRAM_VENV"/bin/python bench/peers/npi_peer.py --data traces.jsonl --config config.json \
        --batch 32 --steps 20 --warmup 3 --threads 1 [--indices batches.json] [--init init.json]
    "$ENGRAM_VENV"/bin/python bench/peers/npi_peer.py --probe   # prints the torch and Python versions

--config is NpiConfig::to_json() (task, num_programs, observation_sizes, arg_size, hidden, layers,
state_dim, program_dim, key_dim). --indices is a JSON list of warmup + steps lists of trace indices
(the C++ bench passes the ones it used); without it batches are drawn from --seed. --init names a
manifest [{"name", "shape"}, ...] of the C++ model's parameters whose float32 values lie back to
back in the file beside it with the extension .bin; without it the weights are PyTorch's defaults.

Prints one JSON object on stdout: seconds and cpu_seconds (the timed steps in wall and process CPU
time), traces_per_s, steps_per_s, mean_rows, phases_ms (wall, mean per timed step), first_loss,
last_loss, torch_version, python_version, threads.

Everything per element happens at load time; a step is tensor operations and a few vectorized
numpy calls that build the packed order.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence



class NpiModel(nn.Module):
    """npi::NpiModelImpl: the same modules under the same parameter names."""

    def __init__(self, cfg):
        super().__init__()
        self.arg_size = cfg["arg_size"]
        feature_dim = sum(cfg["observation_sizes"]) + 3 * cfg["arg_size"]
        state_dim, program_dim = cfg["state_dim"], cfg["program_dim"]
        self.encoder = nn.Sequential(
            nn.Linear(feature_dim, state_dim), nn.ReLU(), nn.Linear(state_dim, state_dim))
        self.program_embedding = nn.Embedding(cfg["num_programs"], program_dim)
        self.program_keys = nn.Parameter(torch.randn(cfg["num_programs"], cfg["key_dim"]) * 0.5)
        self.core = nn.LSTM(state_dim + program_dim, cfg["hidden"], num_layers=cfg["layers"])
        self.end_head = nn.Linear(cfg["hidden"], 1)
        self.key_head = nn.Linear(cfg["hidden"], cfg["key_dim"])
        self.arg_head = nn.Linear(cfg["hidden"], 3 * cfg["arg_size"])

    def forward_packed(self, features, programs, batch_sizes):
        x = torch.cat([self.encoder(features), self.program_embedding(programs)], 1)
        hidden = self.core(PackedSequence(x, batch_sizes))[0].data
        end_logit = self.end_head(hidden).squeeze(1)
        program_logits = torch.matmul(self.key_head(hidden), self.program_keys.t())
        arg_logits = self.arg_head(hidden).view(-1, 3, self.arg_size)
        return end_logit, program_logits, arg_logits


class NpiDataset:
    """npi::NpiDataset: one row per step of every invocation, and packed batches of traces."""

    def __init__(self, path, cfg):
        sizes = np.asarray(cfg["observation_sizes"], dtype=np.int64)
        arg_size = cfg["arg_size"]
        slots = len(sizes)
        with open(path) as f:
            header = json.loads(f.readline())
            if header.get("format") != "engram-traces" or header.get("task") != cfg["task"]:
                raise SystemExit(f"{path}: not a trace file of task {cfg['task']}")
            traces = [json.loads(line) for line in f if line.strip()]
        steps, inv_program, inv_args, inv_len, trace_count = [], [], [], [], []
        for trace in traces:
            trace_count.append(len(trace["invocations"]))
            for program, a1, a2, a3, inv_steps in trace["invocations"]:
                steps.extend(inv_steps)
                inv_program.append(program)
                inv_args.append((a1, a2, a3))
                inv_len.append(len(inv_steps))
        steps = np.asarray(steps, dtype=np.int64)  # [S, slots + 5]
        self.inv_len = np.asarray(inv_len, dtype=np.int64)
        self.inv_start = np.cumsum(self.inv_len) - self.inv_len
        self.trace_count = np.asarray(trace_count, dtype=np.int64)
        self.trace_first = np.cumsum(self.trace_count) - self.trace_count
        rows_program = np.repeat(np.asarray(inv_program, dtype=np.int64), self.inv_len)
        rows_args = np.repeat(np.asarray(inv_args, dtype=np.int64), self.inv_len, axis=0)
        # Feature indices (npi::feature_indices): observation slots, then the three arguments.
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        arg_offsets = offsets[-1] + arg_size * np.arange(3)
        active = np.concatenate([steps[:, :slots] + offsets[:-1], rows_args + arg_offsets], axis=1)
        end = steps[:, slots] == 1
        self.feature_dim = int(offsets[-1] + 3 * arg_size)
        self.active = torch.from_numpy(active)
        self.programs = torch.from_numpy(rows_program)
        self.end = torch.from_numpy(end.astype(np.float32))
        self.callee = torch.from_numpy(np.where(end, 0, steps[:, slots + 1]))
        self.args = torch.from_numpy(np.where(end[:, None], 0, steps[:, slots + 2:slots + 5]))

    def num_traces(self):
        return len(self.trace_count)

    def batch(self, traces):
        """All invocations of `traces`, sorted by decreasing length (stable), packed time-major."""
        counts = self.trace_count[traces]
        invs = np.arange(counts.sum()) + np.repeat(
            self.trace_first[traces] - (np.cumsum(counts) - counts), counts)
        lens = self.inv_len[invs]
        by_length = np.argsort(-lens, kind="stable")
        invs, lens = invs[by_length], lens[by_length]
        batch_sizes = np.cumsum(np.bincount(lens)[::-1])[::-1][1:]  # [t]: sequences longer than t
        time = np.repeat(np.arange(len(batch_sizes)), batch_sizes)
        sequence = np.arange(len(time)) - np.repeat(np.cumsum(batch_sizes) - batch_sizes,
                                                    batch_sizes)
        index = torch.from_numpy(self.inv_start[invs][sequence] + time)
        active = self.active.index_select(0, index)
        end_target = self.end.index_select(0, index)
        return {
            "features": torch.zeros(index.size(0), self.feature_dim).scatter_(1, active, 1.0),
            "programs": self.programs.index_select(0, index),
            "batch_sizes": torch.from_numpy(np.ascontiguousarray(batch_sizes)),
            "end_target": end_target,
            "callee_target": self.callee.index_select(0, index),
            "arg_targets": self.args.index_select(0, index),
            "call_mask": 1.0 - end_target,
        }


def forward(model, b):
    """npi::NpiWorkload::forward: the three losses and the step metrics."""
    model.train()
    end_logit, program_logits, arg_logits = model.forward_packed(
        b["features"], b["programs"], b["batch_sizes"])
    call_mask = b["call_mask"]
    calls = call_mask.sum().clamp_min(1.0)
    end_loss = F.binary_cross_entropy_with_logits(end_logit, b["end_target"])
    program_loss = (F.cross_entropy(program_logits, b["callee_target"], reduction="none") *
                    call_mask).sum() / calls
    arg_size = arg_logits.size(2)
    arg_loss = (F.cross_entropy(arg_logits.reshape(-1, arg_size), b["arg_targets"].reshape(-1),
                                reduction="none").view(-1, 3).sum(1) * call_mask).sum() / calls
    loss = end_loss + program_loss + arg_loss
    with torch.no_grad():
        end_wrong = (end_logit > 0).to(torch.float) != b["end_target"]
        program_wrong = program_logits.argmax(1) != b["callee_target"]
        args_wrong = (arg_logits.argmax(2) != b["arg_targets"]).any(1)
        wrong = end_wrong | ((program_wrong | args_wrong) & (call_mask > 0))
        metrics = {
            "step_error": wrong.to(torch.float).mean().item(),
            "end_loss": end_loss.item(),
            "program_loss": program_loss.item(),
            "arg_loss": arg_loss.item(),
        }
    return loss, metrics


def load_parameters(model, manifest_path):
    with open(manifest_path) as f:
        manifest = json.load(f)
    blob = np.fromfile(os.path.splitext(manifest_path)[0] + ".bin", dtype=np.float32)
    params = dict(model.named_parameters())
    if sorted(params) != sorted(p["name"] for p in manifest):
        raise SystemExit(f"parameters differ from the C++ model: {sorted(params)} vs "
                         f"{sorted(p['name'] for p in manifest)}")
    offset = 0
    with torch.no_grad():
        for p in manifest:
            target = params[p["name"]]
            if list(target.shape) != p["shape"]:
                raise SystemExit(f"parameter {p['name']} has shape {list(target.shape)}, "
                                 f"the C++ model {p['shape']}")
            n = target.numel()
            target.copy_(torch.from_numpy(blob[offset:offset + n]).view(target.shape))
            offset += n
    if offset != blob.size:
        raise SystemExit(f"{manifest_path}: the values do not match the manifest")


def sample_batches(n, batch, count, seed):
    """Epochs of a seeded shuffle, like trainer::train (not the same generator)."""
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(n) for _ in range(-(-count * batch // n))])
    return order[:count * batch].reshape(count, batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="store_true",
                        help="only print the versions (checks that torch and numpy import)")
    parser.add_argument("--data", help="trace file (datasets/TraceFile.h)")
    parser.add_argument("--config", help="NpiConfig JSON file")
    parser.add_argument("--batch", type=int, default=1, help="traces per step")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2e-3,
                        help="Adam's learning rate (the C++ session's, passed by the bench)")
    parser.add_argument("--clip", type=float, default=1.0,
                        help="max global gradient norm (the C++ session's); 0: none")
    parser.add_argument("--indices", help="JSON list of lists of trace indices, one per step")
    parser.add_argument("--init", help="manifest of initial weights (.json beside a .bin)")
    parser.add_argument("--device", default="cpu",
                        help="where the model trains: cpu, cuda or cuda:N (batches are made on "
                             "the CPU and copied there, as in C++)")
    args = parser.parse_args()
    versions = {"torch_version": torch.__version__, "python_version": platform.python_version()}
    if args.probe:
        print(json.dumps(versions))
        return 0
    if not args.data or not args.config:
        raise SystemExit("--data and --config are required")
    if args.steps < 1 or args.batch < 1 or args.threads < 1 or args.warmup < 0:
        raise SystemExit("--steps, --batch and --threads must be at least 1, --warmup at least 0")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.config) as f:
        cfg = json.load(f)
    data = NpiDataset(args.data, cfg)
    total = args.warmup + args.steps
    if args.indices:
        with open(args.indices) as f:
            batches = np.asarray(json.load(f), dtype=np.int64)
        if batches.ndim != 2 or batches.shape[0] < total or batches.shape[1] != args.batch:
            raise SystemExit(f"{args.indices}: expected {total} batches of {args.batch} indices")
        if batches.min() < 0 or batches.max() >= data.num_traces():
            raise SystemExit(f"{args.indices}: a trace index is out of range")
    else:
        batches = sample_batches(data.num_traces(), args.batch, total, args.seed)

    device = torch.device(args.device)
    model = NpiModel(cfg)
    if args.init:
        load_parameters(model, args.init)
    model.to(device)
    params = list(model.parameters())
    # On CUDA the one multi-tensor kernel Engram's FusedAdam calls there.
    optimizer = torch.optim.Adam(params, lr=args.lr, **(
        {"fused": True} if device.type == "cuda" else {"foreach": True}))

    phases = dict.fromkeys(["batch", "forward", "backward", "clip", "optimizer"], 0.0)
    rows = 0
    first_loss = last_loss = None
    timed_start = cpu_start = None
    for i in range(total):
        if i == args.warmup:
            timed_start = time.perf_counter()
            cpu_start = time.process_time()
        t0 = time.perf_counter()
        b = data.batch(batches[i])
        if device.type != "cpu":
            # The packed lengths stay on the CPU, where the LSTM reads them.
            b = {k: v if k == "batch_sizes" else v.to(device) for k, v in b.items()}
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss, _ = forward(model, b)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        if args.clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, args.clip)
            if device.type != "cpu":
                float(norm)  # waits for backward's kernels, as Engram's clip (a double) does
        t4 = time.perf_counter()
        optimizer.step()
        last_loss = loss.item()
        t5 = time.perf_counter()
        if i == 0:
            first_loss = last_loss
        if i >= args.warmup:
            for k, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                phases[k] += dt
            rows += b["programs"].size(0)
    seconds = time.perf_counter() - timed_start
    cpu_seconds = time.process_time() - cpu_start

    print(json.dumps({
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "traces_per_s": args.steps * args.batch / seconds,
        "steps_per_s": args.steps / seconds,
        "mean_rows": rows / args.steps,
        "phases_ms": {k: v * 1e3 / args.steps for k, v in phases.items()},
        "first_loss": first_loss,
        "last_loss": last_loss,
        "lr": args.lr,
        "clip": args.clip,
        "batch": args.batch,
        "steps": args.steps,
        "warmup": args.warmup,
        "threads": torch.get_num_threads(),
        # PyTorch's defaults, left as they are: on a GPU its cuDNN LSTM may compute in TF32,
        # where Engram's LSTM (nn/LSTM.cpp, cuBLAS matrix products) computes in float32.
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        **versions,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
