"""The PyTorch peer of `bench memory --find-max-batch` (bench/peers/resnet_cap_peer.py) searches as
bench/BatchSearch.cpp does: the same batches tried, in the same order, for the same devices as
tests/bench/BatchSearchTest.cpp, with the trial replaced by "trains up to N". Runs on the CPU.
"""

import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "peers"))

import resnet_cap_peer  # noqa: E402


def search(fits, start, limit, precision, trials_allowed=None):
    """The peer's search on a device where batches up to `fits` train; with `trials_allowed`,
    the time limit runs out after that many trials. Returns (largest, figures, trials, tried)
    and, with trials_allowed, whether the search was cut."""
    tried = []
    clock = {"now": 0.0}

    def trial(_variant, batch, _args, _device):
        tried.append(batch)
        clock["now"] += 1.0  # a second a trial
        return {"batch": batch} if batch <= fits else None

    original_trial, original_monotonic = resnet_cap_peer.trial, resnet_cap_peer.time.monotonic
    resnet_cap_peer.trial = trial
    resnet_cap_peer.time.monotonic = lambda: clock["now"]
    try:
        deadline = trials_allowed - 0.5 if trials_allowed is not None else 0
        args = types.SimpleNamespace(start=start, limit=limit, precision=precision,
                                     deadline=deadline)
        largest, figures, trials, cut = resnet_cap_peer.search("none", args, None)
    finally:
        resnet_cap_peer.trial = original_trial
        resnet_cap_peer.time.monotonic = original_monotonic
    if trials_allowed is not None:
        return largest, figures, trials, tried, cut
    assert not cut
    return largest, figures, trials, tried


class CapPeerSearchTest(unittest.TestCase):
    def test_doubles_then_bisects_to_the_precision(self):
        largest, figures, trials, tried = search(700, 64, 4096, 0.125)
        self.assertEqual(tried, [64, 128, 256, 512, 1024, 768, 640, 704])
        self.assertEqual(largest, 640)
        self.assertEqual(figures, {"batch": 640})
        self.assertEqual([t["trained"] for t in trials],
                         [True, True, True, True, False, False, True, False])

    def test_precision_zero_finds_the_exact_batch(self):
        for fits in (1, 2, 37, 100, 255, 256, 257):
            self.assertEqual(search(fits, 8, 4096, 0)[0], fits)

    def test_halves_when_the_start_fails_and_reports_none_when_nothing_trains(self):
        largest, _, _, tried = search(5, 64, 4096, 0)
        self.assertEqual(largest, 5)
        self.assertEqual(tried[:5], [64, 32, 16, 8, 4])
        largest, figures, _, tried = search(0, 4, 4096, 0)
        self.assertEqual((largest, figures, tried), (0, None, [4, 2, 1]))

    def test_stops_at_the_limit_when_everything_trains(self):
        largest, _, _, tried = search(1 << 20, 100, 1000, 0.125)
        self.assertEqual(tried, [100, 200, 400, 800, 1000])
        self.assertEqual(largest, 1000)

    def test_a_time_limit_cuts_the_search_keeping_what_the_trials_showed(self):
        # BatchSearchTest.ATimeLimitCutsTheSearchKeepingWhatTheTrialsShowed, in the peer.
        largest, figures, trials, tried, cut = search(150, 64, 4096, 0.125, trials_allowed=3)
        self.assertEqual(tried, [64, 128, 256])
        self.assertTrue(cut)
        self.assertEqual((largest, figures), (128, {"batch": 128}))
        self.assertEqual([t["trained"] for t in trials], [True, True, False])
        largest, figures, trials, tried, cut = search(150, 64, 4096, 0.125, trials_allowed=0)
        self.assertEqual((largest, figures, trials, tried, cut), (0, None, [], [], True))
        largest, _, _, tried, cut = search(150, 64, 4096, 0.125, trials_allowed=100)
        self.assertEqual((largest, cut), (144, False))

    def test_errors_that_say_the_device_ran_out_of_memory_are_told_from_bugs(self):
        # tests/bench/BatchSearchTest.cpp's messages, classified as Engram's search does.
        for oom in ("GET was unable to find an engine to execute this computation",
                    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
                    "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
                    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
                    "CUDA error: out of memory"):
            self.assertTrue(resnet_cap_peer.says_out_of_memory(oom), oom)
        for bug in ("CUDA error: an illegal memory access was encountered",
                    "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED", ""):
            self.assertFalse(resnet_cap_peer.says_out_of_memory(bug), bug)


if __name__ == "__main__":
    unittest.main()
