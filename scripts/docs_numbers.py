#!/usr/bin/env python3
"""Checks the numbers README.md and docs/*.md quote from the example folders against those folders'
committed files, exactly (at the precision quoted).

A quoted number names its source in an HTML comment right after it (invisible when rendered):

    the gap is −3.05 points<!-- = csv("seed_equal_steps_fashion/comparisons.csv", "diff_pts",
        "key=replicas.count & value_a=1 & value_b=2 & group_a~ema_decay=0,") -->

(on one line in a doc). A marker `<!-- = E1; E2; ... -->` checks the last k numbers before it on
its line (after the previous marker), k the number of expressions, in order. Each expression is
Python arithmetic over these readers, paths relative to docs/examples/:

  csv(path, column, where)   the column of the one row that `where` selects: "k=v & k2~v2"
                             (= equal, ~ contains); fails unless exactly one row matches
  row(path, where)           that one row, a dict (numbers as numbers)
  col(path, column, where)   the column of every row that `where` selects (where may be ""), a list
  md(path, regex)            the first group of regex in the file (a number; commas dropped);
                             fails unless it matches
  jsonl(path, key, where)    the key of every JSON line that `where` selects, a list
  mean, min, max, sum, len, abs, round, sorted, zip, sqrt

`<!-- let NAME = EXPR -->` names a value for the rest of its doc, so that a paragraph's markers
stay short: `<!-- let gap = row("seed_equal_steps_fashion/comparisons.csv", "...") -->` on a line of
its own, then `−3.05<!-- = gap["diff_pts"] -->`.

A quoted number matches when it equals the expression's value rounded to the quoted decimals
(thousands separators, a leading Unicode minus and a trailing % are read as such): 84.66% matches
0.8466 * 100, not 84.67. A quote without a sign does not match a negative value: write the
negation in the expression. A source must be a file git tracks under docs/examples/: a number
drawn from a run directory, a steps.jsonl or a manifest that is not committed has no source and
fails.

    scripts/docs_numbers.py              check every marker; exit 1 on any failure
    scripts/docs_numbers.py --list       also print each checked number and its value
    scripts/docs_numbers.py --unmarked   also list the numbers with a decimal point or % in sections
                                         that link an example folder and carry no marker (the
                                         numbers not yet drawn from the data; listed, not failed)

CI: .ci/run runs it before the build, ctest as `docs_numbers` (tests/CMakeLists.txt), and its own test
(tests/scripts/test_docs_numbers.py) shows that a wrong digit fails. Python 3 standard library only.
"""
import csv as csv_module
import json
import math
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
MARKER = re.compile(r"<!--\s*=\s*(.*?)\s*-->")
LET = re.compile(r"<!--\s*let\s+([A-Za-z_]\w*)\s*=\s*(.*?)\s*-->")
# A number as docs quote it: 92,427  −3.05  +0.65  84.66%  1.8e-5. A sign only where a number
# starts a word, so "190-293" and "223–293" are two numbers.
NUMBER = re.compile(r"(?:(?<![\w.,−+-])[−+-](?=\d))?(?<![\w.,])"
                    r"(?:\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?:\.\d+)?(?:e[−+-]?\d+)?%?")


class SourceError(Exception):
    pass


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z", "docs/examples"], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None  # not a git checkout (an exported tree): existence is all that can be checked
    return {p for p in out.stdout.decode().split("\0") if p}


class Sources:
    def __init__(self, tracked=None):
        self.tracked = tracked_files() if tracked is None else tracked
        self.cache = {}

    def path(self, rel):
        p = (EXAMPLES / rel).resolve()
        if EXAMPLES.resolve() not in p.parents:
            raise SourceError(f"{rel}: not under docs/examples")
        repo_rel = p.relative_to(ROOT).as_posix()
        if not p.is_file():
            raise SourceError(f"no source file: docs/examples/{rel} is not in the checkout")
        if self.tracked is not None and repo_rel not in self.tracked:
            raise SourceError(f"no source file: docs/examples/{rel} is not committed (git ls-files)")
        return p

    def text(self, rel):
        if rel not in self.cache:
            self.cache[rel] = self.path(rel).read_text()
        return self.cache[rel]

    def rows(self, rel):
        key = ("csv", rel)
        if key not in self.cache:
            self.cache[key] = list(csv_module.DictReader(self.text(rel).splitlines()))
        return self.cache[key]

    def json_lines(self, rel):
        key = ("jsonl", rel)
        if key not in self.cache:
            self.cache[key] = [json.loads(line) for line in self.text(rel).splitlines() if line.strip()]
        return self.cache[key]


