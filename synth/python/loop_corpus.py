"""A corpus of loops in the styles people write them, labelled by the high-order function they
compute: map, filter, fold, scan or zipwith (the training data of the TBCNN recogniser,
`engram synth --recognizer tbcnn`).

    python3 loop_corpus.py --out DIR [--per-class N] [--seed S]

writes DIR/<class>/<name>.py, one function per file: a loop (for with append, while over an
index, comprehension, generator fed to sum/max/min, map/filter/zip builtins, reduce,
accumulate) with random names, element computations and helpers. Standard library only;
deterministic for a seed.
"""
import argparse
import os
import random

LISTS = ["xs", "items", "values", "nums", "data", "seq", "lst", "numbers", "elems", "arr"]
SECOND = ["ys", "others", "rhs", "second", "weights", "b_list", "right"]
OUTS = ["out", "result", "res", "collected", "acc_list", "kept", "new", "ans", "buf"]
ELEMS = ["x", "v", "item", "n", "e", "val", "element", "num", "a", "k"]
ACCS = ["acc", "total", "best", "m", "running", "s", "agg", "cur", "state"]
IDX = ["i", "j", "idx", "pos", "t"]
VERBS = ["compute", "make", "get", "build", "apply", "collect", "derive", "process", "run"]
NOUNS = ["values", "items", "stuff", "numbers", "result", "things", "data", "output", "list"]


def unary(x, r):
    c = r.randint(1, 9)
    return r.choice([f"({x} + {c}) % K", f"{x} * {c} % K", f"({x} * {x} + {c}) % K",
                     f"({c} * {x} + 1) % K", f"(K - {x}) % K", f"{x} * {x} % K",
                     f"({x} + {x}) % K", f"abs({x} - {c}) % K"])


def predicate(x, r):
    c = r.randint(1, 8)
    return r.choice([f"{x} > {c}", f"{x} % 2 == 0", f"{x} % {c + 1} == 0", f"{x} < {c}",
                     f"{x} != {c}", f"not {x} > {c}", f"{x} >= {c} and {x} % 2 == 1"])


def binary(a, b, r):
    return r.choice([f"({a} + {b}) % K", f"{a} * {b} % K", f"max({a}, {b})", f"min({a}, {b})",
                     f"{a} if {a} > {b} else {b}", f"({a} + 2 * {b}) % K"])


def helper(kind, r):
    """A helper function computing the element, and its name."""
    name = r.choice(["f", "g", "step", "transform", "check", "keep", "combine", "op", "h"])
    p = r.choice(ELEMS)
    if kind == "unary":
        return name, f"def {name}({p}):\n    return {unary(p, r)}\n\n\n"
    if kind == "predicate":
        return name, f"def {name}({p}):\n    return {predicate(p, r)}\n\n\n"
    q = r.choice([e for e in ELEMS if e != p])
    return name, f"def {name}({p}, {q}):\n    return {binary(p, q, r)}\n\n\n"


def names(r):
    xs = r.choice(LISTS)
    return dict(f=f"{r.choice(VERBS)}_{r.choice(NOUNS)}", xs=xs, ys=r.choice(SECOND),
                out=r.choice(OUTS), x=r.choice(ELEMS), acc=r.choice(ACCS), i=r.choice(IDX))


def gen_map(r):
    n = names(r)
    f, xs, out, x, i = n["f"], n["xs"], n["out"], n["x"], n["i"]
    use_helper = r.random() < 0.3
    pre, body = "", unary(x, r)
    if use_helper:
        h, pre = helper("unary", r)
        body = f"{h}({x})"
    style = r.randrange(6)
    if style == 0:
        code = f"    {out} = []\n    for {x} in {xs}:\n        {out}.append({body})\n    return {out}\n"
    elif style == 1:
        code = f"    return [{body} for {x} in {xs}]\n"
    elif style == 2:
        code = f"    return list(map(lambda {x}: {body}, {xs}))\n"
    elif style == 3:
        code = (f"    {out} = []\n    {i} = 0\n    while {i} < len({xs}):\n        {x} = {xs}[{i}]\n"
                f"        {out}.append({body})\n        {i} += 1\n    return {out}\n")
    elif style == 4:
        code = f"    {out} = []\n    for {i}, {x} in enumerate({xs}):\n        {out}.append({body})\n    return {out}\n"
    else:
        code = f"    return list({body} for {x} in {xs})\n"
    return pre + f"def {f}({xs}):\n" + code


def gen_filter(r):
    n = names(r)
    f, xs, out, x, i = n["f"], n["xs"], n["out"], n["x"], n["i"]
    pre, cond = "", predicate(x, r)
    if r.random() < 0.3:
        h, pre = helper("predicate", r)
        cond = f"{h}({x})"
    style = r.randrange(5)
    if style == 0:
        code = (f"    {out} = []\n    for {x} in {xs}:\n        if {cond}:\n"
                f"            {out}.append({x})\n    return {out}\n")
    elif style == 1:
        code = f"    return [{x} for {x} in {xs} if {cond}]\n"
    elif style == 2:
        code = f"    return list(filter(lambda {x}: {cond}, {xs}))\n"
    elif style == 3:
        code = (f"    {out} = []\n    {i} = 0\n    while {i} < len({xs}):\n        {x} = {xs}[{i}]\n"
                f"        if {cond}:\n            {out}.append({x})\n        {i} += 1\n    return {out}\n")
    else:
        code = (f"    {out} = []\n    for {x} in {xs}:\n        if not ({cond}):\n            continue\n"
                f"        {out}.append({x})\n    return {out}\n")
    return pre + f"def {f}({xs}):\n" + code


