"""notebooks/figures.py: what the notebooks' figures must show before they are saved."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.environ.get("ENGRAM_NOTEBOOKS", os.path.join(
    os.path.dirname(__file__), "..", "..", "notebooks")))
import figures  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402


def labelled(ax):
    ax.set_xlabel("x (unit)")
    ax.set_ylabel("y (unit)")
    ax.set_title("a panel")


class CheckNotEmpty(unittest.TestCase):
    def tearDown(self):
        plt.close("all")

    def test_a_panel_without_data_is_refused(self):
        fig, ax = plt.subplots()
        labelled(ax)
        with self.assertRaisesRegex(figures.EmptyFigure, "shows no data"):
            figures.check_not_empty(fig)

    def test_a_line_without_points_is_no_data(self):
        fig, ax = plt.subplots()
        labelled(ax)
        ax.plot([], [])
        with self.assertRaises(figures.EmptyFigure):
            figures.check_not_empty(fig)

    def test_an_unlabelled_axis_is_refused(self):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [3, 4])
        ax.set_title("a panel")
        ax.set_xlabel("x (unit)")
        with self.assertRaisesRegex(figures.EmptyFigure, "without a label"):
            figures.check_not_empty(fig)

    def test_an_untitled_figure_is_refused(self):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [3, 4])
        ax.set_xlabel("x (unit)")
        ax.set_ylabel("y (unit)")
        with self.assertRaisesRegex(figures.EmptyFigure, "no title"):
            figures.check_not_empty(fig)

    def test_shared_axes_need_one_label(self):
        fig, axes = plt.subplots(2, 1, sharex=True)
        for ax in axes:
            ax.bar([1, 2], [3, 4])
            ax.set_ylabel("y (unit)")
        axes[-1].set_xlabel("x (unit)")
        fig.suptitle("two panels")
        figures.check_not_empty(fig)  # does not raise

    def test_an_axis_free_drawing_needs_no_labels(self):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, -1])
        ax.axis("off")
        ax.set_title("a tree")
        figures.check_not_empty(fig)


class Save(unittest.TestCase):
    def tearDown(self):
        plt.close("all")

    def test_saves_a_png_and_the_same_figure_gives_the_same_bytes(self):
        with tempfile.TemporaryDirectory() as d:
            old = figures.FIGURES
            figures.FIGURES = d
            try:
                paths = []
                for name in ("a", "b"):
                    fig, ax = plt.subplots()
                    ax.plot([1, 2, 3], [1, 4, 9])
                    labelled(ax)
                    figures.stamp(fig, ("some_result", {"commit": "abc1234"}))
                    paths.append(figures.save(fig, name))
                with open(paths[0], "rb") as f:
                    first = f.read()
                with open(paths[1], "rb") as f:
                    second = f.read()
                self.assertTrue(first.startswith(b"\x89PNG"))
                self.assertEqual(first, second)
                self.assertEqual(sorted(os.listdir(d)), ["a.png", "b.png"])
            finally:
                figures.FIGURES = old

    def test_an_empty_figure_is_not_written(self):
        with tempfile.TemporaryDirectory() as d:
            old = figures.FIGURES
            figures.FIGURES = d
            try:
                fig, ax = plt.subplots()
                labelled(ax)
                with self.assertRaises(figures.EmptyFigure):
                    figures.save(fig, "empty")
                self.assertEqual(os.listdir(d), [])
            finally:
                figures.FIGURES = old

    def test_a_missing_results_file_names_its_path(self):
        with self.assertRaisesRegex(FileNotFoundError, "no_such_result.json is missing"):
            figures.load("no_such_result")

    def test_the_commit_stamp_is_in_the_figure(self):
        fig, ax = plt.subplots()
        figures.stamp(fig, ("npi_generalization", {"commit": "abc1234"}))
        texts = [t.get_text() for t in fig.texts]
        self.assertIn("data: results/npi_generalization.json @ abc1234", texts)


if __name__ == "__main__":
    unittest.main()
