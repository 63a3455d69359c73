"""scripts/reproduce/gpu_tests.py: the GPU tests' XML reports (ctest's JUnit report of the device
tests, GoogleTest's of the CUDA kernels' and cuDNN's executables) become one results file with
each test's status and the lines it printed; a report missing is named, and a run with no report
or no GPU named writes nothing. Runs on the CPU: the reports are the formats ctest 3.25 and
GoogleTest write (the second, where a test executable is given, written by it here)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from stand_in_gpu import GPU, run_script

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "reproduce",
                      "gpu_tests.py")
# A test executable whose tests need a GPU (they skip here): its own GoogleTest report.
GTEST_BINARY = sys.argv[1] if len(sys.argv) > 1 else ""

CTEST_REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="5" failures="3" disabled="0" skipped="1" hostname="" time="4">
  <testcase name="LstmDeviceTest.OnACudaDeviceTheModuleMatchesTheCpuKernel"
            classname="LstmDeviceTest.OnACudaDeviceTheModuleMatchesTheCpuKernel" time="0.53"
            status="run">
    <system-out>Running main() from ./googletest/src/gtest_main.cc
Note: Google Test filter = LstmDeviceTest.OnACudaDeviceTheModuleMatchesTheCpuKernel
[==========] Running 1 test from 1 test suite.
[----------] 1 test from LstmDeviceTest
[ RUN      ] LstmDeviceTest.OnACudaDeviceTheModuleMatchesTheCpuKernel
[ CUDA vs CPU kernel ] largest absolute difference 2.38e-07 (tolerance 1e-05)
[       OK ] LstmDeviceTest.OnACudaDeviceTheModuleMatchesTheCpuKernel (21 ms)
[----------] 1 test from LstmDeviceTest (23 ms total)
[==========] 1 test from 1 test suite ran. (23 ms total)
[  PASSED  ] 1 test.
</system-out>
  </testcase>
  <testcase name="MemoryTechniquesDeviceTest.SwapOnCudaIsBitIdentical"
            classname="MemoryTechniquesDeviceTest.SwapOnCudaIsBitIdentical" time="2.5"
            status="fail">
    <failure message="Failed"/>
    <system-out>[ RUN      ] MemoryTechniquesDeviceTest.SwapOnCudaIsBitIdentical
../tests/memory/DeviceTest.cpp:88: Failure
Expected equality of these values:
  max_abs_grad_diff
    Which is: 1.2e-07
[  FAILED  ] MemoryTechniquesDeviceTest.SwapOnCudaIsBitIdentical (2500 ms)
</system-out>
  </testcase>
  <testcase name="TrainerDeviceTest.ResNetOnCuda" classname="TrainerDeviceTest.ResNetOnCuda"
            time="0.01" status="notrun">
    <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
    <system-out>[ RUN      ] TrainerDeviceTest.ResNetOnCuda
../tests/trainer/DeviceTest.cpp:41: Skipped
no CUDA device: torch::cuda::is_available() is false
[  SKIPPED ] TrainerDeviceTest.ResNetOnCuda (0 ms)
</system-out>
  </testcase>
  <testcase name="NpiDeviceTest.TrainsOnCuda" classname="NpiDeviceTest.TrainsOnCuda" time="0.4"
            status="fail">
    <failure type="SEGFAULT" message="Exception: SegFault"/>
    <system-out>./engram_tests_npi: error while loading shared libraries: libtorch_cuda.so
</system-out>
  </testcase>
  <testcase name="ResnetDeviceTest.OnCuda" classname="ResnetDeviceTest.OnCuda" time="0"
            status="notrun">
    <skipped message="Unable to find executable"/>
    <system-out>Unable to find executable: /b/tests/resnet/engram_tests_resnet</system-out>
  </testcase>
</testsuite>
"""

GTEST_REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1" disabled="1" errors="0" time="0.2" name="AllTests">
  <testsuite name="CudnnConvDevice" tests="3" failures="1" disabled="1" skipped="0" errors="0">
    <testcase name="EveryAlgorithmMatchesDirect" status="run" result="completed" time="0.15"
              classname="CudnnConvDevice"/>
    <testcase name="DISABLED_Slow" status="notrun" result="suppressed" time="0"
              classname="CudnnConvDevice"/>
    <testcase name="WorkspaceWithinBudget" status="run" result="completed" time="0.05"
              classname="CudnnConvDevice">
      <failure message="../tests/nn/CudnnConvTest.cpp:120&#x0A;Expected: workspace &lt;= budget"
               type=""><![CDATA[../tests/nn/CudnnConvTest.cpp:120
Expected: workspace <= budget]]></failure>
    </testcase>
  </testsuite>
