#!/usr/bin/env python3
"""check_invariants.py KIND FILE: fails (exit 1, naming the first broken invariant) unless the
results file FILE holds together: its figures agree with each other, with the traces beside it and
with what its script asked for. check_json.py bounds single figures; this checks what no single
figure shows. Standard library only; no timing is bounded (timings are benchmarked, never
asserted): only orders of events, counts, byte totals and figures derived from others.

KIND is one of:
memory-timeline (memory_timeline.sh): the rows are none, relu, recompute, swap and all, in that
  order; in each row's trace the live-bytes samples are in time order, the row's peak_bytes is the
  largest sum of a sample's tags, its activation_peak_bytes the largest activation + workspace of
  a sample, and live_bytes_by_tag_at_activation_peak a sample that reaches it (so its activation
  and workspace sum to the peak); the phases batch, forward, backward, clip, optimizer are present
  once each, in that order, without overlap, within the samples' span; every technique's
  activation peak is below none's.
dp-timeline (dp_timeline.sh): the rows are the schedules none, after and overlap, once each, with
  a trace for each rank of each, whose phases are as above, whose weight-gradient tasks are as
  many as the first trace's and whose samples are in time order; a row's all-reduce events are
  bucket 0 .. bucket N-1 for its N buckets (none: no bucket, no bytes) and lie within backward;
  after sends its one bucket when every weight-gradient task has ended, overlap at least one
  before they end (all its buckets counted as sent during backward); after and overlap exchange
  the same bytes per step, the model's gradients: half the Adam state in the trace's samples.
dp-predict (dp_predict.sh): one prediction per model, schedule and predicted link, each fitted on
  the measured links, its error |predicted - measured| / measured, its measured step the one the
  rows hold for that link; max_error the largest error; a row for every model, schedule and link
  (measured and predicted); one model's rows exchange the same bytes; an ooo row's predictions
  cover k = 0 .. layers and its k lies within them.
npi (the NPI scripts' runs): each evaluation's accuracy is correct / count, with 0 <= correct <=
  count, and trace_exact <= accuracy (an exact trace gives the right answer); the training
  curve's last loss below its first (the model learned); a run with a trace budget trained on
  that many traces; a task table's accuracies (npi_sample_efficiency.sh) are its runs'.
tbcnn (tbcnn.sh, tbcnn_masked.sh): a summary's means are those of its runs, a claim's points the
  difference of the summary's means, every configuration evaluated on as many examples per split;
  tbcnn.sh's benchmark read every function of the corpus and trained on its train split.
tbcnn-vectors (tbcnn_vectors.sh): per model, the classes are the evaluation's, the split's
  examples its count, every kept example's label a class, its vector `dim` finite numbers; every
  class kept as many times, and the vectors not all the same.
"""
import gzip
import json
import math
import os
import re
import sys

PHASES = ["batch", "forward", "backward", "clip", "optimizer"]
MEMORY_TECHNIQUES = ["none", "relu", "recompute", "swap", "all"]
DP_SCHEDULES = ["none", "after", "overlap"]


class Broken(Exception):
    pass


def need(condition, message):
    if not condition:
        raise Broken(message)


def load_trace(results, relative):
    path = os.path.join(os.path.dirname(os.path.abspath(results)), relative)
    need(os.path.exists(path), f"trace {relative} is missing")
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    need(isinstance(events, list) and events, f"{relative}: no events")
    return events


def samples(events, name):
    """The live-bytes counter samples, checked to be in time order."""
    found = [e for e in events if e.get("ph") == "C" and e.get("name") == "live bytes"]
    need(found, f"{name}: no live-bytes samples")
    times = [e["ts"] for e in found]
    for i in range(1, len(times)):
        need(times[i - 1] <= times[i],
             f"{name}: live-bytes sample {i} at {times[i]} comes before sample {i - 1} at "
             f"{times[i - 1]}")
    return found


