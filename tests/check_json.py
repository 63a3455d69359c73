#!/usr/bin/env python3
"""check_json.py FILE PATH...: fails unless every dotted PATH (list indices as numbers) exists in
the JSON file and holds a finite number. PATH=LO..HI also requires LO <= value <= HI. Used by
the `slow` tests."""
import json
import math
import sys

data = json.load(open(sys.argv[1]))
for arg in sys.argv[2:]:
    path, _, bounds = arg.partition("=")
    node = data
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    if not isinstance(node, (int, float)) or not math.isfinite(node):
        sys.exit(f"{sys.argv[1]}: {path} is {node!r}, expected a finite number")
    if bounds:
        low, high = (float(b) for b in bounds.split(".."))
        if not low <= node <= high:
            sys.exit(f"{sys.argv[1]}: {path} is {node!r}, expected {low}..{high}")
print(f"{sys.argv[1]}: {len(sys.argv) - 2} figures present")
