#!/usr/bin/env python3
"""check_json.py FILE PATH...: fails unless every dotted PATH (list indices as numbers) exists in
the JSON file and holds a finite number (true and false count as 1 and 0). PATH=LO..HI also
requires LO <= value <= HI. A `*` in PATH stands for every element of a list (or every value of
an object), and each must pass. Used by the `claims` and `slow` tests: a claim's figure gets a
range that a broken run falls outside of, never a timing bound."""
import json
import math
import sys


def nodes(node, parts, path):
    """Yields (concrete path, value) for every match of parts under node."""
    if not parts:
        yield path, node
        return
    part, rest = parts[0], parts[1:]
    if part == "*":
        items = enumerate(node) if isinstance(node, list) else node.items()
        found = False
        for key, child in items:
            found = True
            yield from nodes(child, rest, path + [str(key)])
        if not found:
            sys.exit(f"{sys.argv[1]}: {'.'.join(path) or '(top)'} is empty, expected elements")
        return
    try:
        child = node[int(part)] if isinstance(node, list) else node[part]
    except (KeyError, IndexError, ValueError, TypeError):
        sys.exit(f"{sys.argv[1]}: {'.'.join(path + [part])} is missing")
    yield from nodes(child, rest, path + [part])


data = json.load(open(sys.argv[1]))
checked = 0
for arg in sys.argv[2:]:
    pattern, _, bounds = arg.partition("=")
    for path, node in nodes(data, pattern.split("."), []):
        path = ".".join(path)
        if isinstance(node, bool):
            node = int(node)
        if not isinstance(node, (int, float)) or not math.isfinite(node):
            sys.exit(f"{sys.argv[1]}: {path} is {node!r}, expected a finite number")
        if bounds:
            low, high = (float(b) for b in bounds.split(".."))
            if not low <= node <= high:
                sys.exit(f"{sys.argv[1]}: {path} is {node!r}, expected {low}..{high}")
        checked += 1
print(f"{sys.argv[1]}: {checked} figures present and in range")
