"""scripts/gpu-check.sh's device-test stage runs, before the rest of the build, the tests its name
pattern picks: each must live in an executable its build-device stage builds, or ctest on the GPU
machine counts it as not run. Checked here against this build's tests, with no GPU: every test
the pattern picks (less the exclusions) and the executable that holds it, and every target named
exists. Then the check itself is shown to fail when an executable is left out.

    python3 gpu_check_targets.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys


def script_facts(script_text):
    """(device pattern, exclusion pattern, build-device targets) as gpu-check.sh names them."""
    device = re.search(r"^device_tests='([^']*)'", script_text, re.M)
    excluded = re.search(r"^not_device_tests='([^']*)'", script_text, re.M)
    build = re.search(r"^stage build-device \d+ ninja -C \"\$bin\" -j \"\$jobs\"((?:.*\\\n)*.*)$",
                      script_text, re.M)
    if not (device and excluded and build):
        raise SystemExit("gpu-check.sh: device_tests, not_device_tests or the build-device stage "
                         "not found where this check reads them")
    targets = build.group(1).replace("\\\n", " ").split()
    return device.group(1), excluded.group(1), targets


def device_tests(build_dir, pattern, excluded):
    """{test name: executable file name} for the tests the device-test stage runs."""
    listing = subprocess.run(
        ["ctest", "--test-dir", build_dir, "-N", "-R", pattern, "-E", excluded,
         "--show-only=json-v1"], check=True, capture_output=True, text=True).stdout
    return {t["name"]: os.path.basename(t["command"][0])
            for t in json.loads(listing)["tests"] if t.get("command")}


def unbuilt(tests, targets):
    """The tests whose executable is not among the targets, sorted."""
    return sorted(f"{name} (in {exe})" for name, exe in tests.items() if exe not in targets)


def main():
    source_dir, build_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(source_dir, "scripts", "gpu-check.sh")) as f:
        pattern, excluded, targets = script_facts(f.read())
    tests = device_tests(build_dir, pattern, excluded)
    if len(tests) < 10:
        raise SystemExit(f"the device-test pattern picks {len(tests)} tests; expected the GPU "
                         "tests of every module")
    known = subprocess.run(["ninja", "-C", build_dir, "-t", "targets", "all"], check=True,
                           capture_output=True, text=True).stdout
    names = {line.split(":")[0].rsplit("/", 1)[-1] for line in known.splitlines()}
    missing = [t for t in targets if t not in names]
    if missing:
        raise SystemExit(f"gpu-check.sh's build-device stage names no such target: {missing}")
    left_out = unbuilt(tests, set(targets))
    if left_out:
        raise SystemExit("gpu-check.sh's device-test stage runs tests whose executables "
                         "build-device does not build: " + ", ".join(left_out))
    # The check fails where it should: without the executable of one of the tests.
    one = sorted(tests.values())[0]
    if not unbuilt(tests, set(targets) - {one}):
        raise SystemExit(f"leaving {one} out of the targets went unnoticed")
    print(f"{len(tests)} device tests in {len(set(tests.values()))} executables, all built by "
          f"build-device ({len(targets)} targets)")


if __name__ == "__main__":
    main()
