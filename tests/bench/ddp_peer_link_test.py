"""The DDP peer's link emulation (bench/peers/ddp_peer.py), checked on the CPU against Engram's
parallel::LinkQueue: collectives enter the link in launch order, each once its data is ready, and
a collective's end settles the ones launched before it first.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "peers"))

import ddp_peer  # noqa: E402


class DdpPeerLinkTest(unittest.TestCase):
    def test_a_collective_enters_the_link_when_ready_behind_the_earlier_ones(self):
        link = ddp_peer.Link(2)
        link.bandwidth = 1e6
        settled = []

        def ready_at(name, t):
            def start():
                settled.append(name)
                return t
            return start

        # a's data is ready 1 s after its launch (a device behind the host); b, launched from
        # host memory 0.1 s later, still waits for a to leave the link.
        a = link.push(0.5, ready_at("a", 101.0))
        b = link.push(0.5, ready_at("b", 100.1))
        self.assertAlmostEqual(link.done_at(b), 102.0)
        self.assertAlmostEqual(link.done_at(a), 101.5)
        self.assertAlmostEqual(link.done_at(b), 102.0)
        self.assertEqual(settled, ["a", "b"])
        self.assertEqual(len(link.pending), 0)

    def test_only_a_link_with_a_bandwidth_or_latency_is_emulated(self):
        link = ddp_peer.Link(2)
        self.assertFalse(link.emulated())
        self.assertEqual(link.seconds(1 << 20), 0.0)
        link.latency = 0.001
        self.assertTrue(link.emulated())
        self.assertAlmostEqual(link.seconds(0), 0.001)


if __name__ == "__main__":
    unittest.main()