def selects(row, where):
    for cond in (c.strip() for c in where.split("&") if c.strip()):
        m = re.match(r"([^=~]+?)\s*([=~])\s*(.*)$", cond)
        if not m:
            raise SourceError(f"bad condition '{cond}' (k=v or k~v)")
        k, op, v = m.groups()
        if k not in row:
            raise SourceError(f"no column '{k}'")
        cell = "" if row[k] is None else str(row[k])
        if (op == "=" and cell != v) or (op == "~" and v not in cell):
            return False
    return True


def value(x):
    if isinstance(x, (int, float)):
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        return x


def readers(sources):
    def col(path, column, where=""):
        rows = [r for r in sources.rows(path) if selects(r, where)]
        if rows and column not in rows[0]:
            raise SourceError(f"{path}: no column '{column}'")
        return [value(r[column]) for r in rows]

    def csv(path, column, where):
        found = col(path, column, where)
        if len(found) != 1:
            raise SourceError(f"{path}: '{where}' selects {len(found)} rows, not 1")
        return found[0]

    def row(path, where):
        rows = [r for r in sources.rows(path) if selects(r, where)]
        if len(rows) != 1:
            raise SourceError(f"{path}: '{where}' selects {len(rows)} rows, not 1")
        return {k: value(v) for k, v in rows[0].items()}

    def md(path, regex):
        m = re.search(regex, sources.text(path), re.M)
        if not m:
            raise SourceError(f"{path}: /{regex}/ matches nothing")
        return float((m.group(1) if m.groups() else m.group(0)).replace(",", "").replace("−", "-"))

    def jsonl(path, key, where=""):
        rows = [r for r in sources.json_lines(path) if selects({k: str(v) for k, v in r.items()}, where)]
        return [r[key] for r in rows]

    def mean(xs):
        xs = list(xs)
        if not xs:
            raise SourceError("mean of nothing")
        return sum(xs) / len(xs)

    return {"csv": csv, "col": col, "row": row, "md": md, "jsonl": jsonl, "mean": mean, "min": min, "max": max, "sum": sum,
            "len": len, "abs": abs, "round": round, "sorted": sorted, "zip": zip, "sqrt": math.sqrt}


def parse_quote(text):
    t = text.replace("−", "-").replace(",", "").rstrip("%")
    decimals = len(t.split(".")[1].split("e")[0]) if "." in t else 0
    return float(t), decimals, t.startswith(("-", "+"))


def matches(quoted, computed):
    q, decimals, _ = parse_quote(quoted)
    if "e" in quoted.lower():  # 1.8e-5: the quoted significant digits
        mantissa = quoted.lower().replace("−", "-").split("e")[0]
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        exp = math.floor(math.log10(abs(computed))) if computed else 0
        return abs(q - computed) <= 0.5 * 10 ** (exp - digits) * (1 + 1e-9)
    return abs(q - computed) <= 0.5 * 10 ** -decimals + 1e-9


def numbers_between(line, start, end):
    """The number tokens that lie in line[start:end], read with inline code and HTML comments masked
    (as word characters, so "44<!-- ... -->-251" is a range 44-251, not 44 and -251)."""
    masked = re.sub(r"`[^`]*`|<!--.*?-->", lambda m: "_" * len(m.group(0)), line)
    return [m.group(0) for m in NUMBER.finditer(masked) if m.start() >= start and m.end() <= end]


def split_expressions(text):
    """The marker's expressions, split at the semicolons outside string literals."""
    out, cur, quote, i = [], "", None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text):
                cur += text[i:i + 2]
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == ";":
            out.append(cur.strip())
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    out.append(cur.strip())
    return [e for e in out if e]