def phases(events, name, span=None):
    """{phase: (start, end)}, each of PHASES once, in order, not overlapping."""
    found = [e for e in events if e.get("cat") == "phase" and e.get("ph") == "X"]
    names = [e["name"] for e in found]
    need(sorted(names) == sorted(PHASES), f"{name}: phases {names}, expected {PHASES} once each")
    by_name = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in found}
    for earlier, later in zip(PHASES, PHASES[1:]):
        need(by_name[earlier][1] <= by_name[later][0],
             f"{name}: phase {later} starts at {by_name[later][0]}, before {earlier} ends at "
             f"{by_name[earlier][1]}")
    if span is not None:
        need(span[0] <= by_name[PHASES[0]][0] and by_name[PHASES[-1]][1] <= span[1],
             f"{name}: the phases {by_name[PHASES[0]][0]}..{by_name[PHASES[-1]][1]} are not within "
             f"the samples' span {span[0]}..{span[1]}")
    return by_name


def check_memory(results, data):
    rows = data["rows"]
    need([r["technique"] for r in rows] == MEMORY_TECHNIQUES,
         f"rows {[r['technique'] for r in rows]}, expected {MEMORY_TECHNIQUES}")
    for row in rows:
        name = f"rows.{row['technique']}"
        events = load_trace(results, row["trace"])
        found = samples(events, name)
        totals = [sum(e["args"].values()) for e in found]
        need(row["peak_bytes"] == max(totals),
             f"{name}: peak_bytes {row['peak_bytes']}, the trace's largest sample {max(totals)}")
        active = [e["args"].get("activation", 0) + e["args"].get("workspace", 0) for e in found]
        need(row["activation_peak_bytes"] == max(active),
             f"{name}: activation_peak_bytes {row['activation_peak_bytes']}, the trace's largest "
             f"activation + workspace {max(active)}")
        tags = row["live_bytes_by_tag_at_activation_peak"]
        need(tags.get("activation", 0) + tags.get("workspace", 0) == row["activation_peak_bytes"],
             f"{name}: the tags at the activation peak {tags} do not sum to "
             f"activation_peak_bytes {row['activation_peak_bytes']}")
        need(any(e["args"] == tags for e, a in zip(found, active) if a == max(active)),
             f"{name}: no sample at the activation peak holds {tags}")
        phases(events, name, (found[0]["ts"], found[-1]["ts"]))
    none = rows[0]["activation_peak_bytes"]
    for row in rows[1:]:
        need(row["activation_peak_bytes"] < none,
             f"rows.{row['technique']}: activation_peak_bytes {row['activation_peak_bytes']} not "
             f"below none's {none}")
    return len(rows)


def check_dp(results, data):
    bench = data["bench"]
    rows = bench["rows"]
    need(sorted(r["schedule"] for r in rows) == sorted(DP_SCHEDULES),
         f"schedules {[r['schedule'] for r in rows]}, expected {DP_SCHEDULES} once each")
    ranks = bench["options"]["ranks"]
    need(ranks >= 2, f"options.ranks {ranks}: data parallelism needs 2 or more")
    traces = data["traces"]
    need(len(traces) == len(rows) * ranks,
         f"{len(traces)} traces, expected {len(rows) * ranks} ({len(rows)} schedules x {ranks} "
         f"ranks)")
    by_schedule = {r["schedule"]: r for r in rows}
    need(by_schedule["none"]["buckets"] == 0 and by_schedule["none"]["bytes_per_step"] == 0,
         f"none exchanges {by_schedule['none']['buckets']} buckets, "
         f"{by_schedule['none']['bytes_per_step']} bytes")
    grads = by_schedule["after"]["bytes_per_step"]
    need(grads > 0 and by_schedule["overlap"]["bytes_per_step"] == grads,
         f"bytes per step: after {grads}, overlap {by_schedule['overlap']['bytes_per_step']}; "
         f"expected the same, above 0")
    after = by_schedule["after"]
    need(after["buckets"] == 1 and after["buckets_sent_during_backward"] == 0,
         f"after: {after['buckets']} buckets, {after['buckets_sent_during_backward']} during "
         f"backward; expected 1, 0")
    overlap = by_schedule["overlap"]
    need(overlap["buckets"] >= 1 and overlap["buckets_sent_during_backward"] == overlap["buckets"],
         f"overlap: {overlap['buckets']} buckets, {overlap['buckets_sent_during_backward']} during "
         f"backward; expected all")
    tasks = None
    for schedule in DP_SCHEDULES:
        row = by_schedule[schedule]
        mine = [t for t in traces
                if (f"-{schedule}-rank" in os.path.basename(t))]
        need(len(mine) == ranks, f"{schedule}: {len(mine)} traces, expected one per rank ({ranks})")
        for relative in mine:
            name = os.path.basename(relative)
            events = load_trace(results, relative)
            found = samples(events, name)
            spans = phases(events, name)
            weight = [(e["ts"], e["ts"] + e["dur"]) for e in events
                      if e.get("cat") == "weight_grad"]
            if tasks is None:
                tasks = len(weight)
                need(tasks > 0, f"{name}: no weight-gradient tasks")
            need(len(weight) == tasks, f"{name}: {len(weight)} weight-gradient tasks, the first "
                                       f"trace {tasks}")
            buckets = sorted((e for e in events if e.get("cat") == "communication"),
                             key=lambda e: e["ts"])
            need(sorted(e["name"] for e in buckets)
                 == sorted(f"bucket {i}" for i in range(row["buckets"])),
                 f"{name}: all-reduce events {[e['name'] for e in buckets]}, expected "
                 f"bucket 0 .. bucket {row['buckets'] - 1}")
            start, end = spans["backward"]
            for e in buckets:
                need(start <= e["ts"] and e["ts"] + e["dur"] <= end,
                     f"{name}: {e['name']} at {e['ts']}..{e['ts'] + e['dur']} is not within "
                     f"backward {start}..{end}")
            last_task = max(b for _, b in weight)
            if schedule == "after":
                need(all(e["ts"] >= last_task for e in buckets),
                     f"{name}: after sends a bucket before the weight gradients end at {last_task}")
            if schedule == "overlap":
                need(any(e["ts"] < last_task for e in buckets),
                     f"{name}: overlap sends no bucket before the weight gradients end at "
                     f"{last_task}")
            state = max(e["args"].get("optimizer_state", 0) for e in found)
            need(state == 2 * grads, f"{name}: Adam state {state} bytes, expected twice the "
                                     f"{grads} gradient bytes exchanged per step")
    return len(traces)



