#!/usr/bin/env python3
"""Checks the house rules of docs/architecture.md that a compiler does not check.

    scripts/house-rules.py                 every rule
    scripts/house-rules.py folder-names    one rule (folder-names, function-length,
                                           formatting, settings-as-strings)

  folder-names          no folder named dist, build, out, spec or test in the source tree
                        (names conventions reserve for build output or tests)
  function-length       no function in lib/ or app/ over 80 lines (scripts/function-lengths.py)
  formatting            lib/ and app/ format with fmt: a line with std::to_string, (s)(n)printf or an
                        ostringstream carries a comment "not fmt: <why>" on it or the line before
  settings-as-strings   outside lib/ddplab/config/, nothing compares a value to the spelling of a
                        schema enum or a run status ("simulated", "done", ...): settings are enums
  spec-pointers         outside lib/ddplab/config/, no string starts a message with a spec JSON
                        pointer ("/batch: ..."): such errors are made by config::spec_error()
                        (config/spec_error.h), so the config layer spells every one

Prints each violation as path:line: what; exit code 1 if there is any. ctest runs each rule as
HouseRules.<rule> (tests/CMakeLists.txt).
"""
import importlib.util
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESERVED = {"dist", "build", "out", "spec", "test"}
SOURCE_DIRS = ["lib", "app", "tests", "bench", "scripts", "experiments", "docs", "third_party", "data"]
STATUSES = {"running", "done", "failed", "interrupted", "diverged"}


def sources(*dirs):
    for d in dirs:
        yield from sorted(p for p in (ROOT / d).rglob("*") if p.suffix in (".cpp", ".h") and p.is_file())


def folder_names():
    bad = []
    for d in SOURCE_DIRS:
        for p in (ROOT / d).rglob("*"):
            if p.is_dir() and p.name in RESERVED and "corpus" not in p.parts:
                bad.append(f"{p.relative_to(ROOT)}: a folder named '{p.name}' (reserved for build output or tests)")
    return bad


def function_length():
    spec = importlib.util.spec_from_file_location("function_lengths", ROOT / "scripts" / "function-lengths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bad = []
    for path in sources("lib", "app"):
        if path.suffix != ".cpp":
            continue
        for name, line, length in module.functions(path):
            if length > 80:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {name} is {length} lines (at most 80)")
    return bad


FORMATTING = re.compile(r"std::to_string\(|\bs?n?printf\(|std::ostringstream\b")


def formatting():
    bad = []
    for path in sources("lib", "app"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            code = line.split("//")[0]
            if FORMATTING.search(code) and "not fmt:" not in line and (i == 0 or "not fmt:" not in lines[i - 1]):
                bad.append(f"{path.relative_to(ROOT)}:{i + 1}: formats without fmt: {line.strip()[:100]}")
    return bad


def enum_spellings():
    schema = json.loads((ROOT / "lib/ddplab/config/schema.json").read_text())
    found = set()

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "enum" and isinstance(v, list):
                    found.update(x for x in v if isinstance(x, str))
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return found | STATUSES


def settings_as_strings():
    words = enum_spellings()
    pattern = re.compile(r'(==|!=)\s*"([^"]*)"|"([^"]*)"\s*(==|!=)')
    bad = []
    for path in sources("lib", "app"):
        if "lib/ddplab/config" in path.as_posix():
            continue
        for i, line in enumerate(path.read_text().splitlines()):
            code = line.split("//")[0]
            for m in pattern.finditer(code):
                word = m.group(2) if m.group(2) is not None else m.group(3)
                if word in words:
                    bad.append(f"{path.relative_to(ROOT)}:{i + 1}: compares with \"{word}\" as a string: {line.strip()[:100]}")
    return bad


# In a string literal, a JSON pointer followed by a colon: "/batch: ...", "run x: /a/{}/b: ...".
STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')
POINTER_MESSAGE = re.compile(r'(^|[\s(])/[a-z][A-Za-z0-9_]*(/[A-Za-z0-9_{}~]+)*:(\s|$)')


def names_a_pointer(line):
    return any(POINTER_MESSAGE.search(lit[1:-1]) for lit in STRING_LITERAL.findall(line.split("//")[0]))


def spec_pointers():
    bad = []
    for path in sources("lib", "app"):
        if "lib/ddplab/config" in path.as_posix():
            continue
        for i, line in enumerate(path.read_text().splitlines()):
            if names_a_pointer(line):
                bad.append(f"{path.relative_to(ROOT)}:{i + 1}: a message that names a spec pointer outside config "
                           f"(use config::spec_error): {line.strip()[:100]}")
    return bad


RULES = {"folder-names": folder_names, "function-length": function_length, "formatting": formatting,
         "settings-as-strings": settings_as_strings, "spec-pointers": spec_pointers}


def main():
    names = sys.argv[1:] or list(RULES)
    failed = False
    for name in names:
        if name not in RULES:
            print(f"house-rules: unknown rule '{name}'; rules: {', '.join(RULES)}", file=sys.stderr)
            return 2
        bad = RULES[name]()
        for b in bad:
            print(b)
        print(f"house-rules: {name}: {len(bad)} violation(s)" if bad else f"house-rules: {name}: ok")
        failed = failed or bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
