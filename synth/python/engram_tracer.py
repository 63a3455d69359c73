"""Engram's tracer: runs a Python function on sample lists and records what it computed.

Standard library only; `engram synth` runs it with python3 (it is compiled into the binary), and
it runs on its own too:

    python3 engram_tracer.py trace --source f.py --function f --k 10 --inputs inputs.json
    python3 engram_tracer.py run   --source f.py --function f --k 10 --inputs inputs.json

inputs.json is {"inputs": [[xs], [xs, ys], ...]} (one list per parameter of the function).
`run` prints {"outputs": [...]}: the function's results on plain ints. `trace` prints the trace
(below). Exit codes: 0 done; 2 the source is outside the supported subset (one line naming the
construct and its line); 1 the function raised on a sample input, or returned something that is
not a list or a number of the domain 0..K-1.

How values are followed: every element of an input list is an int subclass (V) that knows its
node in the dataflow graph; arithmetic on it records an operation node (its arguments, value,
source line and the input positions it depends on: the tuple normalisation of US11836613B2), and
testing its truth (if, while, and/or, the comparisons inside max and min) records a branch with
its outcome. sys.settrace follows the function's frames: at every hit of a loop header it
records the loop's ints (accumulators, loop variables) as node references; every list a frame
returns or holds when it returns is recorded as a materialised list. sum, max, min,
functools.reduce and itertools.accumulate are replaced by Python loops of the same semantics, so
their accumulators are recorded like the user's own.

The trace is {"function", "k", "arity", "runs": [run, ...]}; each run has
  "input":    the lists
  "nodes":    [[id, op, args, value, line, positions], ...]  args: a node id, or ["c", int]
  "branches": [[seq, node, outcome, line], ...]
  "iters":    [[seq, frame, loop, {name: ref}], ...]   each hit of a loop header: loop is its
              line ("12"), or "sum:3" for the replaced builtins; "exit" when the frame returns;
              ref: a node id, ["c", int], or {"list": length} for a list
  "lists":    [[seq, [ref, ...]], ...]                     materialised lists, when complete
  "reads":    [[seq, list, position, node], ...]           elements read from the inputs
  "calls":    [[seq, name, line], ...]                     the user's functions entered
  "result":   {"list": [ref, ...]} or {"value": ref}
Node ids and seqs share one counter, so events are totally ordered.
"""

import argparse
import ast
import functools
import inspect
import itertools
import json
import operator
import os
import sys

EXIT_UNSUPPORTED = 2
EXIT_FAILED = 1

FORBIDDEN_CALLS = {"print", "input", "open", "exec", "eval", "compile", "__import__", "globals",
                   "locals", "setattr", "delattr", "exit", "quit", "breakpoint", "sorted",
                   "reversed", "id", "hash", "vars", "memoryview"}
ALLOWED_IMPORTS = {"functools", "itertools", "operator", "math"}


class Unsupported(Exception):
    """The source is outside the supported subset; the message names the construct and line."""

    def __init__(self, line, what):
        super().__init__(f"line {line}: {what}")


def int64(value, line):
    """`value` as the trace carries it: a 64-bit integer, as Engram reads it (a larger one came
    out as a float, or wrapped around to a negative number)."""
    if not -2**63 <= value < 2**63:
        raise Unsupported(line, f"the value {value} is outside 64-bit integers, which synth "
                                "does not model")
    return value


# ---------------------------------------------------------------------------------------------
# The recorder


class Recorder:
    def __init__(self, source_path):
        self.source_path = os.path.abspath(source_path)
        self.reset()

    def reset(self):
        self.counter = 0
        self.nodes = []
        self.branches = []
        self.iters = []
        self.lists = []
        self.calls = []
        self.positions = {}
        self.frame_ids = {}
        self.alive = []
        self.looping = set()
        self.list_seen = {}
        self.reads = []

    def next_seq(self):
        self.counter += 1
        return self.counter

    def user_line(self):
        """The line of the innermost frame of the user's file (where an operation happened)."""
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == self.source_path:
                return frame.f_lineno
            frame = frame.f_back
        return 0

    def ref(self, value, line=0):
        if isinstance(value, V):
            return value.nid
        return ["c", int64(_plain(value), line)]

    def leaf(self, value, which, index):
        nid = self.next_seq()
        self.positions[nid] = ((which, index),)
        self.nodes.append([nid, "in", [which, index], int(value), 0, [[which, index]]])
        return V(value, nid)

    def op(self, name, value, args):
        nid = self.next_seq()
        positions = set()
        for a in args:
            if isinstance(a, V):
                positions.update(self.positions[a.nid])
        positions = tuple(sorted(positions))
        self.positions[nid] = positions
        line = self.user_line()
        self.nodes.append([nid, name, [self.ref(a, line) for a in args], int64(int(value), line),
                           line, [list(p) for p in positions]])
        return V(value, nid)

    def branch(self, value, outcome):
        self.branches.append([self.next_seq(), value.nid, 1 if outcome else 0, self.user_line()])


