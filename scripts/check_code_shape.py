#!/usr/bin/env python3
"""Checks the shape of the code: short functions in the engine, long files explained.

Rule 1 (--functions FOLDER...): no function in the folders' production code (not *_test.cc, not
test helpers) is longer than MAX_FUNCTION_LINES, counted from the line of its opening brace to
the line of its closing brace. Free and member functions count; a lambda is part of the function
that holds it. Found by a brace-depth scan that skips comments, strings and character literals.

Rule 2 (--long-files FOLDER...): a .cc/.h file over MAX_FILE_LINES lines says why in a comment
line starting with `// Long file:` within its first REASON_WITHIN lines.

  check_code_shape.py [REPO_ROOT] [--functions FOLDER...] [--long-files FOLDER...]
      exit 0 when the folders keep the shape, 1 naming each breach. Without folders, rule 1
      checks placement/ and rule 2 every folder check_layering.py scans.
"""
import argparse
import os
import re
import sys

from check_layering import SOURCE_DIRS, sources

MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500
REASON_WITHIN = 40
REASON = "// Long file:"

# Heads of braces that open a scope holding functions rather than a function body.
NAMESPACE_HEAD = re.compile(r'^(inline\s+)?namespace\b|^extern\s+"C"')
CLASS_HEAD = re.compile(r'^(template\s*<.*>\s*)?(class|struct|union|enum)\b', re.S)
FUNCTION_NAME = re.compile(r'([~\w:]+(?:<[^()]*>)?|operator\s*[^\s(]+)\s*\(')


def strip_code(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            j = text.find(")" + delimiter + '"', open_paren)
            j = n if j < 0 else j + len(delimiter) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(text, limit=MAX_FUNCTION_LINES):
    """(name, first line, line count) of each function body longer than `limit` lines."""
    code = strip_code(text)
    found = []
    # One entry per open brace: "scope" (namespace / class: functions may start inside),
    # "function" (a body: everything inside is part of it) or "other" (an initializer).
    stack = []
    head_start = 0
    line = 1
    starts = []  # (stack depth, line, name) of the function bodies open now
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = " ".join(code[head_start:i].split())
            inside_function = any(kind == "function" for kind in stack)
            if inside_function:
                kind = "other"
            elif NAMESPACE_HEAD.match(head) or CLASS_HEAD.match(head):
                kind = "scope"
            elif ")" in head and not head.endswith("="):
                kind = "function"
                name = FUNCTION_NAME.search(head)
                starts.append((len(stack), line, name.group(1) if name else head[:40]))
            else:
                kind = "other"
            stack.append(kind)
            head_start = i + 1
        elif c == "}":
            if stack:
                stack.pop()
            if starts and starts[-1][0] == len(stack):
                _, first, name = starts.pop()
                if line - first + 1 > limit:
                    found.append((name, first, line - first + 1))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
        elif c == ":" and code.startswith(("public:", "private:", "protected:"), max(0, i - 9)):
            head_start = i + 1
    return found


def has_reason(text):
    return any(line.startswith(REASON) for line in text.splitlines()[:REASON_WITHIN])


def check(root, function_folders=("placement",), file_folders=tuple(SOURCE_DIRS)):
    """Returns one message per breach."""
    problems = []
    for path, text in sources(root, function_folders, production_only=True):
        for name, first, count in long_functions(text):
            problems.append(f"{path}:{first}: {name} is {count} lines; at most {MAX_FUNCTION_LINES}: "
                            "split it into named steps")
    for path, text in sources(root, file_folders, production_only=False):
        count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if count > MAX_FILE_LINES and not has_reason(text):
            problems.append(f"{path}: {count} lines without a `{REASON}` comment line in its first "
                            f"{REASON_WITHIN} lines saying why it stays over {MAX_FILE_LINES}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--functions", nargs="+", default=["placement"], metavar="FOLDER")
    parser.add_argument("--long-files", nargs="+", default=SOURCE_DIRS, metavar="FOLDER")
    args = parser.parse_args()
    problems = check(os.path.abspath(args.root), args.functions, args.long_files)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} code shape problem(s); the rules are in scripts/check_code_shape.py")
        return 1
    print(f"code shape: functions in {', '.join(args.functions)} at most {MAX_FUNCTION_LINES} lines; "
          f"long files in {', '.join(args.long_files)} say why")
    return 0


if __name__ == "__main__":
    sys.exit(main())
