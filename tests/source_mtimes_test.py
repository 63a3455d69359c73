"""scripts/source-mtimes.py: after a fresh copy of the tree, the sources whose content is what was
built get their times back, so ninja rebuilds only what changed; build folders and the bundle of
.debs are not sources, the grammars (compiled) are. Runs on the CPU, in a scratch tree."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                      "source-mtimes.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          check=True).stdout


class SourceMtimesTest(unittest.TestCase):
    def test_unchanged_sources_get_their_times_back_and_changed_ones_do_not(self):
        with tempfile.TemporaryDirectory() as root:
            def write(rel, text):
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
                return path
            same = write("nn/Conv2d.cpp", "int a;\n")
            edited = write("nn/Conv2d.h", "int b;\n")
            built = write("build-gpu/nn/Conv2d.o", "object\n")
            bundled = write("third_party/deps/x.deb", "bundle\n")
            grammar = write("third_party/grammars/python/src/parser.c", "int p;\n")
            for path in (same, edited, grammar):
                os.utime(path, ns=(10**18, 10**18))
            manifest = os.path.join(root, "build-gpu", "source-mtimes.json")
            self.assertIn("saved 3 files", run("save", root, manifest))
            # The tree copied again: every file newer; one of them also edited.
            for path in (same, edited, built, bundled, grammar):
                os.utime(path, ns=(2 * 10**18, 2 * 10**18))
            write("nn/Conv2d.h", "int c;\n")
            write("nn/New.cpp", "int d;\n")
            self.assertIn("2 times restored, 2 files new or changed",
                          run("restore", root, manifest))
            self.assertEqual(os.stat(same).st_mtime_ns, 10**18)
            self.assertEqual(os.stat(grammar).st_mtime_ns, 10**18)
            self.assertGreater(os.stat(edited).st_mtime_ns, 10**18)
            self.assertEqual(os.stat(built).st_mtime_ns, 2 * 10**18)  # not a source
            self.assertEqual(os.stat(bundled).st_mtime_ns, 2 * 10**18)

    def test_without_a_manifest_nothing_is_restored(self):
        with tempfile.TemporaryDirectory() as root:
            self.assertIn("nothing restored",
                          run("restore", root, os.path.join(root, "none.json")))


if __name__ == "__main__":
    unittest.main()