REC = None
REAL_STDOUT = None


_plain = int.__int__  # the value of an int (a V's own, without recording anything)


def _arith(name, fn):
    def forward(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _result(name, fn(_plain(self), _plain(other)), (self, other))

    def backward(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _result(name, fn(_plain(other), _plain(self)), (other, self))

    return forward, backward


def _result(name, value, args):
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int):  # true division, a float power: no longer a domain value
        return value
    return REC.op(name, value, args)


class V(int):
    """A traced int: its value, and its node in the dataflow graph."""

    def __new__(cls, value, nid):
        obj = int.__new__(cls, value)
        obj.nid = nid
        return obj

    __add__, __radd__ = _arith("add", operator.add)
    __sub__, __rsub__ = _arith("sub", operator.sub)
    __mul__, __rmul__ = _arith("mul", operator.mul)
    __floordiv__, __rfloordiv__ = _arith("floordiv", operator.floordiv)
    __mod__, __rmod__ = _arith("mod", operator.mod)
    __and__, __rand__ = _arith("bitand", operator.and_)
    __or__, __ror__ = _arith("bitor", operator.or_)
    __xor__, __rxor__ = _arith("bitxor", operator.xor)
    __lshift__, __rlshift__ = _arith("lshift", operator.lshift)
    __rshift__, __rrshift__ = _arith("rshift", operator.rshift)
    __lt__, _ = _arith("lt", operator.lt)
    __le__, _ = _arith("le", operator.le)
    __gt__, _ = _arith("gt", operator.gt)
    __ge__, _ = _arith("ge", operator.ge)
    __eq__, _ = _arith("eq", operator.eq)
    __ne__, _ = _arith("ne", operator.ne)
    __hash__ = int.__hash__

    def __pow__(self, other, modulo=None):
        if not isinstance(other, int) or (modulo is not None and not isinstance(modulo, int)):
            return NotImplemented
        if modulo is None:
            return _result("pow", pow(_plain(self), _plain(other)), (self, other))
        return _result("powmod", pow(_plain(self), _plain(other), _plain(modulo)),
                       (self, other, modulo))

    def __rpow__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _result("pow", pow(_plain(other), _plain(self)), (other, self))

    def __divmod__(self, other):
        return (self // other, self % other)

    def __neg__(self):
        return _result("neg", -_plain(self), (self,))

    def __pos__(self):
        return self

    def __abs__(self):
        return _result("abs", abs(_plain(self)), (self,))

    def __invert__(self):
        return _result("invert", ~_plain(self), (self,))

    def __bool__(self):
        outcome = _plain(self) != 0
        REC.branch(self, outcome)
        return outcome

    def _pinned(self):
        """The value leaves the traced operations (a range bound, an index, int(x)): what
        follows may depend on it in ways no operation records, so the computation is known
        only for this very value (a test x == value that came out true)."""
        value = _plain(self)
        REC.branch(REC.op("eq", 1, (self, value)), True)
        return value

    def __index__(self):
        return self._pinned()

    def __int__(self):
        return self._pinned()


class TracedList(list):
    """An input list (which: 0 xs, 1 ys) of traced elements; its reads are recorded."""

    def __init__(self, values, which):
        super().__init__(values)
        self.which = which

    def __getitem__(self, index):
        if isinstance(index, V):  # an element chosen by a value: known for that value only
            index = index._pinned()
        value = list.__getitem__(self, index)
        if isinstance(value, V):
            index = _plain(index)
            position = index if index >= 0 else len(self) + index
            REC.reads.append([REC.next_seq(), self.which, int(position), value.nid])
        return value

    def __iter__(self):
        for position in range(len(self)):
            value = list.__getitem__(self, position)
            REC.reads.append([REC.next_seq(), self.which, position, value.nid])
            yield value


# ---------------------------------------------------------------------------------------------
# sum, max, min, reduce and accumulate as Python loops (the same results on ints), so that their
# accumulators are recorded at each iteration like a loop of the user's.

_MISSING = object()


def traced_sum(iterable, start=0):
    acc = start
    for item in iterable:
        acc = acc + item
    return acc


def _extreme(name, better, args, key, default):
    if key is not None:
        raise Unsupported(REC.user_line(), f"{name}() with key= is outside the supported subset")
    if len(args) == 1:
        iterator = iter(args[0])
        acc = next(iterator, _MISSING)
        if acc is _MISSING:
            if default is _MISSING:
                raise ValueError(f"{name}() arg is an empty sequence")
            return default
        for item in iterator:
            if better(item, acc):
                acc = item
        return acc
    if default is not _MISSING:
        raise TypeError(f"Cannot specify a default for {name}() with multiple positional arguments")
    acc = args[0]
    for item in args[1:]:
        if better(item, acc):
            acc = item
    return acc


def traced_max(*args, key=None, default=_MISSING):
    return _extreme("max", lambda a, b: a > b, args, key, default)


def traced_min(*args, key=None, default=_MISSING):
    return _extreme("min", lambda a, b: a < b, args, key, default)


def traced_reduce(function, iterable, initial=_MISSING):
    iterator = iter(iterable)
    if initial is _MISSING:
        acc = next(iterator, _MISSING)
        if acc is _MISSING:
            raise TypeError("reduce() of empty iterable with no initial value")
    else:
        acc = initial
    for item in iterator:
        acc = function(acc, item)
    return acc


def traced_accumulate(iterable, func=None, *, initial=None):
    if initial is not None:
        raise Unsupported(REC.user_line(), "accumulate() with initial= (its output starts with the "
                          "initial value, which no SCAN writes) is outside the supported subset")
    combine = func if func is not None else operator.add
    iterator = iter(iterable)
    acc = next(iterator, _MISSING)
    if acc is _MISSING:
        return
    yield acc
    for item in iterator:
        acc = combine(acc, item)
        yield acc


def traced_range(*args):
    """range, whose bounds C reads without asking the value: a loop over range(2, x) runs
    as often as x says, so x is pinned (V._pinned)."""
    return range(*(a._pinned() if isinstance(a, V) else a for a in args))


REPLACEMENTS = {"sum": traced_sum, "max": traced_max, "min": traced_min, "range": traced_range}
TRACED_HELPERS = {f.__code__ for f in (traced_sum, _extreme, traced_reduce, traced_accumulate)}


# ---------------------------------------------------------------------------------------------
# The supported subset, checked on the source before it runs


def _reachable(functions, start):
    """The function `start` and the module's functions it names, transitively (helpers)."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Name) and node.id in functions and node.id not in seen:
                todo.append(node.id)
    return [functions[n] for n in sorted(seen)]


def _check_import(node):
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
    for module in modules:
        if (module or "").split(".")[0] not in ALLOWED_IMPORTS:
            raise Unsupported(node.lineno, f"import of '{module}' (only "
                              f"{', '.join(sorted(ALLOWED_IMPORTS))}) is outside the supported "
                              "subset")


def check_source(tree, function_name):
    """The module's imports, and the function with the helpers it calls: what will run."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if function_name not in functions:
        raise Unsupported(1, f"no function '{function_name}' in the file")
    module_names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _check_import(node)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        module_names.add(name.id)
    reachable = _reachable(functions, function_name)
    for definition in reachable:
        for node in ast.walk(definition):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                kind = "global" if isinstance(node, ast.Global) else "nonlocal"
                raise Unsupported(node.lineno, f"'{kind} {', '.join(node.names)}' (a side effect "
                                  "outside the function) is outside the supported subset")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                _check_import(node)
            if isinstance(node, (ast.Try, ast.With, ast.AsyncFunctionDef, ast.Await)):
                raise Unsupported(node.lineno, f"'{type(node).__name__.lower()}' is outside the "
                                  "supported subset")
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                    raise Unsupported(node.lineno, f"call of {func.id}() is outside the "
                                      "supported subset")
                if isinstance(func, ast.Name) and func.id == definition.name:
                    raise Unsupported(node.lineno, f"recursive call of {func.id}() (recursion "
                                      "beyond the high-order patterns) is outside the supported "
                                      "subset")
                if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                        and func.value.id in module_names
                        and func.attr in {"append", "extend", "insert", "pop", "remove", "clear",
                                          "update", "add", "setdefault", "sort", "reverse"}):
                    raise Unsupported(node.lineno, f"'{func.value.id}.{func.attr}()' changes the "
                                      f"module-level '{func.value.id}' (a side effect) and is "
                                      "outside the supported subset")
            if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
                base = node.value
                while isinstance(base, (ast.Subscript, ast.Attribute)):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in module_names:
                    raise Unsupported(node.lineno, f"assignment into the module-level "
                                      f"'{base.id}' (a side effect) is outside the supported "
                                      "subset")
    loop_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While)):
            loop_lines.add(node.lineno)
    return functions[function_name], loop_lines


