#!/usr/bin/env python3
"""gpu_tests.py --out FILE.json --commit COMMIT --gpu GPU [--command CMD]... SUITE=XML...:
the outcome of the tests that need a GPU, as a results file (standard library only).

scripts/gpu-check.sh runs them on the device and calls this with each run's XML report: the
CUDA kernels' and cuDNN's test executables write GoogleTest's (`--gtest_output=xml:FILE`), the
device tests under ctest write ctest's JUnit report (`--output-junit FILE`). SUITE names each
report in the results (test-cuda, test-cudnn, test-device). For every test: its status (passed,
failed or skipped), its seconds, and the lines it printed itself between GoogleTest's
`[ RUN ]` and its verdict (the largest differences its checks measured, a skip's reason, a
failure's assertion), at most LINES of LINE_CHARS each; GoogleTest's reports, which hold no
output, give a failure's message instead. A report that is missing or unreadable is listed
under `missing` with the reason: a stage cut short writes none.

It refuses (exit 1, the results file left as it was) where no report could be read or the GPU
is not named, and writes FILE atomically. Exit 2 on a usage error.
"""
import argparse
import datetime
import json
import os
import platform
import sys
import xml.etree.ElementTree as ElementTree

LINES = 40
LINE_CHARS = 300
# GoogleTest's framing around a test's own output.
FRAMING = ("[==========]", "[----------]", "[ RUN      ]", "[       OK ]", "[  FAILED  ]",
           "[  SKIPPED ]", "[  PASSED  ]", "Running main() from", "Note: Google Test filter")


def own_lines(text):
    """The lines a test printed itself: those after `[ RUN ]`, before its verdict."""
    lines = []
    inside = False
    for line in (text or "").splitlines():
        if line.startswith("[ RUN      ]"):
            inside = True
            continue
        if line.startswith(("[       OK ]", "[  FAILED  ]", "[  SKIPPED ]")):
            inside = False
            continue
        if inside and line.strip() and not line.startswith(FRAMING):
            lines.append(line[:LINE_CHARS])
    return lines[:LINES]


def ctest_cases(root):
    """Test cases of ctest's JUnit report (root <testsuite>)."""
    status = {"run": "passed", "fail": "failed", "notrun": "skipped", "disabled": "skipped"}
    for case in root.iter("testcase"):
        out = case.find("system-out")
        yield {"name": case.get("name", ""),
               "status": status.get(case.get("status", ""), case.get("status", "unknown")),
               "seconds": round(float(case.get("time") or 0), 3),
               "output": own_lines(out.text if out is not None else "")}


def gtest_cases(root):
    """Test cases of GoogleTest's XML report (root <testsuites>)."""
    for case in root.iter("testcase"):
        failures = [f.get("message", "") for f in case.findall("failure")]
        if failures:
            status = "failed"
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            status = "skipped"
        else:
            status = "passed"
        output = []
        for message in failures:
            output.extend(line[:LINE_CHARS] for line in message.splitlines() if line.strip())
        skipped = case.find("skipped")
        if skipped is not None:
            output.extend(line[:LINE_CHARS] for line in (skipped.get("message") or "").splitlines()
                          if line.strip())
        yield {"name": f"{case.get('classname', '')}.{case.get('name', '')}",
               "status": status, "seconds": round(float(case.get("time") or 0), 3),
               "output": output[:LINES]}


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


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def collect(reports):
    """(suites, tests, missing) from [(suite, path)]."""
    suites, tests, missing = [], [], []
    for suite, path in reports:
        try:
            cases = read_report(path)
        except (OSError, ValueError) as e:
            missing.append({"suite": suite, "report": os.path.basename(path),
                            "reason": str(e).splitlines()[0]})
            continue
        counts = {s: sum(1 for c in cases if c["status"] == s)
                  for s in ("passed", "failed", "skipped")}
        suites.append({"name": suite, "report": os.path.basename(path), "tests": len(cases),
                       **counts})
        tests.extend({"suite": suite, **case} for case in cases)
    return suites, tests, missing


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--command", action="append", default=[])
    parser.add_argument("reports", nargs="+", metavar="SUITE=XML")
    args = parser.parse_args(argv)
    reports = []
    for item in args.reports:
        suite, sep, path = item.partition("=")
        if not sep or not suite or not path:
            parser.error(f"'{item}' is not SUITE=XML")
        reports.append((suite, path))
    if not args.gpu.strip():
        print("gpu_tests: no GPU named (--gpu): these results would not say where they ran; "
              f"{args.out} left as it was", file=sys.stderr)
        return 1
    suites, tests, missing = collect(reports)
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
        "machine": {"gpu": args.gpu.strip(), "cpu": cpu_name(), "cores": os.cpu_count(),
                    "system": platform.platform()},
        "summary": {s: sum(x[s] for x in suites) for s in ("tests", "passed", "failed",
                                                            "skipped")},
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
