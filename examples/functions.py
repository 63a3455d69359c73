"""Python functions for the `engram synth` examples of README.md and docs/USAGE.md (K = 10).

Each takes a list xs (or two, xs and ys) of values 0..K-1 and returns a list or a number. The
comment above a function is the program `engram synth` recovers from it; NEW is a primitive the
library lacks, which synth names after the function, the stage and the line of the computation
(affine's is affine_map_20). tests/synth/functions.py holds 34 more, each checked by the tests.
"""
K = 10


# map(square, filter(even, xs))
def evens_squared(xs):
    return [x * x % K for x in xs if x % 2 == 0]


# map(NEW, xs): no primitive of the library computes 3x + 1 mod K
def affine(xs):
    out = []
    for x in xs:
        out.append((3 * x + 1) % K)
    return out


# filter(even, xs)
def evens(xs):
    out = []
    for x in xs:
        if x % 2 == 0:
            out.append(x)
    return out


# fold(add, 0, zipwith(mul, xs, ys))
def dot_product(xs, ys):
    return sum(a * b for a, b in zip(xs, ys)) % K


# scan(max, 0, xs)
def running_max(xs):
    best = 0
    out = []
    for x in xs:
        best = max(best, x)
        out.append(best)
    return out
