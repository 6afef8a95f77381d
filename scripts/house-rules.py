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
  doc-intervals         every interval README.md and docs/*.md quote, "95% CI a to b" or "90% CI
                        a to b", is a row of some docs/examples/*/comparisons.csv, rounded as
                        quoted (or its negation, a shortfall quoted as such); a line that quotes another source says so with a comment
                        "<!-- not from a report: <why> -->"
  test-names            every test README.md and docs/*.md name as `Suite.Name` (a suite that
                        tests/ defines) is a test of tests/: a doc that cites a renamed test as its
                        evidence points at nothing

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
    # model.name's enum is written into the schema at build time from the registry's X(name) lines.
    registry = (ROOT / "lib/ddplab/models/models.cpp").read_text()
    found.update(re.findall(r"^  X\(([a-z0-9_]+)\)", registry, re.M))
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


# A quoted interval: "95% CI -4.01 to -1.73", "(90% CI −0.48 to +0.29", "(95% CI 1.7-4.0".
NUMBER = r"[−+-]?\d+(?:\.\d+)?"
QUOTED_CI = re.compile(rf"(9[05])% CI ({NUMBER})(?: to |–|-)({NUMBER})")
NOT_FROM_A_REPORT = "<!-- not from a report"
# t quantiles 0.95 and 0.975 for df 1-30: a paired row's 90% interval from its 95% one when the
# CSV predates the ci90 columns.
T95 = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
       1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697]
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def number(text):
    return float(text.replace("−", "-"))


def report_intervals():
    """(level, low, high) of every comparison row of docs/examples/*/comparisons.csv."""
    import csv
    out = []
    for path in sorted((ROOT / "docs" / "examples").glob("*/comparisons.csv")):
        for row in csv.DictReader(path.open()):
            if not row.get("ci95_low"):
                continue
            low, high = float(row["ci95_low"]), float(row["ci95_high"])
            out.append((95, low, high))
            if row.get("ci90_low"):
                out.append((90, float(row["ci90_low"]), float(row["ci90_high"])))
            elif row.get("method") == "paired by seed" and 2 <= int(row["n_pairs"]) <= 31:
                df = int(row["n_pairs"]) - 1
                diff, half = float(row["diff_pts"]), (high - low) / 2 * T95[df - 1] / T975[df - 1]
                out.append((90, diff - half, diff + half))
    return out


def matches(quote, interval):
    level, low_text, high_text = quote
    decimals = max(len(t.split(".")[1]) if "." in t else 0 for t in (low_text, high_text))
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    low, high = number(low_text), number(high_text)
    # A - B quoted as the shortfall B - A ("worse by 2.9 points (95% CI 1.7-4.0)") is the same interval.
    return int(level) == interval[0] and any(abs(low - a) <= tolerance and abs(high - b) <= tolerance
                                             for a, b in ((interval[1], interval[2]), (-interval[2], -interval[1])))


def doc_intervals():
    intervals = report_intervals()
    bad = []
    for path in [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")):
        for i, line in enumerate(path.read_text().splitlines()):
            if NOT_FROM_A_REPORT in line:
                continue
            for quote in QUOTED_CI.findall(line):
                if not any(matches(quote, iv) for iv in intervals):
                    bad.append(f"{path.relative_to(ROOT)}:{i + 1}: the {quote[0]}% interval {quote[1]} to {quote[2]} "
                               f"is in no comparisons.csv of docs/examples (rounded as quoted); regenerate the "
                               f"number from the report, or mark the line '{NOT_FROM_A_REPORT}: <why> -->'")
    return bad


TEST_DEFINITION = re.compile(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)")
CITED_TEST = re.compile(r"`([A-Z]\w+)\.([A-Z]\w+)`")


def test_names():
    tests = set()
    for path in (ROOT / "tests").rglob("*.cpp"):
        tests.update(TEST_DEFINITION.findall(path.read_text()))
    suites = {suite for suite, _ in tests}
    bad = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, line in enumerate(path.read_text().splitlines()):
            for suite, name in CITED_TEST.findall(line):
                if suite in suites and (suite, name) not in tests:
                    bad.append(f"{path.relative_to(ROOT)}:{i + 1}: names the test {suite}.{name}, which tests/ "
                               f"does not define (renamed or removed?)")
    return bad


RULES = {"folder-names": folder_names, "function-length": function_length, "formatting": formatting,
         "settings-as-strings": settings_as_strings, "spec-pointers": spec_pointers, "doc-intervals": doc_intervals, "test-names": test_names}


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