def starting_value(comb, r):
    """An initial value that does not decide the result alone (min from 0, max from 9, a
    product from 0 would)."""
    if "min(" in comb or " < " in comb:
        return "K - 1"
    if "max(" in comb or " > " in comb:
        return "0"
    return "1" if "*" in comb else r.choice(["0", "1"])


def gen_fold(r):
    n = names(r)
    f, xs, x, acc, i = n["f"], n["xs"], n["x"], n["acc"], n["i"]
    comb = binary(acc, x, r)
    init = starting_value(comb, r)
    pre = ""
    if r.random() < 0.3:
        h, pre = helper("binary", r)
        comb = f"{h}({acc}, {x})"
        init = starting_value(pre, r)
    style = r.randrange(7)
    if style == 0:
        code = f"    {acc} = {init}\n    for {x} in {xs}:\n        {acc} = {comb}\n    return {acc}\n"
    elif style == 1:
        code = f"    return sum({unary(x, r)} for {x} in {xs}) % K\n"
    elif style == 2:
        code = f"    return functools.reduce(lambda {acc}, {x}: {comb}, {xs}, {init})\n"
    elif style == 3:
        code = f"    return {r.choice(['max', 'min'])}(({unary(x, r)} for {x} in {xs}), default=0)\n"
    elif style == 4:
        code = (f"    {acc} = {init}\n    {i} = 0\n    while {i} < len({xs}):\n"
                f"        {x} = {xs}[{i}]\n        {acc} = {comb}\n        {i} += 1\n"
                f"    return {acc}\n")
    elif style == 5:
        op = r.choice([">", "<"])
        init = "0" if op == ">" else "K - 1"  # from the other end: the result depends on the list
        code = (f"    {acc} = {init}\n    for {x} in {xs}:\n        if {x} {op} {acc}:\n"
                f"            {acc} = {x}\n    return {acc}\n")
    else:
        code = f"    return sum({xs}) % K\n"
    imports = "import functools\n\n\n" if style == 2 else ""
    return imports + pre + f"def {f}({xs}):\n" + code


def gen_scan(r):
    n = names(r)
    f, xs, out, x, acc, i = n["f"], n["xs"], n["out"], n["x"], n["acc"], n["i"]
    comb = binary(acc, x, r)
    init = starting_value(comb, r)
    style = r.randrange(4)
    if style == 0:
        code = (f"    {acc} = {init}\n    {out} = []\n    for {x} in {xs}:\n        {acc} = {comb}\n"
                f"        {out}.append({acc})\n    return {out}\n")
    elif style == 1:
        # Without an initial value the first element starts the scan: only a combiner with an
        # identity (0 for +, 1 for *, ...) is a SCAN of the grammar then.
        comb = r.choice([f"({acc} + {x}) % K", f"{acc} * {x} % K", f"max({acc}, {x})",
                         f"min({acc}, {x})"])
        code = f"    return list(itertools.accumulate({xs}, lambda {acc}, {x}: {comb}))\n"
    elif style == 2:
        code = (f"    {acc} = {init}\n    {out} = []\n    {i} = 0\n    while {i} < len({xs}):\n"
                f"        {x} = {xs}[{i}]\n        {acc} = {comb}\n        {out}.append({acc})\n"
                f"        {i} += 1\n    return {out}\n")
    else:
        code = f"    return [v for v in itertools.accumulate({xs}, {r.choice(['max', 'min'])})]\n"
    imports = "import itertools\n\n\n" if style in (1, 3) else ""
    return imports + f"def {f}({xs}):\n" + code


def gen_zipwith(r):
    n = names(r)
    f, xs, ys, out, i = n["f"], n["xs"], n["ys"], n["out"], n["i"]
    a, b = r.sample(ELEMS, 2)
    comb = binary(a, b, r)
    pre = ""
    if r.random() < 0.3:
        h, pre = helper("binary", r)
        comb = f"{h}({a}, {b})"
    style = r.randrange(5)
    if style == 0:
        code = f"    return [{comb} for {a}, {b} in zip({xs}, {ys})]\n"
    elif style == 1:
        code = (f"    {out} = []\n    for {a}, {b} in zip({xs}, {ys}):\n        {out}.append({comb})\n"
                f"    return {out}\n")
    elif style == 2:
        code = (f"    {out} = []\n    for {i} in range(min(len({xs}), len({ys}))):\n"
                f"        {a}, {b} = {xs}[{i}], {ys}[{i}]\n        {out}.append({comb})\n    return {out}\n")
    elif style == 3:
        code = f"    return list(map(lambda {a}, {b}: {comb}, {xs}, {ys}))\n"
    else:
        code = (f"    {out} = []\n    {i} = 0\n    while {i} < len({xs}) and {i} < len({ys}):\n"
                f"        {a}, {b} = {xs}[{i}], {ys}[{i}]\n        {out}.append({comb})\n"
                f"        {i} += 1\n    return {out}\n")
    return pre + f"def {f}({xs}, {ys}):\n" + code


GENERATORS = {"map": gen_map, "filter": gen_filter, "fold": gen_fold, "scan": gen_scan,
              "zipwith": gen_zipwith}


def main():
    parser = argparse.ArgumentParser(prog="loop_corpus")
    parser.add_argument("--out", required=True)
    parser.add_argument("--per-class", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    r = random.Random(a.seed)
    for cls, gen in GENERATORS.items():
        folder = os.path.join(a.out, cls)
        os.makedirs(folder, exist_ok=True)
        seen = set()
        count = 0
        while count < a.per_class:
            code = "K = 10\n\n\n" + gen(r)
            if code in seen:
                continue
            seen.add(code)
            compile(code, f"{cls}_{count}.py", "exec")  # every file parses
            with open(os.path.join(folder, f"{cls}_{count:04d}.py"), "w") as f:
                f.write(code)
            count += 1


if __name__ == "__main__":
    main()
