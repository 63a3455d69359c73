#!/usr/bin/env python3
"""gpu_tests.py --out FILE.json --commit COMMIT [--build-exit N] [--command CMD]... SUITE=XML...:
the outcome of the tests that need a GPU, as a results file (standard library only).

scripts/gpu-check.sh runs them on the device and calls this with each run's XML report: the
CUDA kernels' and cuDNN's test executables write GoogleTest's (`--gtest_output=xml:FILE`), the
device tests under ctest write ctest's JUnit report (`--output-junit FILE`). SUITE names each
report in the results (test-cuda, test-cudnn, test-device). For every test: its status (passed,
failed, skipped, or not_run: ctest could not start it, or a DISABLED_ test), its seconds, the
lines it printed itself between GoogleTest's `[ RUN ]` and its verdict (the largest differences
its checks measured, a skip's reason, a failure's assertion; where it never reached `[ RUN ]`,
its output's last lines), at most LINES of LINE_CHARS each, and ctest's reason where it gives
one (SEGFAULT, Timeout, a skip's rule); GoogleTest's reports, which hold no output, give a
failure's message instead. A report that is missing or unreadable is listed under `missing` with
the reason: a stage cut short writes none. --build-exit records the exit status of the build of
the test executables (not 0: some may be an earlier build's, or missing).

The machine is collect.py's machine(), the GPU as nvidia-smi names it. It refuses (exit 1, the
results file left as it was) where no report could be read or nvidia-smi names no GPU, and
writes FILE atomically. Exit 2 on a usage error.
"""
import argparse
import datetime
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

from collect import machine

LINES = 40
LINE_CHARS = 300
RAW_LINES = 20  # of a test's output where GoogleTest never started it (a crash at load)
# GoogleTest's framing around a test's own output.
FRAMING = ("[==========]", "[----------]", "[ RUN      ]", "[       OK ]", "[  FAILED  ]",
           "[  SKIPPED ]", "[  PASSED  ]", "Running main() from", "Note: Google Test filter")
STATUSES = ("passed", "failed", "skipped", "not_run")


def bounded(lines):
    """(at most LINES of LINE_CHARS each, how many lines were left out)."""
    lines = [line[:LINE_CHARS] for line in lines if line.strip()]
    return lines[:LINES], max(0, len(lines) - LINES)


def own_lines(text):
    """The lines a test printed itself: those after `[ RUN ]`, before its verdict; where no
    `[ RUN ]` line came (the executable failed before GoogleTest ran the test), the output's
    last RAW_LINES lines, which hold why."""
    lines = []
    inside = started = False
    raw = (text or "").splitlines()
    for line in raw:
        if line.startswith("[ RUN      ]"):
            inside = started = True
            continue
        if line.startswith(("[       OK ]", "[  FAILED  ]", "[  SKIPPED ]")):
            inside = False
            continue
        if inside and not line.startswith(FRAMING):
            lines.append(line)
    return lines if started else raw[-RAW_LINES:]


def case_entry(name, status, seconds, lines, reason=""):
    output, cut = bounded(lines)
    entry = {"name": name, "status": status, "seconds": round(float(seconds or 0), 3),
             "output": output}
    if cut:
        entry["output_lines_left_out"] = cut
    if reason:
        entry["reason"] = reason[:LINE_CHARS]
    return entry


def ctest_cases(root):
    """Test cases of ctest's JUnit report (root <testsuite>). ctest marks `notrun` both a test
    that skipped (SKIP_REGULAR_EXPRESSION or SKIP_RETURN_CODE: no GPU) and one it could not
    start (its executable missing, a fixture failed): only the first is `skipped`."""
    for case in root.iter("testcase"):
        out = case.find("system-out")
        failure = case.find("failure")
        skipped = case.find("skipped")
        kind = case.get("status", "")
        reason = ""
        if kind == "run":
            status = "passed"
        elif kind == "fail":
            status = "failed"
            if failure is not None:  # ctest's type says how: Failed, SEGFAULT, Timeout...
                reason = " ".join(x for x in (failure.get("type"), failure.get("message")) if x)
        else:
            reason = skipped.get("message", "") if skipped is not None else kind
            status = "skipped" if reason.startswith(("SKIP_REGULAR_EXPRESSION",
                                                     "SKIP_RETURN_CODE")) else "not_run"
        yield case_entry(case.get("name", ""), status, case.get("time"),
                         own_lines(out.text if out is not None else ""), reason)


