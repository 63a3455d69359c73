#!/usr/bin/env python3
"""claims_fail_on_spoiled.py SOURCE_DIR: shows the checks of the quick claims tests failing on
spoiled input, so a bound that nothing can break is caught here (standard library only; no engram
run).

For each test of SPOILS it reads the test's checks from SOURCE_DIR/tests/CMakeLists.txt (the
engram_reproduce_test call: check_json.py's PATH=LO..HI figures and, after INVARIANTS, a
check_invariants.py kind), runs them on the test's input (a quick run's output under
tests/fixtures/claims, or a committed results file with its traces) and requires them to pass;
then, for each spoil, on a copy with one figure set to a wrong value (accuracy 0, a count off by
one, a peak that is not the trace's, ...) they must fail, and the failure must name the spoiled
figure. recognizer.sh's expectation (tests/synth/recognizer_check.py) gets the same treatment:
its recorded runs (tests/fixtures/recognizer_observed.jsonl) pass with the functions' labels and
fail with a label flipped.

The fixtures under tests/fixtures/claims are the scripts' --quick output (one machine, the commit
of their `commit`), with commands, listed failures, the call trees below their first level and
the curve points between the first and the last cut. When a test's
bounds change so that its fixture no longer passes, this test says so: rerun the script with
--quick and cut its output the same way.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# test name: (input relative to SOURCE_DIR, [(spoiled path, wrong value, what it shows)])
# A path is dotted as check_json.py's; the value replaces the figure in a copy of the input.
SPOILS = {
    "reproduce_npi_sample_efficiency_quick": ("tests/fixtures/claims/npi_sample_efficiency.json", [
        ("tasks.1.rows.0.accuracy.10.0", 0.0, "addition-primitive inexact with 20 traces"),
        ("tasks.1.smallest_budget_exact_at_key_length", 8, "a smaller budget than measured"),
        ("tasks.3.rows.1.accuracy.5.0", 0.4, "map inexact with 8 traces"),
        ("tasks.2.rows.0.accuracy.3.0", 0.0, "sort-recursive wrong at length 3"),
        ("runs.0.eval.1.count", 4, "an evaluation one problem short"),
        ("runs.3.data.traces", 7, "a run trained on one trace fewer than its budget"),
        ("runs.2.eval.0.accuracy", 0.4, "a run's accuracy that is not correct / count"),
    ]),
    "reproduce_npi_generalization_quick": ("tests/fixtures/claims/npi_generalization.json", [
        ("runs.0.eval.5.accuracy", 0.0, "addition wrong at 60"),
        ("runs.2.eval.0.accuracy", 0.0, "map wrong at length 1"),
        ("runs.1.eval.1.accuracy", 0.2, "sort-recursive wrong at length 3"),
        ("runs.0.query.correct", False, "the addition query answered wrong"),
        ("runs.0.eval.0.count", 4, "an evaluation one problem short"),
        ("runs.1.curve.-1.loss", 99.0, "a curve whose loss rose"),
    ]),
    "reproduce_dp_learning_quick": ("tests/fixtures/claims/dp_learning.json", [
        ("runs.0.eval.0.accuracy", 0.0, "the 2-rank model wrong at 30"),
        ("runs.0.eval.0.count", 9, "one problem short"),
        ("runs.0.final_metrics.step", 999, "training stopped a step early"),
        ("runs.0.final_metrics.step_error", 0.5, "training that did not fit the traces"),
    ]),
    "reproduce_dp_predict_quick": ("results/dp_predict.json", [
        ("run.link_predictions.0.error", 0.0, "an error not computed from its figures"),
        ("max_error", 0.0, "max_error not the largest error"),
        ("run.link_predictions.1.measured_step_seconds", 123.0, "a measured step no row holds"),
        ("run.rows.0.bytes_per_step", 0, "a row that exchanged nothing"),
    ]),
    "reproduce_tbcnn_quick": ("tests/fixtures/claims/tbcnn_stdlib.json", [
        ("summary.tbcnn.accuracy_mean", 0.148, "TBCNN at the most frequent class's share"),
        ("summary.tbcnn-identifiers.accuracy_mean", 0.3, "identifiers no better than TBCNN"),
        ("summary.bow.accuracy_mean", 0.148, "the baseline at the most frequent class's share"),
        ("claims.tbcnn_minus_bow_points", 1.0, "TBCNN not above the baseline"),
        ("runs.0.eval.accuracy", 0.5, "a summary that is not its run's figure"),
        ("bench.train.examples", 3816, "a benchmark trained on one example fewer"),
    ]),
    "reproduce_tbcnn_masked_quick": ("tests/fixtures/claims/tbcnn_masked.json", [
        ("summary.flag.test.accuracy_mean", 0.527, "flag at the majority kind's share"),
        ("summary.localized.valid.accuracy_mean", 0.0, "localized at 0"),
        ("summary.flag-deep.test.count", 2841, "a model evaluated on one example fewer"),
    ]),
    "reproduce_tbcnn_masked_modules_quick": ("tests/fixtures/claims/tbcnn_masked_modules.json", [
        ("summary.localized.test.accuracy_mean", 0.507, "localized at the majority kind's share"),
        ("claims.localized_minus_flag_points", 2.0, "localized barely above flag"),
        ("claims.localized_minus_flag_points_valid", 50.0, "a claim that is not the summary's"),
    ]),
    "reproduce_tbcnn_masked_selected_quick": (
        "tests/fixtures/claims/tbcnn_masked_modules_selected.json", [
            ("summary.localized.valid.accuracy_mean", 0.5, "localized at the majority share"),
            ("claims.localized_minus_flag_points", 0.0, "localized not above flag"),
            ("runs.1.selected_step", 60, "a step that is not the earliest best"),
            ("runs.0.selected_step", 0, "a step never scored"),
        ]),
    "reproduce_memory_timeline_quick": ("results/memory_timeline.json", [
        ("rows.0.peak_bytes", "+1", "a peak one byte above the trace's"),
        ("rows.2.activation_peak_bytes", "-1", "an activation peak one byte below the trace's"),
        ("rows.1.live_bytes_by_tag_at_activation_peak.activation", "+8", "tags that do not sum"),
        ("rows.4.technique", "none", "a row of another technique"),
        ("rows.4.activation_peak_bytes", 0, "an activation peak of 0"),
    ]),
    "reproduce_dp_timeline_quick": ("results/dp_timeline.json", [
        ("bench.rows.2.buckets", "+1", "one bucket more than the trace's all-reduces"),
        ("bench.rows.1.buckets_sent_during_backward", 1, "after sending during backward"),
        ("bench.rows.2.bytes_per_step", "-4", "overlap exchanging other bytes than after"),
        ("bench.rows.0.bytes_per_step", 4, "no exchange that sends bytes"),
    ]),
    "reproduce_tbcnn_vectors_quick": ("results/tbcnn_vectors.json", [
        ("models.0.eval.accuracy", 0.148, "TBCNN at the most frequent class's share"),
        ("models.1.eval.accuracy", 0.0, "identifiers at 0"),
        ("models.0.examples.3.label", 99, "a label outside the classes"),
        ("models.1.examples.0.label", 1, "one class kept once more than another"),
        ("models.0.examples_in_split", "-1", "a split one example short of the evaluation's"),
        ("models.0.examples.2.vector", [0.5], "a vector of one value"),
    ]),
}
# Flipped labels for recognizer_check.py: each must fail on the recorded runs.
RECOGNIZER_FLIPS = [["--label", "total=map"], ["--label", "evens=fold"],
                    ["--label", "evens=map"]]


def reproduce_calls(cmake_text):
    """{test name: (checks, invariants kind or None)} of every engram_reproduce_test call."""
    calls = {}
    for body in re.findall(r"^engram_reproduce_test\((.*?)\)\s*$", cmake_text, re.S | re.M):
        words = re.findall(r'"[^"]*"|[^\s"]+', body)
        words = [w[1:-1] if w.startswith('"') else w for w in words]
        name, args = words[0], words[6:]
        kind = None
        if len(args) >= 2 and args[0] == "INVARIANTS":
            kind, args = args[1], args[2:]
        calls[name] = (args, kind)
    return calls


def spoil(data, path, value):
    """Sets the figure at dotted path (a list index may be negative); "+N"/"-N" add to it."""
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    key = int(last) if isinstance(node, list) else last
    old = node[key]
    if isinstance(value, str) and re.fullmatch(r"[+-]\d+", value):
        value = old + int(value)
    if old == value:
        raise SystemExit(f"spoiling {path}: {value!r} is its value already")
    node[key] = value
    return old


def short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def run_checks(src, checks, kind, path):
    """(passed, output) of check_json.py and check_invariants.py on path."""
    out = subprocess.run([sys.executable, os.path.join(src, "tests", "check_json.py"), path]
                         + checks, capture_output=True, text=True)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        return False, text
    if kind:
        out = subprocess.run([sys.executable, os.path.join(src, "tests", "check_invariants.py"),
                              kind, path], capture_output=True, text=True)
        text += out.stdout + out.stderr
        if out.returncode != 0:
            return False, text
    return True, text


def main():
    if len(sys.argv) != 2:
        print("usage: claims_fail_on_spoiled.py SOURCE_DIR", file=sys.stderr)
        return 2
    src = os.path.abspath(sys.argv[1])
    with open(os.path.join(src, "tests", "CMakeLists.txt")) as f:
        calls = reproduce_calls(f.read())
    problems = []
    work = tempfile.mkdtemp()
    try:
        for test, (relative, spoils) in SPOILS.items():
            if test not in calls:
                problems.append(f"{test}: no engram_reproduce_test call in tests/CMakeLists.txt")
                continue
            checks, kind = calls[test]
            source = os.path.join(src, relative)
            with open(source) as f:
                data = json.load(f)
            folder = os.path.join(work, test)
            os.makedirs(folder)
            traces = os.path.join(os.path.dirname(source), "traces")
            if kind in ("memory-timeline", "dp-timeline"):
                os.symlink(traces, os.path.join(folder, "traces"))
            path = os.path.join(folder, os.path.basename(relative))
            shutil.copy(source, path)
            passed, text = run_checks(src, checks, kind, path)
            if not passed:
                problems.append(f"{test}: its checks fail on the unspoiled {relative}, so the "
                                f"spoils below would show nothing: {text.strip()}")
                continue
            for figure, value, what in spoils:
                spoiled = copy.deepcopy(data)
                old = spoil(spoiled, figure, value)
                with open(path, "w") as f:
                    json.dump(spoiled, f)
                passed, text = run_checks(src, checks, kind, path)
                change = f"{figure} {short(old)} -> {short(value)}"
                if passed:
                    problems.append(f"{test}: passes with {change} ({what})")
                else:
                    print(f"{test}: fails as it should with {change} ({what}): "
                          f"{text.strip().splitlines()[-1]}")
        checker = os.path.join(src, "tests", "synth", "recognizer_check.py")
        observed = os.path.join(src, "tests", "fixtures", "recognizer_observed.jsonl")
        out = subprocess.run([sys.executable, checker, observed], capture_output=True, text=True)
        if out.returncode != 0:
            problems.append(f"recognizer_check.py fails on the recorded runs: {out.stderr}")
        for flip in RECOGNIZER_FLIPS:
            out = subprocess.run([sys.executable, checker, observed] + flip,
                                 capture_output=True, text=True)
            if out.returncode == 0:
                problems.append(f"recognizer_check.py passes with {' '.join(flip)}")
            else:
                print(f"recognizer.sh's check fails as it should with {' '.join(flip)}: "
                      f"{out.stderr.strip()}")
    finally:
        shutil.rmtree(work)
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