def close(a, b, tolerance=1e-9):
    return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))


def check_dp_predict(results, data):
    run = data["run"]
    options = run["options"]
    models, schedules = options["models"], options["schedules"]
    measured, predicted = options["link_bandwidths"], options["predict_links"]
    predictions = run["link_predictions"]
    want = sorted((m, s, float(l)) for m in models for s in schedules for l in predicted)
    have = sorted((p["model"], p["schedule"], float(p["link_bandwidth"])) for p in predictions)
    need(have == want, f"predictions for {have}, expected one for each of {want}")
    rows = {}
    for r in run["rows"]:
        key = (r["model"], r["schedule"], float(r["link_bandwidth"]))
        need(key not in rows, f"two rows for {key}")
        rows[key] = r
    expected_rows = sorted((m, s, float(l)) for m in models for s in schedules
                           for l in list(measured) + list(predicted))
    need(sorted(rows) == expected_rows, f"rows for {sorted(rows)}, expected {expected_rows}")
    for p in predictions:
        name = f"prediction {p['model']} {p['schedule']} {p['link']}"
        need([float(l) for l in p["fit_link_bandwidths"]] == [float(l) for l in measured],
             f"{name}: fitted on {p['fit_link_bandwidths']}, the measured links are {measured}")
        need(p["predicted_step_seconds"] > 0 and p["measured_step_seconds"] > 0,
             f"{name}: steps {p['predicted_step_seconds']}, {p['measured_step_seconds']}")
        error = abs(p["predicted_step_seconds"] - p["measured_step_seconds"]) / \
            p["measured_step_seconds"]
        need(close(p["error"], error), f"{name}: error {p['error']}, |predicted - measured| / "
                                       f"measured is {error}")
        row = rows[(p["model"], p["schedule"], float(p["link_bandwidth"]))]
        need(close(p["measured_step_seconds"], row["step_seconds"]),
             f"{name}: measured {p['measured_step_seconds']} s, the row on that link "
             f"{row['step_seconds']} s")
    need(close(data["max_error"], max(p["error"] for p in predictions)),
         f"max_error {data['max_error']}, the largest error {max(p['error'] for p in predictions)}")
    for model in models:
        sent = {r["bytes_per_step"] for key, r in rows.items() if key[0] == model}
        need(len(sent) == 1 and min(sent) > 0,
             f"{model}: bytes per step {sorted(sent)}, expected one figure above 0")
    for key, r in rows.items():
        if "ooo" in r:
            ooo = r["ooo"]
            need(len(ooo["predicted_step_seconds"]) == ooo["layers"] + 1 and
                 0 <= ooo["k"] <= ooo["layers"],
                 f"{key}: ooo k {ooo['k']} and {len(ooo['predicted_step_seconds'])} predictions "
                 f"for {ooo['layers']} layers, expected k in 0..layers and layers + 1 predictions")
    return len(predictions)


