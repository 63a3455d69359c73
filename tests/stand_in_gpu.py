"""A Python script run as on a GPU machine, for the tests of the scripts that name the GPU they
measured through nvidia-smi (scripts/reproduce/collect.py's machine()): a stand-in nvidia-smi
that prints one GPU's line comes first on the PATH, or no nvidia-smi is on it at all."""

import os
import subprocess
import sys
import tempfile

GPU = "NVIDIA H200, 143771 MiB, 580.159.04"


def run_script(script, *args, gpu=GPU):
    """`script` with `args`, nvidia-smi naming `gpu` first on the PATH (None: the PATH holds
    nothing else, so no nvidia-smi); its CompletedProcess, output captured as text."""
    with tempfile.TemporaryDirectory() as bin_dir:
        path = bin_dir
        if gpu is not None:
            with open(os.path.join(bin_dir, "nvidia-smi"), "w") as f:
                f.write(f"#!/bin/sh\necho '{gpu}'\n")
            os.chmod(os.path.join(bin_dir, "nvidia-smi"), 0o755)
            path += os.pathsep + os.environ.get("PATH", "")
        return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                              env={**os.environ, "PATH": path})
