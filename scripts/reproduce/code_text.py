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

# A backslash at a line's end, blanks after it allowed (GCC and Clang read it so).
CONTINUATION = re.compile(r"\\[ \t]*\r?\n")
# Characters that join into other operators when no blank parts them (`- -` is not `--`).
OPERATOR = set("+-*/%&|^<>=!:.#")
# Lexemes that a blank must keep apart from each other (`int x`, `"a" _s`).
WORDS = ("word", "literal", "raw")
# One C/C++ lexeme: a comment, a raw string, a string or character literal (with an encoding
# prefix), a line continuation, a run of blanks, or any other character.
C_LEXEME = re.compile(r"""
    (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^ ()\\\t\n]{0,16})\(.*?\)(?P=delim)")
  | (?P<literal>(?:u8|[uUL])?(?:"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<blank>[ \t\r\f\v]+)
  | (?P<newline>\n)
  | (?P<word>\d\w*(?:'\w+)*|\w+)
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
    shebang = text.split("\n", 1)[0] if text.startswith("#!") else ""
    return shebang + "\n" + ast.dump(tree)


def _c_code(text):
    text = CONTINUATION.sub("", text)  # continuations join lines first, as the compilers do
    out, last, gap, directive, line_start, pos = [], None, False, False, True, 0
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
                last = "newline"
            else:
                gap = True
            directive, line_start = False, True
            continue
        # A gap between tokens matters where it keeps two apart (`int x`, `- -`, `"a" _s`), and
        # anywhere in a directive (`#define F (x)` is no function-like macro).
        lexeme = m.group(0)
        if gap and last not in (None, "newline"):
            word, before = kind in WORDS, last in WORDS
            if directive or (word and before) or (lexeme in OPERATOR and out[-1] in OPERATOR):
                out.append(" ")
        gap = False
        if line_start and lexeme == "#":
            directive = True
        line_start = False
        out.append(lexeme)
        last = kind
    return "".join(out)


# A here-document's operator and its delimiter: quoted ('EOF', "END-X"), escaped (\EOF) or a word.
HEREDOC = re.compile(r"""<<(-?)[ \t]*(?:(['"])(.*?)\2|\\?([^\s;&|<>()'"`]+))""")
NEVER = object()  # the delimiter of a here-document whose operator could not be read


def _shell_like_code(text, cmake):
    """Lines without comments for shell (cmake=False) or CMake (cmake=True); None when CMake's
    bracket syntax appears. Kept as they are: lines inside quotes (', ", `, $'...') or a
    here-document, the first line where it is a #! line, and a line that continues one ending
    in a backslash (bash joins the two, so that a comment or a blank line there ends the
    command). A line ending in a backslash keeps its trailing blanks (`\\ ` escapes a space)."""
    if cmake and re.search(r"\[=*\[", text):
        return None
    out, quote, braces, heredocs, in_heredoc, continued = [], None, 0, [], None, False
    for number, line in enumerate(text.split("\n")):
        if in_heredoc is not None:
            out.append(line)
            if in_heredoc[0] is not NEVER and \
                    (line.lstrip("\t") if in_heredoc[1] else line) == in_heredoc[0]:
                in_heredoc = heredocs.pop(0) if heredocs else None
            continue
        if continued or (number == 0 and line.startswith("#!")):
            verbatim = True
        else:
            verbatim = quote is not None
        code, i, prev, continued = [], 0, " ", False
        while i < len(line):
            c = line[i]
            if quote is None:
                if c == "#" and braces == 0 and (prev.isspace() or prev in ";|&()" or i == 0):
                    break  # a comment, to the end of the line
                if c == "\\" and not cmake:
                    continued = i == len(line) - 1
                    code.append(line[i:i + 2])
                    prev, i = "x", i + 2
                    continue
                if not cmake and line.startswith("${", i):
                    braces += 1
                elif not cmake and c == "}" and braces > 0:
                    braces -= 1
                if not cmake and line.startswith("$'", i):
                    quote = "$'"
                    code.append("$'")
                    prev, i = "'", i + 2
                    continue
                if c == '"' or (not cmake and c in "'`"):
                    quote = c
                if not cmake and line.startswith("<<", i) and not line.startswith("<<<", i):
                    found = HEREDOC.match(line, i)
                    delimiter = (found.group(3) if found.group(2) else found.group(4)) \
                        if found else NEVER
                    heredocs.append((delimiter, bool(found and found.group(1))))
            elif c == "\\" and quote in ('"', "`", "$'"):
                continued = quote != "$'" and i == len(line) - 1
                code.append(line[i:i + 2])
                prev, i = "x", i + 2
                continue
            elif c == quote[-1]:
                quote = None
            code.append(c)
            prev = c
            i += 1
        kept = line if verbatim else "".join(code)
        if not (verbatim or quote is not None or kept.rstrip().endswith("\\")):
            kept = kept.rstrip()
        if verbatim or quote is not None or kept.strip():
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