def gtest_cases(root):
    """Test cases of GoogleTest's XML report (root <testsuites>); a DISABLED_ test is `not_run`."""
    for case in root.iter("testcase"):
        failures = [f.get("message", "") for f in case.findall("failure")]
        skipped = case.find("skipped")
        if failures:
            status = "failed"
        elif case.get("status") == "notrun" or case.get("result") == "suppressed":
            status = "not_run"
        elif case.get("result") == "skipped" or skipped is not None:
            status = "skipped"
        else:
            status = "passed"
        lines = [line for message in failures for line in message.splitlines()]
        if skipped is not None:
            lines.extend((skipped.get("message") or "").splitlines())
        yield case_entry(f"{case.get('classname', '')}.{case.get('name', '')}", status,
                         case.get("time"), lines)


def read_report(path):
    """The test cases of one XML report, or raises OSError/ValueError saying why not."""
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as e:
        raise ValueError(f"not an XML report ({e})") from None
    if root.tag == "testsuites":
        return list(gtest_cases(root))
    if root.tag == "testsuite":
        return list(ctest_cases(root))
    raise ValueError(f"root element <{root.tag}> is neither GoogleTest's nor ctest's")


def read_reports(reports):
    """(suites, tests, missing) from [(suite, path)]."""
    suites, tests, missing = [], [], []
    for suite, path in reports:
        try:
            cases = read_report(path)
        except (OSError, ValueError) as e:
            missing.append({"suite": suite, "report": os.path.basename(path),
                            "reason": str(e).splitlines()[0]})
            continue
        counts = {s: sum(1 for c in cases if c["status"] == s) for s in STATUSES}
        suites.append({"name": suite, "report": os.path.basename(path), "tests": len(cases),
                       **counts})
        tests.extend({"suite": suite, **case} for case in cases)
    return suites, tests, missing


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--build-exit", type=int)
    parser.add_argument("--command", action="append", default=[])
    parser.add_argument("reports", nargs="+", metavar="SUITE=XML")
    args = parser.parse_args(argv)
    reports = []
    for item in args.reports:
        suite, sep, path = item.partition("=")
        if not sep or not suite or not path:
            parser.error(f"'{item}' is not SUITE=XML")
        reports.append((suite, path))
    found = machine()
    if not found.get("gpu"):
        print("gpu_tests: no GPU named (nvidia-smi names none): these results would not say "
              f"where they ran; {args.out} left as it was", file=sys.stderr)
        return 1
    suites, tests, missing = read_reports(reports)
    if not suites:
        print("gpu_tests: no report could be read (" +
              "; ".join(f"{m['suite']}: {m['reason']}" for m in missing) +
              f"); {args.out} left as it was", file=sys.stderr)
        return 1
    result = {
        "claim": "the tests that need a GPU, run on it by scripts/gpu-check.sh: each one's "
                 "status and what it printed (its largest differences, a skip's reason)",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": args.commit,
        "machine": found,
        "summary": {s: sum(x[s] for x in suites) for s in ("tests",) + STATUSES},
        "build_exit": args.build_exit,
        "suites": suites,
        "missing": missing,
        "tests": tests,
        "reproduce": {"script": "scripts/gpu-check.sh", "commit": args.commit,
                      "commands": args.command},
    }
    with open(args.out + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)
    print(f"gpu_tests: {result['summary']} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