def check_text(name, text, sources, listing=None):
    env = readers(sources)
    bad, checked = [], 0
    for i, line in enumerate(text.splitlines(), 1):
        for m in LET.finditer(line):  # a name for the rest of the doc: <!-- let gap = row(...) -->
            try:
                env[m.group(1)] = eval(m.group(2), {"__builtins__": {}, **env})
            except Exception as e:
                bad.append(f"{name}:{i}: let {m.group(1)}: {type(e).__name__}: {e}")
        prev = 0
        for m in MARKER.finditer(line):
            exprs = split_expressions(m.group(1))
            quoted = numbers_between(line, prev, m.start())
            prev = m.end()
            where = f"{name}:{i}"
            if len(quoted) < len(exprs):
                bad.append(f"{where}: the marker has {len(exprs)} expression(s) but {len(quoted)} number(s) precede it")
                continue
            for q, expr in zip(quoted[len(quoted) - len(exprs):], exprs):
                try:
                    # The docs' own expressions (repository content); the readers as globals, so a
                    # comprehension in an expression sees them too.
                    v = eval(expr, {"__builtins__": {}, **env})  # noqa: S307
                    if not isinstance(v, (int, float)):
                        raise SourceError(f"value {v!r} is not a number")
                except SourceError as e:
                    bad.append(f"{where}: {q}: {e}")
                    continue
                except Exception as e:  # a typo in an expression
                    bad.append(f"{where}: {q}: cannot evaluate `{expr}`: {type(e).__name__}: {e}")
                    continue
                checked += 1
                if listing is not None:
                    listing.append(f"{where}: {q} = {v:.6g}")
                if not matches(q, v):
                    _, decimals, _ = parse_quote(q)
                    bad.append(f"{where}: quotes {q} but `{expr}` is {v:.6g} ({v:.{decimals}f} as quoted)")
    return bad, checked


FOLDER_LINK = re.compile(r"examples/([a-z0-9_]+)")
DECIMAL = re.compile(r"\d\.\d|\d%")


def unmarked(text):
    """(line, number) of each number with a decimal point or a % sign, in a section (from one
    heading to the next) that links an example folder, that no marker checks: the numbers still to
    be drawn from the data. A number a marker checks is one of the last k before it."""
    out, section, in_code = [], [], False
    lines = text.splitlines()

    def flush():
        if any(FOLDER_LINK.search(line) for _, line in section):
            for i, line in section:
                checked, prev = set(), 0
                for m in MARKER.finditer(line):
                    found = [(n.start(), n.group(0)) for n in NUMBER.finditer(
                        re.sub(r"`[^`]*`|<!--.*?-->", lambda x: "_" * len(x.group(0)), line))
                        if n.start() >= prev and n.end() <= m.start()]
                    k = len(split_expressions(m.group(1)))
                    checked.update(pos for pos, _ in found[len(found) - k:])
                    prev = m.end()
                masked = re.sub(r"`[^`]*`|<!--.*?-->|\]\([^)]*\)", lambda x: "_" * len(x.group(0)), line)
                for n in NUMBER.finditer(masked):
                    level = re.match(r"9[059]% (CI|interval|t-interval)", masked[n.start():])
                    if n.start() not in checked and DECIMAL.search(n.group(0)) and not level:
                        out.append((i, n.group(0)))
        section.clear()

    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("#"):
            flush()
        if not in_code:
            section.append((i, line))
    flush()
    return out


def docs():
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")) + [EXAMPLES / "README.md"]


def main(argv):
    listing = [] if "--list" in argv else None
    sources = Sources()
    bad, checked, files = [], 0, 0
    for path in docs():
        b, c = check_text(path.relative_to(ROOT).as_posix(), path.read_text(), sources, listing)
        bad += b
        checked += c
        files += bool(c or b)
    for line in listing or []:
        print(line)
    if "--unmarked" in argv:
        total = 0
        for path in docs():
            found = unmarked(path.read_text())
            total += len(found)
            for i, q in found:
                print(f"{path.relative_to(ROOT).as_posix()}:{i}: {q} (no marker)")
        print(f"docs_numbers: {total} decimal or percent number(s) in sections that link an example folder "
              f"carry no marker (listed, not failed)")
    for b in bad:
        print(b)
    print(f"docs_numbers: {checked} number(s) in {files} doc(s) checked against docs/examples; "
          f"{len(bad)} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
