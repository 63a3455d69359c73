#!/usr/bin/env python3
"""code_text_test.py SOURCE_DIR: scripts/reproduce/code_text.py's code_of, which stale.py uses so
that a change to comments alone leaves a result current. Each case is a file's two versions and
whether they hold the same code: comments, docstrings and blank lines changed (same), and the
changes that look like comments but run (different): a `#` or `//` inside a string, a line of a
here-document or of a multi-line string, `${#x}`, a preprocessor line break, a raw string, a
space that parts two tokens; a line broken elsewhere in C++ (clang-format's) is the same code."""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "scripts",
                                "reproduce"))
from code_text import code_of  # noqa: E402

SAME, DIFFERENT = True, False
CASES = [
    # (name, path, before, after, expected)
    ("py comment", "a.py", "x = 1  # one\n", "x = 1  # uno\n\n\n", SAME),
    ("py docstrings", "a.py", '"""Mod."""\ndef f():\n    """F."""\n    return 1\n',
     '"""Module."""\ndef f():\n    """Does f."""\n    return 1\n', SAME),
    ("py only a docstring", "a.py", 'def f():\n    """F."""\n', 'def f():\n    """G."""\n', SAME),
    ("py code", "a.py", "x = 1\n", "x = 2\n", DIFFERENT),
    ("py string that is not a docstring", "a.py", 'x = 1\n"a"\n', 'x = 1\n"b"\n', DIFFERENT),
    ("py hash in a string", "a.py", 'x = "# a"\n', 'x = "# b"\n', DIFFERENT),
    ("py that does not parse", "a.py", "x = (\n", "x = (  # c\n", DIFFERENT),
    ("c++ comments", "a.cpp", "int f() { return 1; }  // one\n/* a */\n",
     "// header\nint f() {\n  return 1;  /* uno */\n}\n", SAME),
    ("c++ code", "a.h", "int f() { return 1; }\n", "int f() { return 2; }\n", DIFFERENT),
    ("c++ slashes in a string", "a.cu", 'auto s = "a // b";\n', 'auto s = "a // c";\n',
     DIFFERENT),
    ("c++ comment opener in a string", "a.cc", 'auto s = "/*"; int x;\n',
     'auto s = "/*"; int y;\n', DIFFERENT),
    ("c++ raw string", "a.cpp", 'auto s = R"(x // y)";\n', 'auto s = R"(x // z)";\n', DIFFERENT),
    ("c++ directive ends at the line", "a.h", "#define A 1\nint x;\n", "#define A 1 int x;\n",
     DIFFERENT),
    ("c++ directive comment", "a.h", "#define A 1  // one\n", "#define A 1  /* uno */\n", SAME),
    ("c++ layout", "a.cpp", 'f("a", b,\n  c);\n', 'f(\n    "a", b, c);\n', SAME),
    ("c++ function-like macro", "a.h", "#define F(x) x\n", "#define F (x) x\n", DIFFERENT),
    ("c++ literal suffix", "a.cpp", 'auto s = "a"_s;\n', 'auto s = "a" _s;\n', DIFFERENT),
    ("c++ brackets apart", "a.cpp", "f( {1});\nx = g() ->y;\n", "f({1});\nx = g()->y;\n", SAME),
    ("c++ digit separator", "a.cpp", "int n = 1'000; auto s = \"it's // x\"; int y = 2;\n",
     "int n = 1'000; auto s = \"it's // x\"; int y = 3;\n", DIFFERENT),
    ("c++ blank after a comment's backslash", "a.cpp", "// note \\ \nint x = 1;\n",
     "// note \\ \nint x = 2;\n", SAME),
    ("c++ code after a comment's backslash", "a.cpp", "// note \\ \nint x = 1;\n",
     "// note\nint x = 1;\n", DIFFERENT),
    ("c++ tokens joined", "a.cpp", "int x = a - -b;\n", "int x = a --b;\n", DIFFERENT),
    ("c++ unclosed comment", "a.cpp", "int x; /* a\n", "int x; /* b\n", DIFFERENT),
    ("sh comments", "a.sh", "#!/bin/bash\n# one\nx=1  # set x\n\necho \"$x\"\n",
     "#!/bin/bash\n# uno\nx=1\necho \"$x\"  # print it\n", SAME),
    ("sh code", "a.sh", "x=1\n", "x=2\n", DIFFERENT),
    ("sh hash in quotes", "a.sh", "echo '# a'\n", "echo '# b'\n", DIFFERENT),
    ("sh length of a variable", "a.sh", "echo ${#x}\n", "echo ${#y}\n", DIFFERENT),
    ("sh argument count", "a.sh", "echo $# a\n", "echo $# b\n", DIFFERENT),
    ("sh here-document", "a.sh", "cat << 'EOF'\n# a\nEOF\n", "cat << 'EOF'\n# b\nEOF\n",
     DIFFERENT),
    ("sh after a here-document", "a.sh", "cat << EOF\nx\nEOF\n# a\n",
     "cat << EOF\nx\nEOF\n# b\n", SAME),
    ("sh multi-line string", "a.sh", "python3 -c \"\n# a\nprint(1)\"\n",
     "python3 -c \"\n# b\nprint(1)\"\n", DIFFERENT),
    ("sh apostrophe in a comment", "a.sh", "x=1  # don't\n# a\n", "x=1  # do not\n# b\n", SAME),
    ("sh comment in a continued command", "a.sh", "cmake a \\\n  # -DX=ON \\\n  -DY=1\n",
     "cmake a \\\n  -DY=1\n", DIFFERENT),
    ("sh blank line in a continued command", "a.sh", "cmake a \\\n\n  -DY=1\n",
     "cmake a \\\n  -DY=1\n", DIFFERENT),
    ("sh blank after a backslash", "a.sh", "cmd a \\ \n  --b\n", "cmd a \\\n  --b\n", DIFFERENT),
    ("sh continued word", "a.sh", "echo a\\\n#b\n", "echo a\\\n#c\n", DIFFERENT),
    ("sh pattern in a parameter", "a.sh", "y=${x%% #*}; echo 1\n", "y=${x%% #*}; echo 2\n",
     DIFFERENT),
    ("sh backquotes", "a.sh", "x=`echo a #b`; echo 1\n", "x=`echo a #b`; echo 2\n", DIFFERENT),
    ("sh ansi-c quotes", "a.sh", "x=$'a\\'b # c'; echo 1\n", "x=$'a\\'b # c'; echo 2\n",
     DIFFERENT),
    ("sh escaped here-document", "a.sh", "cat <<\\EOF\n# a\nEOF\n", "cat <<\\EOF\n# b\nEOF\n",
     DIFFERENT),
    ("sh here-document with a dash", "a.sh", "cat <<'END-X'\n# a\nEND-X\n",
     "cat <<'END-X'\n# b\nEND-X\n", DIFFERENT),
    ("sh here-document then a comment", "a.sh", "cat <<'END-X'\nx\nEND-X\n# a\n",
     "cat <<'END-X'\nx\nEND-X\n# b\n", SAME),
    ("sh shebang", "a.sh", "#!/bin/bash -e\nx=1\n", "#!/bin/bash\nx=1\n", DIFFERENT),
    ("py shebang", "a.py", "#!/usr/bin/python3 -O\nx = 1\n", "#!/usr/bin/python3\nx = 1\n",
     DIFFERENT),
    ("cmake comments", "CMakeLists.txt", "# a\nadd_library(x a.cpp)  # the lib\n",
     "# b\nadd_library(x a.cpp)\n", SAME),
    ("cmake code", "CMakeLists.txt", "add_library(x a.cpp)\n", "add_library(x b.cpp)\n",
     DIFFERENT),
    ("cmake multi-line string", "x.cmake", 'file(WRITE f "\n# a\n")\n', 'file(WRITE f "\n# b\n")\n',
     DIFFERENT),
    ("cmake bracket comment", "CMakeLists.txt", "#[[ a ]]\nset(x 1)\n", "#[[ b ]]\nset(x 1)\n",
     DIFFERENT),
    ("other files count whole", "a.json", '{"a": 1}\n', '{"a": 1} \n', DIFFERENT),
]


def main():
    failed = 0
    for name, path, before, after, expected in CASES:
        a, b = code_of(path, before), code_of(path, after)
        same = a is not None and a == b
        if same != expected:
            failed += 1
            print(f"FAIL: {name}: read as {'the same' if same else 'different'} code, expected "
                  f"{'the same' if expected else 'different'}\n  {a!r}\n  {b!r}")
        else:
            print(f"ok: {name}")
    print(f"{len(CASES) - failed} of {len(CASES)} cases as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