def evaluations(run):
    evals = run.get("eval", [])
    return evals if isinstance(evals, list) else [evals]


def check_npi(results, data):
    checked = 0
    runs = data["runs"]
    need(runs, "no runs")
    for run in runs:
        name = run.get("name", "?")
        for e in evaluations(run):
            at = f"{name} at length {e['length']}"
            need(e["count"] > 0 and 0 <= e["correct"] <= e["count"],
                 f"{at}: {e['correct']} correct of {e['count']}")
            need(close(e["accuracy"], e["correct"] / e["count"]),
                 f"{at}: accuracy {e['accuracy']}, {e['correct']} / {e['count']} correct")
            if "trace_exact" in e:
                need(e["trace_exact"] <= e["accuracy"] + 1e-12,
                     f"{at}: trace_exact {e['trace_exact']} above accuracy {e['accuracy']} (an "
                     f"exact trace gives the right answer)")
            checked += 1
        curve = run.get("curve") or []
        if len(curve) >= 2:
            need(curve[-1]["loss"] < curve[0]["loss"],
                 f"{name}: the last loss {curve[-1]['loss']} is not below the first "
                 f"{curve[0]['loss']}: the model did not learn")
        if "budget" in run:
            need(run["data"]["traces"] == run["budget"] == run["data"]["count"],
                 f"{name}: trained on {run['data']['count']} traces ({run['data']['traces']} "
                 f"asked), its budget is {run['budget']}")
    plain = {(r["task"], r["budget"], r["seed"]): r for r in runs
             if "budget" in r and not r.get("remedy")}
    for task in data.get("tasks", []):
        for row in task["rows"]:
            for length, accuracies in row["accuracy"].items():
                need(len(accuracies) == len(row["seeds"]),
                     f"{task['task']} {row['budget']}: {len(accuracies)} accuracies at {length}, "
                     f"{len(row['seeds'])} seeds")
                for seed, accuracy in zip(row["seeds"], accuracies):
                    run = plain.get((task["task"], row["budget"], seed))
                    need(run is not None, f"{task['task']} {row['budget']} seed {seed}: no run")
                    at = [e["accuracy"] for e in evaluations(run) if str(e["length"]) == length]
                    need(at == [accuracy], f"{task['task']} {row['budget']} seed {seed}: "
                                           f"accuracy {accuracy} at {length}, the run's {at}")
    return checked


