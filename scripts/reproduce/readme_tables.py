#!/usr/bin/env python3
"""Writes the result tables of docs/RESULTS.md and README.md from results/*.json (stdlib only).

Each table sits between marker comments in a Markdown file:
    <!-- table:NAME -->
    ...generated: the table and the line naming the files, commits and machines it comes from...
    <!-- /table:NAME -->
and everything between the markers is replaced by what the JSON gives, so no figure of a table is
typed by hand. docs/RESULTS.md holds every table of TABLES (the full results); README.md, the
landing page, holds a few of them and the short HEADLINES extracts (a summary line or a small
table drawn from the same JSON). A table may appear in several files; every occurrence is
generated.

Usage: readme_tables.py [--check] [--file FILE ...] [--results DIR]
  (no option)  rewrites the tables of README.md and docs/RESULTS.md in place
  --file FILE  the file(s) to process instead (repeatable; --readme is the old name); together
               they must hold a marker for every table of TABLES
  --check      writes nothing; exits 1 with a unified diff when a table differs from the JSON
               (the ctest `readme_tables_match_results` runs this on the source tree's files)
"""
import argparse
import difflib
import json
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Results:
    """Loads results/NAME.json once and remembers which files a table used."""

    def __init__(self, directory):
        self.directory = directory
        self.cache = {}

    def __call__(self, name):
        if name not in self.cache:
            with open(os.path.join(self.directory, name + ".json")) as f:
                self.cache[name] = json.load(f)
        return self.cache[name]


# --- formatting --------------------------------------------------------------------------------

def f3(x):
    return f"{x:.3f}"


