"""The PyTorch peer of `bench memory --find-max-batch` (bench/peers/resnet_cap_peer.py) searches as
bench/BatchSearch.cpp does: the same batches tried, in the same order, for the same devices as
tests/bench/BatchSearchTest.cpp, with the trial replaced by "trains up to N". Runs on the CPU.
"""

import os
import random
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "peers"))

import resnet_cap_peer  # noqa: E402


def search(fits, start, limit, precision, trials_allowed=None, cap_bytes=0, held=None, prior=0):
    """The peer's search on a device where batches up to `fits` train; with `trials_allowed`,
    the time limit runs out after that many trials; with cap_bytes and held = (fixed,
    per_example), the allocator reserves fixed + per_example * batch (as BatchSearchTest's
    MemoryDevice). Returns (largest, figures, trials, tried) and, with trials_allowed, whether
    the search was cut."""
    tried = []
    clock = {"now": 0.0}

    def trial(_variant, batch, _args, _device):
        tried.append(batch)
        clock["now"] += 1.0  # a second a trial
        if batch > fits:
            return None
        if held is None:
            return {"batch": batch}
        return {"batch": batch, "reserved_peak_bytes": held[0] + held[1] * batch}

    original_trial, original_monotonic = resnet_cap_peer.trial, resnet_cap_peer.time.monotonic
    resnet_cap_peer.trial = trial
    resnet_cap_peer.time.monotonic = lambda: clock["now"]
    try:
        deadline = trials_allowed - 0.5 if trials_allowed is not None else 0
        args = types.SimpleNamespace(start=start, limit=limit, precision=precision,
                                     deadline=deadline, cap_bytes=cap_bytes,
                                     prior_bytes_per_example=prior)
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

    def test_aimed_at_the_cap_the_search_takes_four_trials_where_memory_is_a_straight_line(self):
        # BatchSearchTest.AimedAtTheCapTheSearchTakesFourTrialsWhereMemoryIsAStraightLine.
        largest, figures, trials, tried = search(700, 64, 4096, 0.125, cap_bytes=8000,
                                                 held=(1000, 10))
        self.assertEqual(tried, [64, 128, 700, 787])
        self.assertEqual(largest, 700)
        self.assertEqual(figures["reserved_peak_bytes"], 8000)
        self.assertEqual([t["aimed"] for t in trials], [False, False, True, False])
        self.assertEqual([t["held_bytes"] for t in trials], [1640, 2280, 8000, 0])
        self.assertEqual(len(search(700, 64, 4096, 0.125, held=(1000, 10))[3]), 8)

    def test_a_line_that_falls_short_of_what_trains_gives_way_to_doubling(self):
        largest, _, _, tried = search(700, 64, 4096, 0.125, cap_bytes=8000, held=(1000, 20))
        self.assertEqual(tried, [64, 128, 350, 393, 786, 589, 687, 736])
        self.assertEqual(largest, 687)

    def test_a_line_that_overshoots_is_bisected_back(self):
        largest, _, _, tried = search(700, 64, 4096, 0.125, cap_bytes=8000, held=(1000, 5))
        self.assertEqual(tried, [64, 128, 1400, 764, 446, 605, 684])
        self.assertEqual(largest, 684)
        self.assertEqual(search(700, 64, 1000, 0.125, cap_bytes=8000, held=(1000, 5))[3][2],
                         1000)

    def test_a_prior_slope_aims_from_the_first_batch_where_doubling_would_overshoot(self):
        # BatchSearchTest.APriorSlopeAimsFromTheFirstBatchWhereDoublingWouldOvershoot.
        largest, _, _, tried = search(700, 600, 4096, 0.125, cap_bytes=8000, held=(1000, 10))
        self.assertEqual((largest, tried), (675, [600, 1200, 900, 750, 675]))
        largest, _, trials, tried = search(700, 600, 4096, 0.125, cap_bytes=8000,
                                           held=(1000, 10), prior=10)
        self.assertEqual((largest, tried), (700, [600, 700, 787]))
        self.assertTrue(trials[1]["aimed"])
        largest, _, _, tried = search(700, 600, 4096, 0.125, cap_bytes=8000, held=(1000, 10),
                                      prior=5)
        self.assertEqual((largest, tried), (700, [600, 800, 700, 750]))
        largest, _, _, tried = search(700, 128, 4096, 0.125, cap_bytes=8000, held=(1000, 10),
                                      prior=20)
        self.assertEqual((largest, tried), (700, [128, 414, 700, 787]))

    def test_without_what_trials_held_an_aimed_search_doubles(self):
        _, _, trials, tried = search(700, 64, 4096, 0.125, cap_bytes=8000)
        self.assertEqual(tried, [64, 128, 256, 512, 1024, 768, 640, 704])
        self.assertFalse(any(t["aimed"] for t in trials))

    def test_the_batch_at_the_cap_is_on_the_line_through_the_two_largest_that_trained(self):
        def t(batch, trained, held_bytes):
            return {"batch": batch, "trained": trained, "held_bytes": held_bytes}
        at_cap = resnet_cap_peer.batch_at_cap
        self.assertEqual(at_cap([], 8000), 0)
        self.assertEqual(at_cap([t(64, True, 1640)], 8000), 0)
        self.assertEqual(at_cap([t(64, True, 1640), t(128, True, 2280)], 8000), 700)
        self.assertEqual(at_cap([t(128, True, 2280), t(16, True, 9999), t(1024, False, 0),
                                 t(512, True, 0), t(64, True, 1640)], 8000), 700)
        self.assertEqual(at_cap([t(64, True, 2000), t(128, True, 2000)], 8000), 0)
        self.assertEqual(at_cap([t(64, True, 3000), t(128, True, 2000)], 8000), 0)
        self.assertEqual(at_cap([t(64, True, 7000), t(128, True, 9000)], 8000), 96)
        self.assertEqual(at_cap([t(1, True, 9000), t(2, True, 10000)], 8000), 0)
        self.assertEqual(at_cap([t(600, True, 7000)], 8000, 10), 700)
        self.assertEqual(at_cap([t(600, True, 7000), t(32, False, 0)], 8000, 0), 0)
        self.assertEqual(at_cap([t(64, True, 1640), t(128, True, 2280)], 8000, 1), 700)
        per = resnet_cap_peer.bytes_per_example
        self.assertEqual(per([t(64, True, 1640), t(128, True, 2280)]), 10.0)
        self.assertEqual(per([t(64, True, 1640)]), 0)
        self.assertEqual(per([t(64, True, 3000), t(128, True, 2280)]), 0)

    def test_the_cap_limits_the_allocator_to_the_byte_as_for_engrams_rows(self):
        h200 = 150754820096
        fraction = resnet_cap_peer.allocator_fraction
        self.assertEqual(int(9 * 2**30 / h200 * h200), 9 * 2**30 - 1)  # the plain quotient's
        self.assertEqual(int(fraction(9 * 2**30, h200) * h200), 9 * 2**30)
        self.assertEqual(fraction(h200, h200), 1.0)
        generator = random.Random(7)
        for total in (h200, 80 * 2**30, 24 * 2**30):
            for _ in range(20000):
                cap = generator.randrange(1, total)
                self.assertLessEqual(fraction(cap, total), 1.0)
                self.assertEqual(int(fraction(cap, total) * total), cap, (cap, total))

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