</testsuites>
"""


def run(*args, gpu=GPU):
    """The script under test, as on a GPU machine naming `gpu` (None: none named)."""
    return run_script(SCRIPT, *args, gpu=gpu)


class GpuTestsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name, text=None):
        path = os.path.join(self.dir.name, name)
        if text is not None:
            with open(path, "w") as f:
                f.write(text)
        return path

    def test_each_test_gets_its_status_and_the_lines_it_printed(self):
        out = self.path("gpu_tests.json")
        result = run("--out", out, "--commit", "abc123", "--build-exit", "1",
                     "--command", "bash scripts/gpu-check.sh",
                     "test-device=" + self.path("device.xml", CTEST_REPORT),
                     "test-cudnn=" + self.path("cudnn.xml", GTEST_REPORT),
                     "test-cuda=" + self.path("absent.xml"))
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(out) as f:
            data = json.load(f)
        self.assertEqual(data["commit"], "abc123")
        self.assertEqual(data["machine"]["gpu"], GPU)
        self.assertEqual(data["reproduce"]["script"], "scripts/gpu-check.sh")
        self.assertEqual(data["build_exit"], 1)
        self.assertEqual(data["summary"],
                         {"tests": 8, "passed": 2, "failed": 3, "skipped": 1, "not_run": 2})
        tests = {t["name"]: t for t in data["tests"]}
        lstm = tests["LstmDeviceTest.OnACudaDeviceTheModuleMatchesTheCpuKernel"]
        self.assertEqual((lstm["suite"], lstm["status"], lstm["seconds"]),
                         ("test-device", "passed", 0.53))
        # Its own line, none of GoogleTest's framing.
        self.assertEqual(lstm["output"], [
            "[ CUDA vs CPU kernel ] largest absolute difference 2.38e-07 (tolerance 1e-05)"])
        swap = tests["MemoryTechniquesDeviceTest.SwapOnCudaIsBitIdentical"]
        self.assertEqual(swap["status"], "failed")
        self.assertIn("    Which is: 1.2e-07", swap["output"])
        skipped = tests["TrainerDeviceTest.ResNetOnCuda"]
        self.assertEqual(skipped["status"], "skipped")
        self.assertIn("no CUDA device: torch::cuda::is_available() is false", skipped["output"])
        self.assertEqual(skipped["reason"], "SKIP_REGULAR_EXPRESSION_MATCHED")
        # A crash before GoogleTest ran the test: ctest's reason and the output's last lines.
        crashed = tests["NpiDeviceTest.TrainsOnCuda"]
        self.assertEqual((crashed["status"], crashed["reason"]),
                         ("failed", "SEGFAULT Exception: SegFault"))
        self.assertIn("libtorch_cuda.so", crashed["output"][0])
        # ctest could not start it: not a skip for want of a GPU.
        missing = tests["ResnetDeviceTest.OnCuda"]
        self.assertEqual((missing["status"], missing["reason"]),
                         ("not_run", "Unable to find executable"))
        self.assertEqual(tests["CudnnConvDevice.DISABLED_Slow"]["status"], "not_run")
        self.assertEqual(tests["CudnnConvDevice.EveryAlgorithmMatchesDirect"]["status"], "passed")
        workspace = tests["CudnnConvDevice.WorkspaceWithinBudget"]
        self.assertEqual(workspace["status"], "failed")
        self.assertIn("Expected: workspace <= budget", workspace["output"])
        self.assertEqual([m["suite"] for m in data["missing"]], ["test-cuda"])
        self.assertEqual([s["name"] for s in data["suites"]], ["test-device", "test-cudnn"])

    def test_long_output_is_bounded(self):
        lines = "\n".join(f"line {i} " + "x" * 1000 for i in range(100))
        report = CTEST_REPORT.replace(
            "[ CUDA vs CPU kernel ] largest absolute difference 2.38e-07 (tolerance 1e-05)", lines)
        out = self.path("gpu_tests.json")
        result = run("--out", out, "--commit", "c",
                     "test-device=" + self.path("device.xml", report))
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(out) as f:
            first = json.load(f)["tests"][0]
        self.assertEqual(len(first["output"]), 40)
        self.assertEqual(max(len(line) for line in first["output"]), 300)
        self.assertEqual(first["output_lines_left_out"], 60)

    def test_no_readable_report_or_no_gpu_writes_nothing(self):
        out = self.path("gpu_tests.json", "previous\n")
        broken = self.path("broken.xml", "<testsuite><testcase")
        result = run("--out", out, "--commit", "c", "test-device=" + broken,
                     "test-cuda=" + self.path("absent.xml"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("no report could be read", result.stderr)
        self.assertIn("test-device: not an XML report", result.stderr)
        result = run("--out", out, "--commit", "c",
                     "test-device=" + self.path("device.xml", CTEST_REPORT), gpu=None)
        self.assertEqual(result.returncode, 1)
        self.assertIn("no GPU named", result.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "previous\n")
        self.assertFalse(os.path.exists(out + ".tmp"))

    def test_a_report_not_named_by_suite_is_a_usage_error(self):
        result = run("--out", self.path("o.json"), "--commit", "c", "device.xml")
        self.assertEqual(result.returncode, 2)
        self.assertIn("is not SUITE=XML", result.stderr)

    @unittest.skipUnless(GTEST_BINARY, "no test executable given")
    def test_googletests_own_report_of_a_skipped_test(self):
        report = self.path("cuda.xml")
        subprocess.run([GTEST_BINARY, f"--gtest_output=xml:{report}"], capture_output=True,
                       check=False)
        out = self.path("gpu_tests.json")
        result = run("--out", out, "--commit", "c", "test-cuda=" + report)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(out) as f:
            data = json.load(f)
        self.assertGreater(data["summary"]["tests"], 0)
        # Without a GPU each of its tests skips and says why; with one, each passes.
        gpu = os.path.exists("/dev/nvidiactl")
        for test in data["tests"]:
            self.assertEqual(test["status"], "passed" if gpu else "skipped", test)
            if not gpu:  # the reason on a line of its own, after the file and line
                self.assertTrue(any("CUDA" in line and "\n" not in line
                                    for line in test["output"]), test)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
