"""What the GPU peers (bench/peers/resnet_cuda_peer.py, resnet_cap_peer.py) decide before any CUDA
work, checked on the CPU: the device a --device names, and the deterministic settings that match
Engram's trainer::make_deterministic when the C++ bench computes its rows deterministically.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "peers"))

import torch  # noqa: E402

import resnet_memory_peer  # noqa: E402


class PeerDeviceSettingsTest(unittest.TestCase):
    def test_a_device_without_an_index_is_the_first_gpu(self):
        # torch.cuda.set_device refuses torch.device("cuda"): the peers' default --device.
        self.assertEqual(resnet_memory_peer.cuda_device("cuda"), torch.device("cuda", 0))
        self.assertEqual(resnet_memory_peer.cuda_device("cuda:3"), torch.device("cuda", 3))
        with self.assertRaises(SystemExit):
            resnet_memory_peer.cuda_device("cpu")

    def test_deterministic_settings_are_engrams(self):
        saved = (os.environ.get("CUBLAS_WORKSPACE_CONFIG"), torch.backends.cudnn.deterministic,
                 torch.backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled(),
                 torch.utils.deterministic.fill_uninitialized_memory)
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        try:
            resnet_memory_peer.make_deterministic()
            self.assertEqual(os.environ["CUBLAS_WORKSPACE_CONFIG"], ":4096:8")
            self.assertTrue(torch.backends.cudnn.deterministic)
            self.assertFalse(torch.backends.cudnn.benchmark)
            self.assertTrue(torch.are_deterministic_algorithms_enabled())
            self.assertFalse(torch.utils.deterministic.fill_uninitialized_memory)
        finally:
            if saved[0] is None:
                os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
            else:
                os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved[0]
            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[1:3]
            torch.use_deterministic_algorithms(saved[3])
            torch.utils.deterministic.fill_uninitialized_memory = saved[4]


if __name__ == "__main__":
    unittest.main()
