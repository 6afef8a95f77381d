#!/usr/bin/env python3
"""Lists the functions in lib/ and app/ longer than a limit (default 80 lines), longest first.

A function is a definition that starts at column 0 (namespace scope, as this project writes them)
or is indented inside a class body, and ends at the brace that closes it. Lambdas count toward the
function that holds them. Exit code 1 when any function is over the limit, so CI can run it:

    scripts/function-lengths.py            # the offenders
    scripts/function-lengths.py --all 40   # every function over 40 lines
"""
import pathlib
import re
import sys

HEAD = re.compile(r"^(\s*)[A-Za-z_][\w:<>,*&\s~]*\b(operator\S*|[\w~]+)\s*\([^;]*$")


def functions(path):
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = HEAD.match(lines[i])
        if not m or lines[i].lstrip().startswith(("if ", "for ", "while ", "switch ", "return ", "else")):
            i += 1
            continue
        # Find the opening brace of the body within a few lines (the signature may wrap).
        j = i
        while j < len(lines) and j < i + 8 and "{" not in lines[j] and ";" not in lines[j]:
            j += 1
        if j >= len(lines) or "{" not in lines[j] or ";" in lines[j].split("{")[0]:
            i += 1
            continue
        depth = 0
        k = j
        while k < len(lines):
            code = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'|//.*', "", lines[k])
            depth += code.count("{") - code.count("}")
            if depth <= 0:
                break
            k += 1
        yield m.group(2), i + 1, k - i + 1
        i = k + 1


def main():
    args = sys.argv[1:]
    limit = 80
    if args and args[0] == "--all":
        args = args[1:]
    if args:
        limit = int(args[0])
    root = pathlib.Path(__file__).resolve().parent.parent
    found = []
    for path in sorted(list((root / "lib").rglob("*.cpp")) + list((root / "app").rglob("*.cpp"))):
        for name, line, length in functions(path):
            if length > limit:
                found.append((length, f"{path.relative_to(root)}:{line}", name))
    for length, where, name in sorted(found, reverse=True):
        print(f"{length:4d} lines  {where}  {name}")
    if found:
        print(f"{len(found)} function(s) over {limit} lines", file=sys.stderr)
        return 1
    print(f"no function in lib/ or app/ over {limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