def check_tbcnn(results, data):
    summary, runs = data["summary"], data["runs"]
    masked = "scale" in data
    splits = ["valid", "test"] if masked else [None]
    for config, entry in summary.items():
        mine = [r for r in runs if r["config"] == config]
        need(len(mine) == entry["seeds"], f"{config}: {len(mine)} runs, {entry['seeds']} seeds")
        for split in splits:
            evals = [r["eval"][split] if split else r["eval"] for r in mine]
            figures = entry[split] if split else entry
            mean = sum(e["accuracy"] for e in evals) / len(evals)
            need(close(figures["accuracy_mean"], mean),
                 f"{config} {split or 'test'}: accuracy_mean {figures['accuracy_mean']}, its runs' "
                 f"mean {mean}")
            for e in evals:
                need(0 <= e["accuracy"] <= e["top5"] <= 1,
                     f"{config}: accuracy {e['accuracy']} and top-5 {e['top5']}, expected "
                     f"0 <= accuracy <= top-5 <= 1")
    for split in splits:
        counts = {config: (entry[split]["count"] if split else entry["test_examples"])
                  for config, entry in summary.items()}
        need(len(set(counts.values())) == 1 and min(counts.values()) > 0,
             f"{split or 'test'} examples per configuration {counts}: every model is evaluated on "
             f"the same examples")

    def mean(config, split):
        entry = summary[config]
        return (entry[split] if split else entry)["accuracy_mean"]

    if masked:
        pairs = {"localized_minus_flag_points": ("localized", "flag", "test"),
                 "localized_minus_flag_points_valid": ("localized", "flag", "valid"),
                 "localized_minus_flag_deep_points": ("localized", "flag-deep", "test"),
                 "localized_minus_flag_deep_points_valid": ("localized", "flag-deep", "valid")}
    else:
        pairs = {"tbcnn_minus_bow_points": ("tbcnn", "bow", None),
                 "identifiers_minus_bow_points": ("tbcnn-identifiers", "bow", None)}
    for claim, (a, b, split) in pairs.items():
        if a in summary and b in summary:
            points = 100 * (mean(a, split) - mean(b, split))
            need(claim in data["claims"] and close(data["claims"][claim], points),
                 f"claims.{claim} {data['claims'].get(claim)}, the summary gives {points}")
    for run in runs:
        if "selected_step" in run:
            best = max(v for _, v in run["valid_curve"])
            first = min(s for s, v in run["valid_curve"] if v == best)
            need(run["selected_step"] == first,
                 f"{run['name']}: selected step {run['selected_step']}, the earliest best step of "
                 f"its valid curve is {first}")
    if "bench" in data:
        # "wrote N python samples in C classes (train A, valid B, test T) to ..."
        text = " ".join(data["corpus"])
        found = re.search(r"wrote (\d+) python samples .*\(train (\d+), valid (\d+), test (\d+)\)",
                          text)
        need(found, f"the corpus report does not give its split sizes: {text[:200]}")
        samples, train, _, test = (int(g) for g in found.groups())
        bench = data["bench"]
        need(bench["config"]["files"] == samples,
             f"bench read {bench['config']['files']} files, the corpus holds {samples}")
        need(bench["train"]["examples"] == train,
             f"bench trained on {bench['train']['examples']} examples, the train split has {train}")
        need(bench["parse"]["engram_named_nodes"] > 0, "bench parsed no nodes")
        for config, entry in summary.items():
            need(entry["test_examples"] == test,
                 f"{config}: {entry['test_examples']} test examples, the split has {test}")
    return len(runs)


def check_tbcnn_vectors(results, data):
    models = data["models"]
    need(models, "no models")
    for model in models:
        name = model["name"]
        classes, evaluation = model["classes"], model["eval"]
        need(len(classes) == evaluation["classes"] >= 2,
             f"{name}: {len(classes)} classes, the evaluation {evaluation['classes']}")
        need(model["examples_in_split"] == evaluation["count"],
             f"{name}: {model['examples_in_split']} examples in the split, the evaluation "
             f"{evaluation['count']}")
        kept = {}
        vectors = set()
        for i, example in enumerate(model["examples"]):
            need(0 <= example["label"] < len(classes) and 0 <= example["predicted"] < len(classes),
                 f"{name}: example {i}: label {example['label']}, predicted "
                 f"{example['predicted']}, with {len(classes)} classes")
            vector = example["vector"]
            need(len(vector) == model["dim"] and
                 all(isinstance(v, (int, float)) and math.isfinite(v) for v in vector),
                 f"{name}: example {i}: {len(vector)} values, expected {model['dim']} finite ones")
            kept[example["label"]] = kept.get(example["label"], 0) + 1
            vectors.add(tuple(vector))
        need(sorted(kept) == list(range(len(classes))),
             f"{name}: kept examples of classes {sorted(kept)}, expected all {len(classes)}")
        need(len(set(kept.values())) == 1,
             f"{name}: kept {kept} examples per class, expected as many of each")
        need(len(vectors) > 1, f"{name}: every kept vector is the same")
    return len(models)


KINDS = {"memory-timeline": check_memory, "dp-timeline": check_dp, "dp-predict": check_dp_predict,
         "npi": check_npi, "tbcnn": check_tbcnn, "tbcnn-vectors": check_tbcnn_vectors}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        print(f"usage: check_invariants.py {{{','.join(KINDS)}}} FILE", file=sys.stderr)
        return 2
    kind, results = sys.argv[1], sys.argv[2]
    with open(results) as f:
        data = json.load(f)
    try:
        checked = KINDS[kind](results, data)
    except Broken as e:
        print(f"{results}: {e}", file=sys.stderr)
        return 1
    except (KeyError, IndexError, TypeError, ValueError, OSError) as e:
        print(f"{results}: unreadable as {kind} results: {e!r}", file=sys.stderr)
        return 1
    print(f"{results}: {kind} invariants hold ({checked} checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
