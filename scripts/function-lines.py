#!/usr/bin/env python3
"""Prints the longest functions of C++ sources: lines from a function body's opening brace to its
closing one, for bodies of functions and lambdas (a brace after `)`, optionally followed by
const/noexcept/override/-> type). Usage: function-lines.py [--max N] FILE...; exits 1 when a
function is longer than N lines."""
import re
import sys


def strip(text):
    """Comments, string and character literals (raw strings included) blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end])); i = end
        elif c in "\"'":
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    text = strip(open(path).read())
    stack = []  # (is_function, line, name)
    found = []
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            before = text[max(0, i - 300):i]
            m = re.search(r"\)\s*(const|noexcept|override|mutable|\s|->\s*[\w:<>,\s*&]+)*$", before)
            name = ""
            if m:
                head = before[:m.start()]
                depth, k = 0, len(head)
                # find the matching '(' of the parameter list, then the name before it
                for k in range(len(head) - 1, -1, -1):
                    if head[k] == ")": depth += 1
                    elif head[k] == "(":
                        if depth == 0: break
                        depth -= 1
                nm = re.search(r"([\w:~<>\[\]=]+)\s*$", head[:k])
                name = nm.group(1) if nm else "?"
                if name in ("if", "for", "while", "switch", "catch"):
                    m = None
            stack.append((m is not None, line, name))
        elif c == "}" and stack:
            is_function, start, name = stack.pop()
            if is_function:
                found.append((line - start + 1, start, name))
    return found


def main(argv):
    limit = None
    if argv[:1] == ["--max"]:
        limit, argv = int(argv[1]), argv[2:]
    worst = []
    for path in argv:
        for lines, start, name in functions(path):
            worst.append((lines, f"{path}:{start}", name))
    worst.sort(reverse=True)
    for lines, where, name in worst[:10]:
        print(f"{lines:5d} lines  {where}  {name}")
    over = [w for w in worst if limit is not None and w[0] > limit]
    if limit is not None:
        print(f"{len(worst)} functions and lambdas; {len(over)} over {limit} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
