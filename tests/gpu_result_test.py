"""scripts/reproduce/gpu_result.py: a GPU benchmark's partial report becomes its results file,
naming the script, commit, command and the machine with the GPU nvidia-smi names; a report that
says "skipped", or a machine where nvidia-smi names no GPU, leaves the results file as it was.
Runs on the CPU, with a stand-in nvidia-smi first on the PATH (or none at all)."""

import json
import os
import tempfile
import unittest

from stand_in_gpu import GPU, run_script

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "reproduce",
                      "gpu_result.py")
REPORT = {"benchmark": "relu_compression_cuda", "device": "NVIDIA H200", "skipped": False,
          "results": [{"elements": 8, "compress_gb_per_s": 1.5}]}


def run(*args, gpu=GPU):
    """The script under test, as on a GPU machine naming `gpu` (None: none named)."""
    return run_script(SCRIPT, *args, gpu=gpu)


class GpuResultTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.out = os.path.join(self.dir.name, "gpu_relu_cuda.json")
        self.command = f"engram_relu_cuda_bench --json {self.out}.partial --repeats 20"

    def finish(self, report, gpu=GPU):
        with open(self.out + ".partial", "w") as f:
            json.dump(report, f)
        return run(self.out, "0123456789ab", "scripts/reproduce/relu_cuda.sh", self.command,
                   gpu=gpu)

    def test_names_how_it_was_made_and_the_gpu(self):
        done = self.finish(REPORT)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(self.out) as f:
            result = json.load(f)
        self.assertEqual(result["results"], REPORT["results"])
        made = result["reproduce"]
        self.assertEqual(made["script"], "scripts/reproduce/relu_cuda.sh")
        self.assertEqual(made["commit"], "0123456789ab")
        self.assertEqual(made["commands"],
                         ["engram_relu_cuda_bench --json gpu_relu_cuda.json --repeats 20"])
        self.assertEqual(made["machine"]["gpu"], GPU)
        self.assertIn("cores", made["machine"])
        self.assertEqual(sorted(os.listdir(self.dir.name)), ["gpu_relu_cuda.json"])

    def test_skipped_report_leaves_the_results_file(self):
        with open(self.out, "w") as f:
            f.write('{"earlier": true}\n')
        done = self.finish({"skipped": True, "reason": "no CUDA device"})
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no CUDA device", done.stderr)
        with open(self.out) as f:
            self.assertEqual(json.load(f), {"earlier": True})
        self.assertFalse(os.path.exists(self.out + ".partial"))

    def test_wrong_arguments_are_a_usage_error(self):
        done = run(self.out, "0123456789ab", "scripts/reproduce/relu_cuda.sh")
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr.strip(), "usage: gpu_result.py OUT COMMIT SCRIPT COMMAND")
        self.assertEqual(os.listdir(self.dir.name), [])

    def test_no_gpu_named_writes_nothing(self):
        done = self.finish(REPORT, gpu=None)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("names no GPU", done.stderr)
        self.assertEqual(os.listdir(self.dir.name), [])


if __name__ == "__main__":
    unittest.main()