def load_function(source_path, function_name):
    try:
        with open(source_path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise Unsupported(1, f"cannot read the source: {e}")
    try:
        tree = ast.parse(text, filename=source_path)
    except SyntaxError as e:
        raise Unsupported(e.lineno or 1, f"syntax error: {e.msg}")
    definition, loop_lines = check_source(tree, function_name)
    arity = len(definition.args.args)
    if arity not in (1, 2) or definition.args.vararg or definition.args.kwarg:
        raise Unsupported(definition.lineno, f"{function_name}() takes {arity} parameters; one "
                          "list (xs) or two (xs, ys) are supported")
    builtins_copy = dict(__builtins__.__dict__ if hasattr(__builtins__, "__dict__") else __builtins__)
    builtins_copy.update(REPLACEMENTS)
    namespace = {"__name__": "engram_traced", "__file__": os.path.abspath(source_path),
                 "__builtins__": builtins_copy}
    sys.path.insert(0, os.path.dirname(os.path.abspath(source_path)))
    code = compile(tree, os.path.abspath(source_path), "exec")
    try:
        exec(code, namespace)
    except (Exception, SystemExit) as e:  # the module's own top-level code failed (or exit())
        raise Failed(f"loading {source_path} raised {type(e).__name__}: {e}")
    return namespace[function_name], arity, loop_lines


class Failed(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Following the frames


def _loop_lines_of(code):
    """Lines of the for and while loops of one of the traced helpers above."""
    if code not in HELPER_LOOP_LINES:
        import inspect
        import textwrap
        lines, start = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        HELPER_LOOP_LINES[code] = {n.lineno + start - 1 for n in ast.walk(tree)
                                   if isinstance(n, (ast.For, ast.While))}
    return HELPER_LOOP_LINES[code]


HELPER_LOOP_LINES = {}


def make_tracer(loop_lines):
    source = REC.source_path

    def frame_id(frame):
        key = id(frame)
        if key not in REC.frame_ids:
            REC.frame_ids[key] = len(REC.frame_ids)
            REC.alive.append(frame)  # no id is reused while the run goes on
        return REC.frame_ids[key]

    def snapshot(frame):
        values = {}
        for name, value in frame.f_locals.items():
            if isinstance(value, int) and not isinstance(value, bool):
                # A local too large for the trace (an unused 10**20) is left out; a computation
                # with it is refused where it happens (Recorder.op).
                if -2**63 <= _plain(value) < 2**63:
                    values[name] = REC.ref(value)
            elif isinstance(value, list):
                values[name] = {"list": len(value)}
        return values

    def note_lists(frame, returned):
        for value in [returned] + list(frame.f_locals.values()):
            if (isinstance(value, list) and value and all(isinstance(v, int) for v in value)
                    and any(isinstance(v, V) for v in value)):
                key = (id(value), len(value))
                if key not in REC.list_seen:
                    REC.list_seen[key] = value
                    REC.lists.append([REC.next_seq(), [REC.ref(v) for v in value]])

    def loop_name(frame):
        code = frame.f_code
        if code in TRACED_HELPERS:
            if frame.f_lineno not in _loop_lines_of(code):
                return None
            name = frame.f_locals.get("name", code.co_name.replace("traced_", ""))
            return f"{name}:{frame.f_lineno - code.co_firstlineno}"
        return str(frame.f_lineno) if frame.f_lineno in loop_lines else None

    def local(frame, event, arg):
        if event == "line":
            loop = loop_name(frame)
            if loop is not None:
                REC.looping.add(frame_id(frame))
                REC.iters.append([REC.next_seq(), frame_id(frame), loop, snapshot(frame)])
        elif event == "return" and not frame.f_code.co_flags & inspect.CO_GENERATOR \
                or event == "return" and arg is None:
            if frame_id(frame) in REC.looping:
                REC.iters.append([REC.next_seq(), frame_id(frame), "exit", snapshot(frame)])
            note_lists(frame, arg)
        return local

    def on_call(frame, event, arg):
        code = frame.f_code
        if event != "call" or not (code.co_filename == source or code in TRACED_HELPERS):
            return None
        if code.co_filename == source and not code.co_name.startswith("<"):
            REC.calls.append([REC.next_seq(), code.co_name, frame.f_lineno])
        return local

    return on_call


# ---------------------------------------------------------------------------------------------


def check_result(value, k, line_hint):
    def in_domain(v):
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= _plain(v) < k
    if isinstance(value, (list, tuple)):
        for v in value:
            if not in_domain(v):
                raise Failed(f"the function returned {v!r} in its list, outside the domain "
                             f"0..{k - 1} (K = {k})")
        return
    if isinstance(value, bool) or not in_domain(value):
        raise Failed(f"the function returned {value!r}: neither a list nor a number of the "
                     f"domain 0..{k - 1} (K = {k})")


def call_user(function, args):
    try:
        return function(*args)
    except Unsupported:
        raise
    except RecursionError:
        raise Failed("the function recursed too deeply")
    except (Exception, SystemExit) as e:  # exit() ends the tracer too: a failure of the function
        tb = e.__traceback__
        line = 0
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == REC.source_path:
                line = tb.tb_lineno
            tb = tb.tb_next
        said = f": {e}" if str(e) else ""  # a bare `raise SystemExit` says nothing
        raise Failed(f"the function raised {type(e).__name__} at line {line}{said} "
                     f"(input {[[_plain(v) for v in a] for a in args]})")


def trace_runs(function, arity, loop_lines, inputs, k):
    runs = []
    for lists in inputs:
        REC.reset()
        args = []
        for which, values in enumerate(lists[:arity]):
            args.append(TracedList([REC.leaf(v, which, i) for i, v in enumerate(values)], which))
        sys.settrace(make_tracer(loop_lines))
        try:
            result = call_user(function, args)
        finally:
            sys.settrace(None)
        check_result(result, k, 0)
        if isinstance(result, (list, tuple)):
            out = {"list": [REC.ref(v) for v in result]}
        else:
            out = {"value": REC.ref(result)}
        runs.append({"input": [[_plain(v) for v in l] for l in lists[:arity]], "nodes": REC.nodes,
                     "branches": REC.branches, "iters": REC.iters, "lists": REC.lists,
                     "reads": REC.reads, "calls": REC.calls, "result": out})
    return runs


def plain_runs(function, arity, inputs, k):
    outputs = []
    for lists in inputs:
        result = call_user(function, [list(l) for l in lists[:arity]])
        check_result(result, k, 0)
        outputs.append([_plain(v) for v in result] if isinstance(result, (list, tuple))
                       else _plain(result))
    return outputs


def main(argv):
    global REC
    parser = argparse.ArgumentParser(prog="engram_tracer")
    parser.add_argument("mode", choices=["trace", "run"])
    parser.add_argument("--source", required=True)
    parser.add_argument("--function", required=True)
    parser.add_argument("--k", type=int, required=True)
    parser.add_argument("--inputs", required=True)
    a = parser.parse_args(argv)
    REC = Recorder(a.source)
    global REAL_STDOUT
    REAL_STDOUT = sys.stdout
    sys.stdout = sys.stderr  # what the module prints must not mix with the JSON
    try:
        with open(a.inputs) as f:
            inputs = json.load(f)["inputs"]
        # The stdlib's folds, replaced before the user's module imports them.
        functools.reduce = traced_reduce
        itertools.accumulate = traced_accumulate
        function, arity, loop_lines = load_function(a.source, a.function)
        if a.mode == "run":
            report = {"outputs": plain_runs(function, arity, inputs, a.k)}
        else:
            report = {"function": a.function, "k": a.k, "arity": arity,
                      "runs": trace_runs(function, arity, loop_lines, inputs, a.k)}
    except Unsupported as e:
        print(f"{os.path.basename(a.source)}: {e}", file=sys.stderr)
        return EXIT_UNSUPPORTED
    except Failed as e:
        print(f"{os.path.basename(a.source)}: {e}", file=sys.stderr)
        return EXIT_FAILED
    json.dump(report, REAL_STDOUT, separators=(",", ":"))
    REAL_STDOUT.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