def secs(x):
    """Seconds as the README writes them: one decimal under 10 s, whole seconds above."""
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def secs_range(values):
    """The range of `values` in whole seconds, one number where both ends round alike."""
    lo, hi = secs(min(values)), secs(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def num(x):
    return f"{x:,}"


def bold(text, on):
    return f"**{text}**" if on else text


def grad_diff(x):
    return "0" if x == 0 else f"{x:.3g}"


def mean_std(entry):
    return f"{entry['accuracy_mean']:.3f} ± {entry['accuracy_std']:.3f}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def source(res, *names):
    """The line under a table: each file with the commit and machine it records."""
    parts = []
    for name in names:
        data = res(name)
        commit = data.get("commit") or (data.get("reproduce") or {}).get("commit")
        machine = data.get("machine") or {}
        where = ", ".join(str(p) for p in (machine.get("cpu"), machine.get("cores") and
                                           f"{machine['cores']} cores") if p)
        parts.append(f"`results/{name}.json`: "
                     + (f"commit {commit}" if commit else "commit not recorded")
                     + (f", {where}" if where else ""))
    return ["", "Generated from " + "; ".join(parts) + "."]


def option(commands, flag):
    """The value of `flag` in the first command that has it, or None."""
    for command in commands:
        words = command.split()
        if flag in words:
            i = words.index(flag)
            return words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") \
                else True
    return None


def by_technique(data, technique):
    return next(r for r in data["results"] if r["technique"] == technique)


# --- the tables --------------------------------------------------------------------------------

def npi_runs(res, names):
    rows = []
    for name in names:
        for run in res(name)["runs"]:
            for e in run["eval"]:
                rows.append([f"`scripts/reproduce/{name}.sh`", run["name"], secs(run["train_seconds"]),
                             e["length"], e["count"], f3(e["accuracy"]), f3(e["trace_exact"])])
    header = ["claim", "run", "training (s)", "length", "problems", "accuracy", "trace_exact"]
    return table(header, rows) + source(res, *names)


def npi(res):
    return npi_runs(res, ["npi_addition", "npi_sort"])


def npi_addition_primitive(res):
    return npi_runs(res, ["npi_addition_primitive"])


def exact_up_to(points):
    """The longest length up to which every evaluated length is exact (0: not even the first)."""
    upto = 0
    for length, accuracy, _ in points:
        if accuracy != 1.0:
            break
        upto = length
    return upto


def generalization_table(res, name):
    rows = []
    for run in res(name)["runs"]:
        task, seed = run["name"].rsplit("-seed", 1)
        points = sorted((e["length"], e["accuracy"], e["count"]) for e in run["eval"])
        exact = [length for length, accuracy, _ in points if accuracy == 1.0]
        upto = exact_up_to(points)
        longest = points[-1]
        rows.append([task, f"{run['data']['min_len']}..{run['data']['max_len']}", seed,
                     secs(run["train_seconds"]), upto if upto else "none",
                     f"{f3(longest[1])} at {longest[0]} ({longest[2]} problems)",
                     f"{len(exact)} of {len(points)}"])
    header = ["task", "training lengths", "seed", "training (s)", "exact at every length up to",
              "accuracy at the longest", "lengths exact"]
    return table(header, rows) + source(res, name)


def npi_generalization(res):
    return generalization_table(res, "npi_generalization")


def npi_generalization_sort(res):
    return generalization_table(res, "npi_generalization_sort")


def memory_baseline(res):
    resnet, npi_ = res("memory_resnet"), res("memory_npi")
    r, n = resnet["results"][0], npi_["results"][0]
    rows = [
        [f"ResNet-18, batch {resnet['config']['batch']}", num(r["peak_bytes"]),
         num(r["activation_peak_bytes"]), num(resnet["peer"]["activation_peak_bytes"]),
         f3(r["activation_peak_ratio_vs_profiler"]), f"{r['step_ms']:.0f}"],
        [f"NPI {npi_['config']['task']}, {npi_['config']['batch']} traces", num(n["peak_bytes"]),
         num(n["activation_peak_bytes"]), "-", "-", f"{n['step_ms']:.0f}"],
    ]
    header = ["workload", "peak_bytes", "activation_peak_bytes", "torch.profiler's activation peak",
              "ratio", "step ms"]
    return table(header, rows) + source(res, "memory_resnet", "memory_npi")


def peer_row(peer):
    """PyTorch checkpointing's better mode; older results ran only use_reentrant=True."""
    modes = {r["technique"]: r for r in peer["rows"]}
    best = peer.get("best", "checkpoint")
    if best == "checkpoint":
        return ["PyTorch checkpointing (peer, use_reentrant=True)", "every unit",
                f3(peer["checkpoint_activation_peak_ratio"]), f3(peer["checkpoint_time_ratio"]), "-"]
    other = "checkpoint_reentrant" if best == "checkpoint_nonreentrant" else "checkpoint_nonreentrant"
    flag = {"checkpoint_reentrant": "True", "checkpoint_nonreentrant": "False"}
    return [f"PyTorch checkpointing (peer, use_reentrant={flag[best]})",
            f"every unit; use_reentrant={flag[other]}: peak "
            f"{f3(modes[other]['activation_peak_ratio'])}, time {f3(modes[other]['time_ratio'])}",
            f3(peer["checkpoint_activation_peak_ratio"]), f3(peer["checkpoint_time_ratio"]), "-"]


def memory_techniques(res):
    every, budget, tight = res("memory_techniques"), res("memory_budget"), res("memory_budget_tight")

    def row(data, technique, plan, claim=False, label=None):
        r = by_technique(data, technique)
        return [label or technique, plan, bold(f3(r["activation_peak_ratio"]), claim),
                f3(r["time_ratio"]), grad_diff(r["max_abs_grad_diff"])]

    def budget_of(data):
        return option(data["reproduce"]["commands"], "--budget")

    relu = by_technique(every, "relu")["relu"]
    peer = every["checkpoint_peer"]
    b, t = budget_of(budget), budget_of(tight)
    rows = [
        row(every, "relu", f"every ReLU output compressed (sparsity {relu['sparsity']:.3f}, "
                           f"{relu['compression_ratio']:.2f}x)"),
        row(every, "recompute", "every unit", claim=True),
        row(every, "swap", "every unit, slack schedule"),
        row(every, "all", "every unit recompute+swap, ReLU compressed"),
        peer_row(peer),
        row(budget, "recompute", "planner: stem and stage 1-2 blocks", label=f"recompute, budget {b}"),
        row(budget, "swap", "planner: every unit, just-in-time swap-in", claim=True,
            label=f"swap, budget {b}"),
        row(budget, "all", "planner: every unit swapped, just in time", label=f"all, budget {b}"),
        row(tight, "swap", "planner: every unit, on-demand swap-in", label=f"swap, budget {t}"),
        row(tight, "all", "planner: every unit swapped, on demand, ReLU compressed", claim=True,
            label=f"all, budget {t}"),
    ]
    header = ["technique", "plan", "activation peak ratio", "time ratio", "max abs grad diff"]
    return table(header, rows) + source(res, "memory_techniques", "memory_budget",
                                        "memory_budget_tight")


def memory_resnet50(res):
    data = res("memory_resnet50")
    run = data["runs"][0]
    none = by_technique(run, "none")
    config = run["config"]
    plans = {"none": "-", "recompute": "every unit", "swap": "every unit, slack schedule",
             "reuse": "the step's allocations from one planned arena",
             "all": "every unit recompute+swap, ReLU compressed"}

    def row(technique):
        r = by_technique(run, technique)
        if technique == "relu":
            plan = (f"every ReLU output compressed (sparsity {r['relu']['sparsity']:.3f}, "
                    f"{r['relu']['compression_ratio']:.2f}x)")
        elif technique == "algo":
            plan = "each convolution on its least-workspace algorithm (lossy)"
        else:
            plan = plans[technique]
        return [technique, plan, f"{r['activation_peak_bytes'] / 2**20:.1f}",
                f3(r["activation_peak_ratio"]), f3(r["time_ratio"]),
                grad_diff(r["max_abs_grad_diff"])]

    peer = run["checkpoint_peer"]
    peer_cells = peer_row(peer)
    rows = [row(t) for t in ("none", "relu", "recompute", "swap", "reuse", "algo", "all")]
    rows.append(peer_cells[:2] + ["-"] + peer_cells[2:])
    lines = [f"{config['image_size']}x{config['image_size']} images, batch {config['batch']}, "
             f"{config['parameters']:,} parameters, {run['threads']} thread(s), "
             f"{run['warmup_steps']} warm-up and {run['steps']} measured steps per row; none's "
             f"activation peak is {f3(none['activation_peak_ratio_vs_profiler'])}"
             "x what torch.profiler counts for the same step in the same run:", ""]
    header = ["technique", "plan", "activation peak MiB", "activation peak ratio", "time ratio",
              "max abs grad diff"]
    algo, rounding = by_technique(run, "algo"), data["float32_rounding"]
    after = ["", f"algo's first-step gradients are {algo['first_step_grad_rel_l2_diff']:.1e} from "
             "none's (relative L2); in PyTorch, float32 rounding alone moves the same network's "
             f"first gradients as far: {rounding['float32_onednn_vs_aten_conv_rel_l2']:.1e} between "
             "its two float32 convolutions (oneDNN's and ATen's), "
             f"{rounding['float32_onednn_vs_float64_rel_l2']:.1e} between float32 and float64 "
             "(`bench/peers/resnet_rounding_peer.py`, in the same script)."]
    return lines + table(header, rows) + after + source(res, "memory_resnet50")


def memory_relu(res):
    data = res("memory_relu")
    r = by_technique(data, "relu")
    rows = [[f"{k['sparsity']:.0%}", f"{k['format_overhead']:.2%}", f"{k['compress_gbps']:.1f}",
             f"{k['decompress_gbps']:.1f}", f"{k['memcpy_gbps']:.1f}"]
            for k in data["relu_kernels"]["results"]]
    header = ["zeros", "format beyond bitmap plus values", "compress GB/s", "decompress GB/s",
              "memcpy GB/s"]
    lines = [f"ResNet-18 with `relu`: saving {f3(r['relu']['saving_vs_prediction'])} of the "
             f"prediction, time ratio {f3(r['time_ratio'])}, max abs grad diff "
             f"{grad_diff(r['max_abs_grad_diff'])}. The CPU kernels on "
             f"{data['relu_kernels']['threads']} thread(s), dense bytes per second:", ""]
    return lines + table(header, rows) + source(res, "memory_relu")


def memory_example_technique(res):
    data = res("memory_example_technique")
    rows = []
    for r in data["results"]:
        rows.append([f"`{r['technique']}`", "yes" if r["lossless"] else "no",
                     f"{r['activation_peak_bytes'] / 2**20:.1f}", f3(r["activation_peak_ratio"]),
                     f3(r["time_ratio"]), f"{r['first_step_grad_rel_l2_diff']:.2e}",
                     grad_diff(r["max_abs_grad_diff"])])
    header = ["technique", "lossless", "activation peak MiB", "vs none", "time ratio",
              "first step's gradient error (relative L2)", "max abs grad diff"]
    lines = [f"ResNet-18, batch {data['config']['batch']}: `fp16` is "
             "examples/techniques/Fp16Store.cpp, linked by one line of CMakeLists.txt and measured "
             "with no change to the bench:", ""]
    return lines + table(header, rows) + source(res, "memory_example_technique")


def gpu_source(data, name):
    """The line under a GPU table: the file, its commit and the machine it ran on."""
    r = data["reproduce"]
    m = r["machine"]
    return ["", f"Generated from `results/{name}.json`: commit {r['commit']}, {m['gpu']} "
            f"(GPU, memory, driver), {m['cpu']}, {m['cores']} cores."]


def gpu_relu_cuda(res):
    data = res("gpu_relu_cuda")
    rows = [[f"{k['sparsity']:.0%}", f"{k['compression_ratio']:.2f}", f"{k['compress_gbps']:.0f}",
             f"{k['decompress_gbps']:.0f}", f"{k['memcpy_gbps']:.0f}",
             f"{k['compress_vs_memcpy']:.2f}", f"{k['decompress_vs_memcpy']:.2f}"]
            for k in data["results"]]
    header = ["zeros", "dense / compressed", "compress GB/s", "decompress GB/s", "memcpy GB/s",
              "compress / memcpy", "decompress / memcpy"]
    elements = data["results"][0]["elements"]
    lines = [f"{data['device']}, {elements:,} floats, median of {data['repeats']} runs timed with "
             "CUDA events, dense bytes per second:", ""]
    return lines + table(header, rows) + gpu_source(data, "gpu_relu_cuda")


def gpu_machine_source(data, name):
    """The line under a table of a collect.py file run on the GPU machine."""
    m = data["machine"]
    return ["", f"Generated from `results/{name}.json`: commit {data['commit']}, {m['gpu']} "
            f"(GPU, memory, driver), {m['cpu']}, {m['cores']} cores."]


def gpu_memory_resnet(res):
    data = res("gpu_memory_resnet")

    def mb(x):
        return f"{x / 1e6:.1f}"
    rows = []
    for run in data["runs"]:
        r, p = run["rows"][0], run["peer"]
        rows.append([run["config"]["batch"], mb(r["peak_bytes"]), mb(p["peak_bytes"]),
                     f"{r['peak_ratio_vs_torch']:.3f}", mb(r["activation_peak_bytes"]),
                     mb(r["reserved_at_peak_bytes"]), mb(r["fragmentation_bytes"]),
                     f"{r['step_ms']:.2f}", f"{p['step_ms']:.2f}",
                     f"{r['time_ratio_vs_torch']:.2f}"])
    header = ["batch", "Engram peak MB (tracker)", "PyTorch max_memory_allocated MB",
              "peak ratio", "activation peak MB", "reserved at the peak MB",
              "fragmentation MB", "Engram step ms", "PyTorch eager step ms", "time ratio"]
    device = data["runs"][0]["device"]
    lines = [f"CIFAR ResNet-18 trained on {device}, median of {data['runs'][0]['steps']} steps "
             "after one warm-up, Engram and PyTorch eager (Adam fused) side by side in one run:", ""]
    return lines + table(header, rows) + gpu_machine_source(data, "gpu_memory_resnet")


def gpu_npi_addition(res):
    data = res("gpu_npi_addition")
    rows = []
    for run in data["runs"]:
        for e in run["eval"]:
            rows.append([run["name"], run["final_metrics"]["step"], run["train_seconds"],
                         e["length"], e["count"], e["accuracy"], e["trace_exact"],
                         f"{e['seconds']:.1f}"])
    header = ["run", "steps", "train seconds", "length", "problems", "accuracy", "trace exact",
              "eval seconds"]
    return table(header, rows) + gpu_machine_source(data, "gpu_npi_addition")


def gpu_cudnn_conv(res):
    data = res("gpu_cudnn_conv")

    def mb(x):
        return f"{x / 2**20:.2f}"

    def row(label, plan):
        worst = max((r["max_abs_diff"] for r in plan["replaced"]), default=0.0)
        return [label, f"{plan['conv_ms_per_step']:.2f}",
                f"{plan['conv_ms_per_step'] / data['default_plan']['conv_ms_per_step']:.2f}",
                mb(plan["peak_workspace_bytes"]), len(plan["replaced"]), f"{worst:.1e}"]
    rows = [row("cuDNN's heuristic (the default)", data["default_plan"])]
    for plan in data["plans"]:
        limit = plan["limit_bytes"]
        label = ("fastest, any workspace" if limit is None else
                 "fastest with no workspace" if limit == 0 else f"fastest within {mb(limit)} MiB")
        rows.append(row(label, plan) if plan["feasible"] else [label, "infeasible", "", "", "", ""])
    header = ["plan", "conv ms per step", "x default", "peak workspace MiB",
              "passes replaced", "largest difference from the default"]
    lines = [f"{data['device']}, {data['model']} at batch {data['batch']}, {data['math']}, "
             f"cuDNN {data['cudnn_version']}: the three passes of every convolution, each "
             f"algorithm timed with CUDA events (median of {data['repeats']}):", ""]
    return lines + table(header, rows) + gpu_source(data, "gpu_cudnn_conv")


def memory_swap_bandwidth(res):
    data = res("memory_swap_bandwidth")
    none, swap = by_technique(data, "none"), by_technique(data, "swap")
    s = swap["swap"]
    base = none["step_ms"]
    rows = [["slack schedule", f"{s['stall_ms']:.1f}", f"{swap['step_ms']:.0f}",
             f"{swap['step_ms'] - base:.0f}", f"{swap['plan']['estimated_overhead_ms']:.0f}"],
            ["on demand", f"{s['on_demand_stall_ms']:.1f}", f"{s['on_demand_step_ms']:.0f}",
             f"{s['on_demand_step_ms'] - base:.0f}", "-"],
            ["(`none`, no swap)", "-", f"{base:.0f}", "-", "-"]]
    header = ["swap-in start", "backward stall per step (ms)", "step ms", "ms over `none`",
              "the planner's estimate (ms)"]
    return table(header, rows) + source(res, "memory_swap_bandwidth")


def memory_reuse(res):
    def mb(x):
        return f"{x / 1e6:.1f}"

    rows = []
    for name, workload in (("memory_reuse", "ResNet-18, batch 32"),
                           ("memory_reuse_npi", "NPI addition")):
        results = res(name)["results"]
        by_name = {r["technique"]: r for r in results}
        for r in results:
            u = r.get("reuse")
            # Reuse's own cost: against the same row without it (reuse alone: against none).
            without = by_name.get(r["technique"].replace("reuse+", "").replace("reuse", "none"))
            own = (f"{r['step_ms'] / without['step_ms']:.3f}"
                   if u and without else "-")
            rows.append([workload, r["technique"], mb(r["peak_bytes"]),
                         mb(u["arena_bytes"]) if u else "-",
                         mb(u["lower_bound_bytes"]) if u else "-",
                         f"{u['arena_to_lower_bound']:.3f}" if u else "-",
                         f"{u['hit_rate']:.3f}" if u else "-",
                         f"{u['misses']} / {u['conflicts']}" if u else "-",
                         f"{r['step_ms']:.0f}", f"{r['time_ratio']:.3f}", own,
                         r["max_abs_grad_diff"]])
    header = ["workload", "technique", "peak MB", "arena MB", "lower bound MB", "arena / bound",
              "hit rate", "misses / conflicts", "step ms", "time vs none",
              "time vs the row without reuse", "max grad diff"]
    lines = table(header, rows)
    identical = res("memory_reuse_npi")["training"]["model_files_identical"]
    lines += ["", "NPI addition trained with and without `--memory reuse`: model files "
              + ("byte-identical." if identical else "DIFFERENT.")]
    swap_rows = []
    for run in res("memory_swap_rss")["runs"]:
        for r in run["results"]:
            s = r.get("swap") or {}
            rate = run["spill_throttle_bytes_per_second"]
            throttle = f"spill throttled to {rate / 1e9:g} GB/s" if rate else "unthrottled"
            swap_rows.append([r["technique"] + ("" if r["technique"] == "none" else f", {throttle}"),
                              mb(r["peak_bytes"]), mb(r["peak_rss_above_start_bytes"]),
                              mb(s["resident_after_write_bytes"]) if s else "-",
                              mb(s["spill_resident_bytes_after_measured_steps"]) if s else "-",
                              f"{r['time_ratio']:.3f}"])
    lines += ["", "Swap with the spill file's pages dropped after each write (ResNet-18, batch 32):", ""]
    lines += table(["row", "tracked peak MB", "peak RSS above the row's start MB",
                    "spill file resident after a write MB", "resident after the steps MB",
                    "time vs none"], swap_rows)
    return lines + source(res, "memory_reuse", "memory_reuse_npi", "memory_swap_rss")


def high_order(res):
    data = res("npi_high_order")
    programs = {}
    for run in data["runs"]:
        programs.setdefault(run["name"].rsplit("-seed", 1)[0], []).append(run)

    def cell(values):
        lo, hi = min(values), max(values)
        return f"{f3(lo)} for all {len(values)}" if lo == hi else f"{f3(lo)}-{f3(hi)} over {len(values)}"

    rows, heldout = [], []
    for program, runs in programs.items():
        evals = [e for r in runs for e in r["eval"]]
        k100 = {e["primitive"] for e in evals if e["k"] == 100}
        order = []  # the primitives in the order the script evaluated them
        for command in runs[0]["commands"]:
            p = option([command], "--primitive")
            if isinstance(p, str) and p in k100 and p not in order:
                order.append(p)
        main = [e for e in evals if e["primitive"] in k100]
        k10 = [e["accuracy"] for e in main if e["k"] == 10]
        k100s = [e["accuracy"] for e in main if e["k"] == 100]
        times = [r["train_seconds"] for r in runs]
        rows.append([program.upper(), ", ".join(order), cell(k10), cell(k100s),
                     f3(min(e["trace_exact"] for e in main)), secs_range(times)])
        for p in sorted({e["primitive"] for e in evals} - k100):
            held = [e for e in evals if e["primitive"] == p]
            heldout.append([f"{program.upper()}, held-out `{p}`", "network added with `--add` after training",
                            ", ".join(f3(e["accuracy"]) for e in held), "",
                            f3(min(e["trace_exact"] for e in held)), ""])
    header = ["program", "primitives", "K = 10: accuracy, seeds " + ", ".join(
        r["name"].rsplit("-seed", 1)[1] for r in next(iter(programs.values()))),
              "K = 100: accuracy, seeds " + ", ".join(
        r["name"].rsplit("-seed", 1)[1] for r in next(iter(programs.values()))),
              "trace_exact", "training (s)"]
    return table(header, rows + heldout) + source(res, "npi_high_order")


def primitives_networks(res):
    data = res("primitives_networks")
    rows = []
    for run in data["runs"]:
        prims = run["primitives"]
        rows.append([run["k"], len(prims), num(sum(p["examples"] for p in prims)),
                     "yes" if run["all_exact"] else "no", secs(run["train_seconds"])])
    header = ["K", "networks", "inputs (whole domains)", "all exact", "training (s)"]
    return table(header, rows) + source(res, "primitives_networks")


def longest(data, config):
    return max(r["train_seconds"] for r in data["runs"] if r["config"] == config)


def tbcnn_stdlib(res):
    data = res("tbcnn_stdlib")
    s = data["summary"]
    points = data["claims"]["tbcnn_minus_bow_points"]
    rows = []
    for config, label in (("bow", "bag of node types (`--model bow`)"),
                          ("tbcnn", "TBCNN, node types only"),
                          ("tbcnn-identifiers", "TBCNN `--identifiers`")):
        acc = mean_std(s[config])
        if config == "tbcnn":
            acc = f"**{acc}** ({points:+.1f} points)"
        rows.append([label, "classify", acc, f3(s[config]["top5_mean"]), s[config]["classes"],
                     secs(longest(data, config))])
    header = ["model", "task", "test accuracy (mean ± std)", "top-5", "classes",
              "longest training (s)"]
    return table(header, rows) + source(res, "tbcnn_stdlib")


def masked_label(data, config):
    run = next(r for r in data["runs"] if r["config"] == config)
    layers = option(run["commands"], "--layers")
    residual = " residual" if option(run["commands"], "--residual") else ""
    kind = "localized" if option(run["commands"], "--model") == "localized" \
        else "whole tree, pivot flag"
    return f"{kind}, {layers}{residual} layers"


def masked(res, name, selected=False, per_seed=False):
    data = res(name)
    s = data["summary"]
    configs = list(s)
    best = {split: max(s[c][split]["accuracy_mean"] for c in configs) for split in ("valid", "test")}
    rows = []
    for c in configs:
        row = [masked_label(data, c)]
        for split in ("valid", "test"):
            row.append(bold(mean_std(s[c][split]), s[c][split]["accuracy_mean"] == best[split]))
        if per_seed:
            row += ["/".join(f3(a) for a in s[c][split]["accuracy"]) for split in ("valid", "test")]
        row.append(f3(s[c]["test"]["top5_mean"]))
        if selected:
            row.append("/".join(str(r["selected_step"]) for r in data["runs"] if r["config"] == c))
        row.append(secs(longest(data, c)))
        rows.append(row)
    header = ["model", "valid accuracy (mean ± std)", "test accuracy (mean ± std)"]
    if per_seed:
        header += ["valid, seeds 1/2/3", "test, seeds 1/2/3"]
    header.append("test top-5")
    if selected:
        header.append("chosen steps (seeds 1/2/3)")
    header.append("longest training with scoring (s)" if selected else "longest training (s)")
    lines = table(header, rows)
    if "localized" in s:
        diffs = []
        for c in configs:
            if c == "localized":
                continue
            d = {split: 100 * (s["localized"][split]["accuracy_mean"] - s[c][split]["accuracy_mean"])
                 for split in ("valid", "test")}
            diffs.append(f"{d['valid']:+.1f} valid and {d['test']:+.1f} test against the "
                         f"{masked_label(data, c)}")
        lines += ["", "Localized minus the others (points of mean accuracy): " + "; ".join(diffs) + "."]
    return lines + source(res, name)


def tbcnn_masked(res):
    return masked(res, "tbcnn_masked")


def tbcnn_masked_modules(res):
    return masked(res, "tbcnn_masked_modules", per_seed=True)


def tbcnn_masked_modules_selected(res):
    return masked(res, "tbcnn_masked_modules_selected", selected=True, per_seed=True)


def npi_bench_throughput(data):
    rows = [[r["batch"], f"{r['cpp_traces_per_s']:.1f}", f"{r['cpp_torch_layers_traces_per_s']:.1f}",
             f"{r['python_traces_per_s']:.1f}", f"{r['ratio']:.2f}", f"{r['layers_speedup_vs_torch']:.2f}"]
            for r in data["results"]]
    header = ["traces per step", "C++ (nn/ layers) traces/s", "C++ (torch modules) traces/s",
              "Python traces/s", "C++ / Python", "nn/ / torch modules"]
    return table(header, rows)


def npi_bench(res):
    data = res("npi_bench")
    floor = [[r["batch"], f"{r['mean_rows']:.1f}", f"{r['matmul_gflop_per_step']:.3f}",
              f"{r['matmul_peak_gflops']:.1f}", f"{r['matmul_floor_ms_per_step']:.2f}",
              f"{r['cpp_cpu_ms_over_floor']:.2f}x", f"{r['python_cpu_ms_over_floor']:.2f}x"]
             for r in data["results"]]
    floor_header = ["traces per step", "rows per step", "matrix-product GFLOP per step",
                    "`torch::mm` GFLOP/s", "floor ms per step", "C++ CPU time / floor",
                    "Python CPU time / floor"]
    return npi_bench_throughput(data) + [""] + table(floor_header, floor) + source(res, "npi_bench")


def dp_equivalence(res):
    data = res("dp_equivalence")
    schedules = {s["model"]: s for s in data["schedules"]}
    names = {"npi": "NPI (addition, hidden 256)" if data["full_size"] else "NPI (small)",
             "resnet": "ResNet-18, synchronised batch norm" if data["full_size"]
             else "ResNet (small), synchronised batch norm"}
    rows = []
    for e in data["equivalence"]:
        # The schedules' comparison runs with Adam: its columns belong to the Adam rows only.
        s = schedules.get(e["model"], {}) if e.get("optimizer", "adam") == "adam" else None
        rows.append([names.get(e["model"], e["model"]), e.get("optimizer", "adam"),
                     num(e["parameters"]),
                     f"2 x {e['per_rank_batch']} vs 1 x {2 * e['per_rank_batch']}",
                     f"{e['first_step_gradient_max_abs_difference']:.3g} "
                     f"(of {e['first_step_gradient_largest']:.3g})",
                     f"{e['max_abs_difference']:.3g}",
                     f"{e['max_abs_difference_without_exchange']:.3g}",
                     "" if s is None else
                     "yes" if s.get("after_vs_overlap_bit_identical") else "no",
                     "" if s is None else
                     f"{s.get('overlap_buckets_sent_during_backward', 0)} of "
                     f"{s.get('overlap_buckets', 0)}"])
    header = ["model", "optimizer", "parameters", "ranks x batch",
              "first step: gradients' max abs difference (largest gradient)",
              "parameters after 20 steps: max abs difference", "the same without the exchange", "after = overlap bit for bit",
              "buckets sent during backward"]
    return table(header, rows) + source(res, "dp_equivalence")


def dp_learning(res):
    return npi_runs(res, ["dp_learning"])


def dp_bench(res):
    data = res("dp_bench")
    rows = []
    for run in data["runs"]:
        mb = run["options"]["bucket_mb"]
        ddp = {p["link_bandwidth"]: p["step_seconds"] for p in (run.get("peer") or {}).get("rows", [])}
        for r in run["rows"]:
            peer = ddp.get(r["link_bandwidth"]) if r["model"] == "resnet" and \
                r["schedule"] == "overlap" else None
            rows.append([r["model"], f"{mb:g} MiB", r["link"], r["schedule"],
                         f"{r['step_seconds'] * 1e3:.0f}", f"{r['compute_seconds'] * 1e3:.0f}",
                         f"{r['communication_seconds'] * 1e3:.0f}",
                         f"{r['step_seconds'] / max(r['compute_seconds'], r['communication_seconds']):.2f}",
                         f"{r['overlap_efficiency']:.2f}", f"{r['bytes_per_step'] / 1e6:.1f}",
                         f"{peer * 1e3:.0f}" if peer else ""])
    header = ["model", "buckets", "link", "schedule", "step ms", "compute ms", "communication ms",
              "step / max(compute, comm)", "overlap efficiency", "MB per step", "DDP step ms"]
    return table(header, rows) + source(res, "dp_bench")


def dp_ooo(res):
    data = res("dp_ooo")
    rows = []
    for run in data["runs"]:
        ddp = {p["link_bandwidth"]: p["step_seconds"] for p in (run.get("peer") or {}).get("rows", [])}
        by = {}
        for r in run["rows"]:
            by.setdefault((r["model"], r["link_bandwidth"]), {})[r["schedule"]] = r
        for (model, bandwidth), s in by.items():
            o, v = s["ooo"], s["overlap"]
            peer = ddp.get(bandwidth) if model == "resnet" else None
            rows.append([model, o["link"], f"{o['compute_seconds'] * 1e3:.0f}",
                         f"{o['communication_seconds'] * 1e3:.0f}",
                         f"{o['communication_cpu_seconds'] * 1e3:.0f}",
                         f"{v['step_seconds'] * 1e3:.0f}", f"{o['step_seconds'] * 1e3:.0f}",
                         f"{o['ooo']['k']} of {o['ooo']['layers']}",
                         f"{v['step_seconds'] / o['step_seconds']:.2f}",
                         f"{o['step_seconds'] / max(o['compute_seconds'], o['communication_seconds']):.2f}",
                         f"{peer * 1e3:.0f}" if peer else ""])
    header = ["model", "link", "compute ms", "communication ms", "its CPU ms", "overlap step ms",
              "ooo step ms", "ooo k", "overlap / ooo", "ooo / max(compute, comm)", "DDP step ms"]
    return [ooo_claim(data), ""] + table(header, rows) + source(res, "dp_ooo")


def ooo_claim(data):
    c = data["ooo_claim"]
    return (f"Claim row ({c['link']}, the ResNet link whose communication alone is closest to "
            f"its compute): ooo {c['ooo_speedup_over_overlap']:.2f}x faster than overlap; its "
            f"step {c['ooo_step_over_max_compute_communication']:.2f} x max(compute, "
            f"communication), {c['ooo_step_over_compute_plus_communication_cpu']:.2f} x "
            "max(compute + the collectives' CPU, communication).")


def link_name(b):
    bits = b * 8
    return "unshaped" if b == 0 else f"{bits / 1e9:g} Gb/s" if bits >= 1e9 else \
        f"{bits / 1e6:g} Mb/s"


def dp_hosts(res):
    """Each link emulated (sleeps on loopback) beside the same link shaped between two hosts."""
    data = res("dp_hosts")
    run = data["run"]
    links = run["options"]["link_bandwidths"] + run["options"]["predict_links"]
    step = {(r["model"], r["link_kind"], r["link_bandwidth"], r["schedule"]): r
            for r in run["rows"]}
    peer = {(r["link_kind"], r["link_bandwidth"]): r["step_seconds"]
            for r in (run["peer"] or {}).get("rows", [])}
    rows = []
    for model in run["options"]["models"]:
        for b in sorted(links, key=lambda b: (b != 0, -b)):
            for s in run["options"]["schedules"]:
                e, h = step[(model, "emulated", b, s)], step[(model, "shaped", b, s)]
                rows.append([model, link_name(b), s, f"{e['step_seconds'] * 1e3:.0f}",
                             f"{h['step_seconds'] * 1e3:.0f}",
                             f"{h['step_seconds'] / e['step_seconds']:.2f}",
                             f"{h['link_throughput'] / 1e6:.1f}"])
            if model == "resnet" and ("shaped", b) in peer:
                rows.append([model, link_name(b), "DDP", f"{peer[('emulated', b)] * 1e3:.0f}",
                             f"{peer[('shaped', b)] * 1e3:.0f}",
                             f"{peer[('shaped', b)] / peer[('emulated', b)]:.2f}", ""])
    header = ["model", "link", "schedule", "emulated step ms", "shaped step ms",
              "shaped / emulated", "shaped link carried MB/s"]
    return table(header, rows) + source(res, "dp_hosts")


def dp_hosts_predict(res):
    data = res("dp_hosts")
    run = data["run"]
    rows = [[p["model"], p["schedule"], link_name(p["link_bandwidth"]),
             f"{p['predicted_step_seconds'] * 1e3:.0f}", f"{p['measured_step_seconds'] * 1e3:.0f}",
             f"{p['error']:.1%}", f"{p['sleep_model_step_seconds'] * 1e3:.0f}",
             f"{p['sleep_model_difference']:.1%}"]
            for p in run["link_predictions"] if p["link_kind"] == "shaped"]
    header = ["model", "schedule", "target link", "predicted step ms", "measured step ms",
              "error", "sleep model's step ms", "sleep model off by"]
    fit = ", ".join(link_name(b) for b in run["options"]["link_bandwidths"])
    return [f"Fitted on the shaped links ({fit}); largest error {data['max_error_shaped']:.1%}; the sleep "
            f"model at most {data['max_sleep_model_difference']:.1%} off the shaped link.", ""] + \
        table(header, rows) + source(res, "dp_hosts")


def dp_predict(res):
    data = res("dp_predict")
    fit = data["run"]["options"]["link_bandwidths"]
    rows = [[p["model"], p["schedule"], p["link"], f"{p['predicted_step_seconds'] * 1e3:.0f}",
             f"{p['measured_step_seconds'] * 1e3:.0f}", f"{p['error']:.1%}"]
            for p in data["run"]["link_predictions"]]
    header = ["model", "schedule", "target link", "predicted step ms", "measured step ms", "error"]
    def name(b):
        bits = b * 8
        return "loopback" if b == 0 else f"{bits / 1e9:g} Gb/s" if bits >= 1e9 else \
            f"{bits / 1e6:g} Mb/s"
    links = ", ".join(name(b) for b in fit)
    return [f"Fitted on {links}; largest error {data['max_error']:.1%}.", ""] + \
        table(header, rows) + source(res, "dp_predict")


def dp_host(res):
    data = res("dp_host")
    by = {}
    for r in data["run"]["rows"]:
        by.setdefault((r["model"], r["link_bandwidth"]), {})[r["schedule"]] = r
    rows = []
    for (model, _), s in by.items():
        h, v = s["host"], s["overlap"]
        path = ", ".join(f"{p['chunk_layers']}: {p['step_seconds'] * 1e3:.0f}"
                         for p in h["host"]["search_path"])
        rows.append([model, h["link"], f"{v['step_seconds'] * 1e3:.0f}",
                     f"{h['step_seconds'] * 1e3:.0f}",
                     f"{h['host']['chunk_layers']} of {h['host']['layers']}", path])
    header = ["model", "link", "overlap step ms", "host step ms", "chunk (layers)",
              "search path (layers: step ms)"]
    return table(header, rows) + source(res, "dp_host")


def npi_ooo_threads(res):
    data = res("npi_ooo_threads")
    eps = data["examples_per_second"]
    best = {}
    for r in data["runs"]:
        config = r["name"].split(".")[0]
        best[config] = min(best.get(config, float("inf")), r["seconds"])
    labels = {"threads1": "1 intra-op thread", "threads2": "2 intra-op threads",
              "ooo2": "`--ooo-threads 2` (1 + 1)"}
    rows = [[labels[c], secs(best[c]), f"{eps[c]:.0f}", f"{eps[c] / eps['threads1']:.2f}"]
            for c in ("threads1", "threads2", "ooo2")]
    header = ["backward", f"seconds for {data['steps']} steps (best run)", "examples/s",
              "against 1 thread"]
    lines = [f"Addition NPI, hidden {data['hidden']}, batch {data['batch']}: `--ooo-threads 2` at "
             f"{data['ooo_threads_over_best_intra_op']:.2f}x the best of 1 and 2 intra-op threads; "
             "model file byte-identical to one thread's: "
             f"{'yes' if data['model_bytes_identical_to_one_thread'] else 'no'}.", ""]
    return lines + table(header, rows) + source(res, "npi_ooo_threads")


def fuzz(res):
    data = res("fuzz")
    rows = []
    for target, entry in data["targets"].items():
        runs = entry["runs"]
        rows.append([f"`{target}`", len(runs), f"{entry['seconds'] / 3600:.2f}",
                     num(entry["executions"]), entry.get("coverage", ""),
                     max((r.get("corpus_files") or 0) for r in runs),
                     sum(1 for r in runs if r["exit"] != 0)])
    header = ["target", "runs", "hours", "executions", "coverage (edges)", "corpus files",
              "runs that found a failure"]
    return table(header, rows) + source(res, "fuzz")


def setup_times(res):
    """The README's two commands from a fresh clone: what each found there, and its time."""
    data = res("setup_times")
    rows = []
    for run in data["runs"]:
        if run["python_environment_present"]:
            env = "pinned Python environment present"
        else:
            env = ("new pinned Python environment (from PyPI"
                   + (")" if run.get("pip_cache", True) else ", no pip cache)"))
        cache = run["ccache"]
        if cache is None:
            objects = "no ccache"
        else:
            objects = (f"ccache served {cache['hits']} of "
                       f"{cache['hits'] + cache['misses']} compilations")
        minutes, seconds = divmod(round(run["seconds"]), 60)
        rows.append([f"`{run['command']}`", f"{env}; {objects}",
                     f"{run['load_average_at_start']:.1f}", f"{minutes} min {seconds} s"])
    header = ["command", "from a fresh clone", "load average at its start", "time"]
    return table(header, rows) + source(res, "setup_times")


def synth_recognizers(res):
    data = res("synth_recognizers")

    def share(score):
        return f"{score['correct']}/{score['functions']} ({score['accuracy']:.3f})"

    rows = []
    for t in data["tbcnn"]:
        seed = t["name"].rsplit("seed", 1)[-1]
        steps = option(t["commands"], "--steps") or "3000"
        rows.append([f"localized TBCNN, loop task, seed {seed}", share(t["test_functions"]),
                     share(t["suite"]), f"{steps} steps, {secs(t['train_seconds'])} s"])
    trace = data["trace"]
    rows.append(["trace (`engram synth`)", share(trace["test_functions"]), share(trace["suite"]),
                 "none"])
    header = ["recogniser", "generated loops, test split", "suite's one-stage functions",
              "training"]
    return table(header, rows) + source(res, "synth_recognizers")


def evaluation_lengths(data):
    """Each task's evaluation lengths by position (20, 100, 1000; sort-recursive has no third)."""
    return max((list(t["rows"][0]["accuracy"]) for t in data["tasks"]), key=len)


def fewest_traces(data, lengths):
    """Per task, the smallest budget exact on every seed at the key and the long length."""
    summary = []
    for t in data["tasks"]:
        def smallest(budget, length):
            if length is None:
                return "not run"
            return f"{budget}" if budget is not None else "none of these"
        row = [t["task"], smallest(t["smallest_budget_exact_at_key_length"], t["key_length"])]
        if len(lengths) > 2:
            row.append(smallest(t["smallest_budget_exact_at_long_length"], t["long_length"]))
        summary.append(row)
    return table(["task"] + [f"exact at {length}" for length in lengths[1:3]], summary)


def npi_sample_efficiency(res):
    data = res("npi_sample_efficiency")

    def seeds(values):
        return " / ".join("–" if v is None else f"{v:.2f}" for v in values)

    rows = []
    # Columns by position: each task's first, second and third evaluation length (20, 100, 1000;
    # sort-recursive has no third).
    lengths = evaluation_lengths(data)
    for t in data["tasks"]:
        for row in t["rows"]:
            own = list(row["accuracy"])
            cells = [seeds(row["accuracy"][own[i]]) if i < len(own) else "not run"
                     for i in range(len(lengths))]
            rows.append([t["task"], row["budget"]] + cells)
    seed_list = ", ".join(str(s) for s in data["tasks"][0]["rows"][0]["seeds"])
    header = ["task", "traces", f"accuracy at {lengths[0]} (seeds {seed_list})"] + \
        [f"at {length}" for length in lengths[1:]]
    lines = table(header, rows)
    lines += ["", "The fewest traces from which on every seed is exact (at every larger budget too):",
              ""]
    lines += fewest_traces(data, lengths)
    plain = next((t for t in data["tasks"] if t["task"] == "addition"), None)
    if plain and plain["diagnosis"]:
        rows = []
        for d in plain["diagnosis"]:
            kinds = ", ".join(f"{kind} ({n})" for kind, n in
                              list(d["first_divergences_of_listed"].items())[:3])
            rows.append([d["budget"], d["wrong_answers"], d["failures_listed"], kinds])
        lines += ["", "Where plain addition fails: its first divergence from the reference trace "
                  "in the failures `eval npi` lists (the first 10 per length and seed):", ""]
        lines += table(["traces", "wrong answers", "failures listed",
                        "first divergences, most frequent"], rows)
    if data.get("remedies"):
        remedy_rows = []
        for r in data["remedies"]:
            def acc(a):
                return " / ".join(f"{v:.2f}" for v in a.values())
            remedy_rows.append([f"{r['task']}, {r['budget']} traces, seed {r['seed']}", r["remedy"],
                                acc(r["accuracy"]), acc(r["default_accuracy"] or {}),
                                secs(r["train_seconds"])])
        lines += ["", "What a user would try first where plain addition fails (the same traces; "
                  "accuracy at " + " / ".join(lengths) + "):", ""]
        lines += table(["run", "remedy", "accuracy", "default training", "training (s)"],
                       remedy_rows)
    return lines + source(res, "npi_sample_efficiency")


def memory_algo(res):
    data = res("memory_algo")

    def mb(x):
        return f"{x / 1e6:.2f}"

    every = by_technique(data["every_layer"], "algo")
    budget_row = by_technique(data["budget"], "relu+recompute+algo")
    plan = budget_row["plan"]["algorithms"]
    replaced = set(plan["replaced_layers"])
    rows = []
    for layer in every["plan"]["algorithms"]["layers"]:
        costs = {c["algorithm"]: c for c in layer["algorithms"]}
        cells = [f"`{layer['name']}`"]
        for name in ("default", "im2col", "direct"):
            c = costs[name]
            cells.append(f"{mb(c['workspace_bytes'])} / {c['forward_ms'] + c['backward_ms']:.1f}")
        worst = max(c["max_rel_diff"] for c in layer["algorithms"])
        cells += [f"{worst:.1e}", layer["least_workspace"],
                  "**" + next(l["chosen"] for l in plan["layers"] if l["name"] == layer["name"]) +
                  "**" if layer["name"] in replaced else "default"]
        rows.append(cells)
    header = ["layer", "default: workspace MB / fwd+bwd ms", "im2col", "direct",
              "max rel diff", "least workspace", f"chosen under {num(data['budget_bytes'])} B"]
    lines = [f"Every layer on its least-workspace algorithm (`algo`, no budget): activation peak "
             f"ratio {f3(every['activation_peak_ratio'])}, time ratio {f3(every['time_ratio'])}, "
             f"first step's gradient within {every['first_step_grad_rel_l2_diff']:.1e} of none's "
             f"(relative L2). ReLU compression and recompute together reach at best "
             f"{num(data['units_only']['smallest_feasible_bytes'])} B; a budget one byte below "
             f"is met by `relu+recompute+algo` (plan {num(plan['planned_activation_peak_bytes'])} B, the "
             f"row's measured activation peak {num(budget_row['activation_peak_bytes'])} B, "
             f"time ratio {f3(budget_row['time_ratio'])}) by replacing "
             f"{len(replaced)} of {len(plan['layers'])} layers:", ""]
    return lines + table(header, rows) + source(res, "memory_algo")


def synth_all_agree(data, f):
    """The function gave its expected program, and both programs agree on every list."""
    return (not f.get("error") and f["as_expected"] and f["exact"]["agreed"] == f["exact"]["lists"]
            and f["neural"]["agreed"] == f["neural"]["lists"] == data["checks"])


def synth_summary(data):
    functions = data["functions"]
    good = sum(1 for f in functions if synth_all_agree(data, f))
    models = ", ".join(f"{m['task']} {secs(m['train_seconds'])} s" for m in data["models"])
    return (f"{good} of {len(functions)} functions recovered as their `# expect:` line says, with "
            f"their neural program equal to the function on all {data['checks']} random lists of "
            f"length {data['length']} (K = 10). Programs trained once (seconds): {models}.")


def synth(res):
    data = res("synth")
    functions = data["functions"]

    def agreement(a):
        return f"{a['agreed']}/{a['lists']}"

    def all_agree(f):
        return synth_all_agree(data, f)

    rows = []
    for f in functions:
        if f.get("error"):
            rows.append([f"`{f['function']}`", f"`{f['expected']}`", "**error**", "-", "-", "-",
                         secs(f["seconds"])])
            continue
        trained = ", ".join(f"`{t['primitive']}` ({t['steps']} steps{', exact' if t['exact'] else ''})"
                            for t in f["neural"]["trained"]) or "-"
        expression = f"`{f['expression']}`"
        rows.append([f"`{f['function']}`", bold(expression, not f["as_expected"]),
                     trained, agreement(f["exact"]), bold(agreement(f["neural"]), not all_agree(f)),
                     secs(f["seconds"])])
    lines = [synth_summary(data), ""]
    header = ["function", "recovered program", "new primitive trained (as --add)",
              "exact program agrees", "neural program agrees", "seconds"]
    return lines + table(header, rows) + source(res, "synth")


TABLES = {
    "npi_sample_efficiency": npi_sample_efficiency,
    "npi": npi,
    "npi_generalization": npi_generalization,
    "npi_generalization_sort": npi_generalization_sort,
    "memory_baseline": memory_baseline,
    "memory_techniques": memory_techniques,
    "memory_resnet50": memory_resnet50,
    "memory_relu": memory_relu,
    "memory_example_technique": memory_example_technique,
    "gpu_relu_cuda": gpu_relu_cuda,
    "gpu_cudnn_conv": gpu_cudnn_conv,
    "gpu_memory_resnet": gpu_memory_resnet,
    "gpu_npi_addition": gpu_npi_addition,
    "memory_swap_bandwidth": memory_swap_bandwidth,
    "memory_reuse": memory_reuse,
    "memory_algo": memory_algo,
    "npi_high_order": high_order,
    "primitives_networks": primitives_networks,
    "npi_addition_primitive": npi_addition_primitive,
    "tbcnn_stdlib": tbcnn_stdlib,
    "tbcnn_masked": tbcnn_masked,
    "tbcnn_masked_modules": tbcnn_masked_modules,
    "tbcnn_masked_modules_selected": tbcnn_masked_modules_selected,
    "npi_bench": npi_bench,
    "dp_equivalence": dp_equivalence,
    "dp_learning": dp_learning,
    "dp_bench": dp_bench,
    "dp_ooo": dp_ooo,
    "dp_predict": dp_predict,
    "dp_hosts": dp_hosts,
    "dp_hosts_predict": dp_hosts_predict,
    "dp_host": dp_host,
    "npi_ooo_threads": npi_ooo_threads,
    "fuzz": fuzz,
    "setup_times": setup_times,
    "synth_recognizers": synth_recognizers,
    "synth": synth,
}

# --- the README's extracts: a summary line or a small table from the same JSON -------------------

def headline_generalization(res):
    """Per task, over the seeds: how far every evaluated length stays exact, from the sweep that
    evaluates the task furthest (the sort tasks' own sweep goes to 1000 elements)."""
    names = ["npi_generalization", "npi_generalization_sort"]
    tasks = {}
    for name in names:
        for run in res(name)["runs"]:
            task = run["name"].rsplit("-seed", 1)[0]
            tasks.setdefault(task, {}).setdefault(name, []).append(run)
    rows = []
    for task, by_name in tasks.items():
        name, runs = max(by_name.items(),
                         key=lambda item: max(e["length"] for r in item[1] for e in r["eval"]))
        points = [sorted((e["length"], e["accuracy"], e["count"]) for e in r["eval"]) for r in runs]
        upto = min(exact_up_to(p) for p in points)
        every = sum(1 for p in points if all(accuracy == 1.0 for _, accuracy, _ in p))
        lengths = sorted({length for p in points for length, _, _ in p})
        data = runs[0]["data"]
        rows.append([task, f"{data['min_len']}..{data['max_len']}",
                     f"{every} of {len(runs)}", upto if upto else "none",
                     f"{len(lengths)} ({lengths[0]} to {lengths[-1]})",
                     f"`scripts/reproduce/{name}.sh`"])
    header = ["task", "training lengths", "seeds exact at every length evaluated",
              "exact on every seed up to length", "lengths evaluated", "script"]
    return table(header, rows) + source(res, *names)


def headline_sample_efficiency(res):
    data = res("npi_sample_efficiency")
    seeds = ", ".join(str(s) for s in data["tasks"][0]["rows"][0]["seeds"])
    budgets = ", ".join(str(r["budget"]) for r in data["tasks"][0]["rows"])
    return [f"Traces tried: {budgets}; seeds {seeds}. The fewest traces from which every seed is "
            "exact (at every larger budget too):", ""] + \
        fewest_traces(data, evaluation_lengths(data)) + source(res, "npi_sample_efficiency")


def headline_synth(res):
    return [synth_summary(res("synth"))] + source(res, "synth")


def headline_npi_bench(res):
    return npi_bench_throughput(res("npi_bench")) + source(res, "npi_bench")


def headline_dp_ooo(res):
    c = res("dp_ooo")["ooo_claim"]
    return [f"Out-of-order backprop (`--grad-sync ooo`) on the ResNet link whose communication alone "
            f"is closest to its compute ({c['link']}): a step {c['ooo_speedup_over_overlap']:.2f}x "
            f"faster than `overlap`'s, {c['ooo_step_over_max_compute_communication']:.2f} x "
            "max(compute, communication)."] + source(res, "dp_ooo")


HEADLINES = {
    "headline_generalization": headline_generalization,
    "headline_sample_efficiency": headline_sample_efficiency,
    "headline_synth": headline_synth,
    "headline_npi_bench": headline_npi_bench,
    "headline_dp_ooo": headline_dp_ooo,
}

BLOCK = re.compile(r"(<!-- table:([a-z0-9_]+) -->\n)(.*?)(<!-- /table:\2 -->)", re.S)


def render(path, text, res, seen):
    """`text` with every marked table generated; the names found are added to `seen`."""
    def replace(match):
        name = match.group(2)
        make = TABLES.get(name) or HEADLINES.get(name)
        if make is None:
            sys.exit(f"readme_tables.py: unknown table '{name}' in {path}")
        seen.append(name)
        return match.group(1) + "\n".join(make(res)) + "\n" + match.group(4)

    return BLOCK.sub(replace, text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 with a diff when a table differs from the JSON; write nothing")
    parser.add_argument("--file", "--readme", dest="files", action="append", metavar="FILE",
                        help="a Markdown file with table markers (repeatable; default: README.md "
                             "and docs/RESULTS.md)")
    parser.add_argument("--results", default=os.path.join(ROOT, "results"))
    args = parser.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "docs", "RESULTS.md")]
    res = Results(args.results)
    seen_all = []
    done = []
    for path in files:
        with open(path) as f:
            text = f.read()
        seen = []
        new = render(path, text, res, seen)
        seen_all += seen
        done.append((path, text, new, len(seen)))
    missing = sorted(set(TABLES) - set(seen_all))
    if missing:
        sys.exit("readme_tables.py: no marker in " + ", ".join(files) + " for " + ", ".join(missing))
    if args.check:
        differ = False
        for path, text, new, count in done:
            if new != text:
                differ = True
                sys.stdout.writelines(difflib.unified_diff(
                    text.splitlines(True), new.splitlines(True), path,
                    path + " (from results/*.json)"))
                print(f"{path}: a result table differs from results/*.json; run "
                      "scripts/reproduce/readme_tables.py to rewrite it", file=sys.stderr)
            else:
                print(f"{path}: {count} result tables match results/*.json")
        if differ:
            sys.exit(1)
        return
    for path, text, new, count in done:
        if new != text:
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(new)
            os.replace(tmp, path)
        print(f"{path}: {count} result tables written from results/*.json")


if __name__ == "__main__":
    main()
