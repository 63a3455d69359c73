"""What every notebook shares: where the results are, and how a figure is stamped, checked and saved.

The notebooks read only the committed results (results/*.json and the Chrome traces under
results/traces/), never rerun training. Two environment variables redirect them, for
scripts/notebooks.sh and its test:
  ENGRAM_RESULTS  the results folder (default: results/ of this checkout)
  ENGRAM_FIGURES  where save() writes PNGs (default: results/figures/ of this checkout)
"""
import gzip
import json
import os

import matplotlib

matplotlib.use("Agg")  # headless: figures are files, and inline display works as well
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.environ.get("ENGRAM_RESULTS") or os.path.join(ROOT, "results")
FIGURES = os.environ.get("ENGRAM_FIGURES") or os.path.join(RESULTS, "figures")

MB = 1e6  # bytes per megabyte: memory axes are in MB (10^6 bytes)

# One colour per memory tag and per schedule, the same in every figure.
TAG_COLOURS = {
    "parameter": "#4c72b0",
    "gradient": "#dd8452",
    "optimizer_state": "#55a868",
    "activation": "#c44e52",
    "workspace": "#8172b3",
}


class EmptyFigure(RuntimeError):
    """A figure with a panel that shows no data."""


def load(name):
    """results/NAME.json as a dict; FileNotFoundError names the script that writes it."""
    path = os.path.join(RESULTS, name + ".json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: scripts/reproduce/ writes it")
    with open(path) as f:
        return json.load(f)


def exists(name):
    return os.path.exists(os.path.join(RESULTS, name + ".json"))


def load_trace(relative):
    """A Chrome trace under the results folder (gzipped when its name ends in .gz)."""
    path = os.path.join(RESULTS, relative)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def commit_of(report):
    """The commit a results file was made from (its script records it), or '?'."""
    return report.get("commit") or report.get("reproduce", {}).get("commit") or "?"


def stamp(fig, *sources):
    """Writes 'data: FILE @ COMMIT, ...' in the figure's lower right corner.

    sources: (file name, report) pairs, e.g. ("npi_generalization", report)."""
    text = "data: " + ", ".join(f"results/{name}.json @ {commit_of(r)}" for name, r in sources)
    fig.text(0.995, 0.005, text, ha="right", va="bottom", fontsize=7, color="0.4")


def _shows_data(ax):
    for line in ax.get_lines():
        if len(line.get_xdata()) > 0:
            return True
    for collection in ax.collections:
        if len(collection.get_offsets()) > 0 or len(collection.get_paths()) > 0:
            return True
    return bool(ax.patches) or bool(ax.images)


def _labelled(ax, which):
    """Whether the x or y axis of `ax`, or of a panel sharing it, carries a label."""
    shared = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
    label = "get_xlabel" if which == "x" else "get_ylabel"
    return any(getattr(other, label)() for other in shared.get_siblings(ax))


def check_not_empty(fig):
    """Raises EmptyFigure unless every visible panel of `fig` draws some data and is titled or
    labelled, so that an empty or unlabelled panel fails the notebook instead of being saved."""
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    if not axes:
        raise EmptyFigure("the figure has no panels")
    for ax in axes:
        name = ax.get_title() or ax.get_ylabel() or "untitled panel"
        if not _shows_data(ax):
            raise EmptyFigure(f"panel '{name}' shows no data")
        if ax.axison and not (_labelled(ax, "x") and _labelled(ax, "y")):
            raise EmptyFigure(f"panel '{name}' has an axis without a label")
    if not fig._suptitle and not any(ax.get_title() for ax in axes):
        raise EmptyFigure("the figure has no title")


def save(fig, name):
    """Checks `fig` (check_not_empty) and writes FIGURES/NAME.png; returns the path.

    The PNG carries no software version or date, so the same data gives the same file."""
    check_not_empty(fig)
    os.makedirs(FIGURES, exist_ok=True)
    path = os.path.join(FIGURES, name + ".png")
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100, metadata={"Software": None})
    os.replace(tmp, path)
    return path
