"""code_text.py: the code of a source file without its comments, so that stale.py can tell a
change to what runs from a change to what a file says about itself (standard library only).

code_of(path, text) is a string that two versions of a file share exactly when they differ only
in comments, docstrings and layout that the language ignores; None where the file's language is
not one of these, or where it cannot be read with certainty (then the whole text counts):
- Python (.py): the syntax tree without docstrings (comments and layout never reach it).
- C, C++ and CUDA (.c .cc .cpp .cxx .h .hh .hpp .cu .cuh .inl): the token sequence. Comments
  and runs of blanks and line breaks count only where they keep two words (or literals) or two
  punctuation characters apart, or inside a preprocessor directive, whose line break counts too.
  String and character literals (raw strings included) are tokens, read whole.
- Shell (.sh, .bash): each line without its comment (`#` at the start of a word, outside quotes),
  blank lines dropped; lines inside a quoted string or a here-document are kept as they are.
- CMake (CMakeLists.txt, .cmake): the same, with CMake's quoting; a file with bracket arguments
  or bracket comments (`[[`, `[=[`) is not read (None).
The readings err towards "changed": a layout change the language ignores but the reading does not
(a line broken in shell, a space between tokens in C++) counts as a change.
"""
import ast
import os
import re

C_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".inl"}
SHELL_SUFFIXES = {".sh", ".bash"}

# One C/C++ lexeme: a comment, a raw string, a string or character literal (with an encoding
# prefix), a line continuation, a run of blanks, or any other character.
C_LEXEME = re.compile(r"""
    (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^ ()\\\t\n]{0,16})\(.*?\)(?P=delim)")
  | (?P<literal>(?:u8|[uUL])?(?:"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<blank>[ \t\r\f\v]+)
  | (?P<newline>\n)
  | (?P<word>\w+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


def _python_code(text):
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _c_code(text):
    text = text.replace("\\\r\n", "").replace("\\\n", "")  # continuations join lines first
    out, kinds, gap, directive, line_start, pos = [], [], False, False, True, 0
    while pos < len(text):
        m = C_LEXEME.match(text, pos)
        if m.group("block_comment") is None and text.startswith("/*", pos):
            return None  # a comment that never closes: not C as the compiler reads it
        pos = m.end()
        kind = m.lastgroup
        if kind in ("line_comment", "block_comment", "blank"):
            gap = True
            continue
        if kind == "newline":
            if directive:
                out.append("\n")
                kinds.append("newline")
            else:
                gap = True
            directive, line_start = False, True
            continue
        # A gap between tokens matters where it keeps two apart (`int x`, `- -`, `"a" _s`), and
        # anywhere in a directive (`#define F (x)` is no function-like macro).
        word = kind in ("word", "literal", "raw")
        if gap and kinds and kinds[-1] != "newline":
            before = kinds[-1] in ("word", "literal", "raw")
            if directive or before == word:
                out.append(" ")
                kinds.append("blank")
        gap = False
        lexeme = m.group(0)
        if line_start and lexeme == "#":
            directive = True
        line_start = False
        out.append(lexeme)
        kinds.append(kind)
    return "".join(out)


HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def _shell_like_code(text, cmake):
    """Lines without comments for shell (cmake=False) or CMake (cmake=True); None when CMake's
    bracket syntax appears."""
    if cmake and re.search(r"\[=*\[", text):
        return None
    out, quote, heredocs, in_heredoc = [], None, [], None
    for line in text.split("\n"):
        if in_heredoc is not None:
            out.append(line)
            if (line.lstrip("\t") if in_heredoc[1] else line) == in_heredoc[0]:
                in_heredoc = heredocs.pop(0) if heredocs else None
            continue
        started_in_quote = quote is not None
        code, i, prev = [], 0, " "
        while i < len(line):
            c = line[i]
            if quote is None:
                if c == "#" and (prev.isspace() or prev in ";|&()" or i == 0):
                    break  # a comment, to the end of the line
                if c == "\\" and not cmake:
                    code.append(line[i:i + 2])
                    prev, i = "x", i + 2
                    continue
                if c == '"' or (c == "'" and not cmake):
                    quote = c
                if not cmake and line.startswith("<<", i) and not line.startswith("<<<", i):
                    found = HEREDOC.match(line, i)
                    if found:
                        heredocs.append((found.group(2), line.startswith("<<-", i)))
            elif c == "\\" and quote == '"':
                code.append(line[i:i + 2])
                prev, i = "x", i + 2
                continue
            elif c == quote:
                quote = None
            code.append(c)
            prev = c
            i += 1
        kept = "".join(code) if started_in_quote or quote is not None else "".join(code).rstrip()
        if started_in_quote or quote is not None or kept.strip():
            out.append(kept)
        if quote is None and heredocs:
            in_heredoc = heredocs.pop(0)
    return "\n".join(out)


def code_of(path, text):
    """The code of `text`, the content of a file named `path`, without its comments (see the
    module's docstring), or None where the whole text counts."""
    name = os.path.basename(path)
    suffix = os.path.splitext(name)[1].lower()
    if suffix == ".py":
        return _python_code(text)
    if suffix in C_SUFFIXES:
        return _c_code(text)
    if suffix in SHELL_SUFFIXES:
        return _shell_like_code(text, cmake=False)
    if name == "CMakeLists.txt" or suffix == ".cmake":
        return _shell_like_code(text, cmake=True)
    return None
