"""Functions that `engram synth` recovers, in the styles people write them (K = 10).

Each function's `# expect:` line is the program the recogniser must return (the grammar of
`engram run --program`; NEW stands for a primitive that the library does not have and the
function's own table defines). tests/synth/recover.py checks every one.
"""
import functools
import itertools
from functools import reduce
from itertools import accumulate

K = 10


def inc(x):
    return (x + 1) % K


def is_prime(x):
    if x < 2:
        return False
    for d in range(2, x):
        if x % d == 0:
            return False
    return True


# expect: map(square, xs)
def squares_loop(xs):
    out = []
    for x in xs:
        out.append(x * x % K)
    return out


# expect: map(double, xs)
def doubles_comprehension(xs):
    return [2 * x % K for x in xs]


# expect: map(succ, xs)
def successors_helper(xs):
    return [inc(x) for x in xs]


# expect: map(negate, xs)
def negated_map_lambda(xs):
    return list(map(lambda x: (-x) % K, xs))


# expect: filter(even, xs)
def evens_comprehension(xs):
    return [x for x in xs if x % 2 == 0]


# expect: filter(gt(5), xs)
def above_five_loop(xs):
    out = []
    for x in xs:
        if x > 5:
            out.append(x)
    return out


# expect: filter(prime, xs)
def primes_filter_builtin(xs):
    return list(filter(is_prime, xs))


# expect: fold(add, 0, xs)
def total_mod(xs):
    return sum(xs) % K


# expect: fold(add, 0, map(square, filter(even, xs)))
def sum_of_even_squares_generator(xs):
    return sum(x * x for x in xs if x % 2 == 0) % K


# expect: fold(max, 0, xs)
def largest_with_default(xs):
    return max(xs, default=0)


# expect: fold(min, 9, xs)
def smallest_loop(xs):
    m = 9
    for x in xs:
        if x < m:
            m = x
    return m


# expect: map(double, xs)
def doubles_while_index(xs):
    out = []
    i = 0
    while i < len(xs):
        out.append(xs[i] * 2 % K)
        i += 1
    return out


# expect: zipwith(add, xs, ys)
def pairwise_sums_zip(xs, ys):
    return [(a + b) % K for a, b in zip(xs, ys)]


# expect: zipwith(max, xs, ys)
def pairwise_max_index(xs, ys):
    out = []
    for i in range(min(len(xs), len(ys))):
        out.append(max(xs[i], ys[i]))
    return out


# expect: scan(add, 0, xs)
def running_sums_accumulate(xs):
    return list(accumulate(xs, lambda a, b: (a + b) % K))


# expect: scan(max, 0, xs)
def running_max_loop(xs):
    best = 0
    out = []
    for x in xs:
        best = max(best, x)
        out.append(best)
    return out


# expect: fold(mul, 1, xs)
def product_reduce(xs):
    return functools.reduce(lambda a, x: (a * x) % K, xs, 1)


# expect: filter(gt(4), map(double, xs))
def doubled_then_large(xs):
    doubled = [2 * x % K for x in xs]
    return [d for d in doubled if d > 4]


# expect: fold(add, 0, map(square, filter(even, xs)))
def three_stages(xs):
    evens = [x for x in xs if x % 2 == 0]
    squares = [x * x % K for x in evens]
    return sum(squares) % K


# expect: scan(add, 0, map(square, xs))
def running_square_sums(xs):
    acc = 0
    out = []
    for x in xs:
        acc = (acc + x * x) % K
        out.append(acc)
    return out


# expect: map(NEW, xs)
def affine(xs):
    return [(3 * x + 1) % K for x in xs]


# expect: map(succ, filter(prime, xs))
def successors_of_primes(xs):
    return [inc(x) for x in xs if is_prime(x)]


# expect: fold(add, 0, zipwith(mul, xs, ys))
def dot_product(xs, ys):
    return sum(a * b for a, b in zip(xs, ys)) % K


# expect: fold(max, 0, map(succ, filter(gt(2), xs)))
def largest_successor_generator(xs):
    return max((inc(x) for x in xs if x > 2), default=0)


# expect: filter(gt(3), map(square, xs))
def nested_comprehension(xs):
    return [y for y in [x * x % K for x in xs] if y > 3]


# expect: filter(gt(5), scan(max, 0, xs))
def high_running_max(xs):
    return [v for v in accumulate(xs, max) if v > 5]


# expect: map(square, xs)
def squares_enumerate(xs):
    out = []
    for i, x in enumerate(xs):
        out.append(x * x % K)
    return out


# expect: filter(NEW, xs)
def at_most_five(xs):
    return [x for x in xs if not x > 5]


# expect: fold(add, 0, filter(even, xs))
def even_total_loop(xs):
    total = 0
    for x in xs:
        if x % 2 == 0:
            total = (total + x) % K
    return total


# expect: fold(max, 0, xs)
def largest_reduce(xs):
    return reduce(lambda a, b: a if a > b else b, xs)


# expect: map(NEW, xs)
def clamp_branch(xs):
    return [x if x < 7 else 7 for x in xs]


# expect: map(square, map(succ, xs))
def two_maps(xs):
    shifted = [inc(x) for x in xs]
    return [s * s % K for s in shifted]


# expect: fold(max, 9, xs)
def max_from_the_top(xs):
    s = K - 1
    for e in xs:
        s = s if s > e else e  # 9 > e asks e for the reflected comparison e < 9
    return s


# expect: scan(min, 1, xs)
def running_min_from_one(xs):
    acc = 1
    out = []
    for num in xs:
        acc = min(acc, num)  # constants only, until a 0 comes
        out.append(acc)
    return out
