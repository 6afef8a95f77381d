"""scripts/compiler-launcher.sh records each compile's stderr; scripts/check-warnings.sh fails on a warning.

A stand-in compiler (a shell script) plays the compiler, so nothing is compiled. Run by hand:
python3 -m unittest tests/scripts/test_check_warnings.py
"""

import subprocess
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "scripts" / "compiler-launcher.sh"
CHECK = REPO / "scripts" / "check-warnings.sh"

# Writes its -o file and says on stderr whatever $FAKE_STDERR holds; exits $FAKE_RC.
FAKE_COMPILER = """#!/usr/bin/env bash
prev=""
for a in "$@"; do [ "$prev" = "-o" ] && : > "$a"; prev=$a; done
printf '%b' "${FAKE_STDERR:-}" >&2
exit "${FAKE_RC:-0}"
"""


class CheckWarningsTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="check-warnings-test-")
        self.addCleanup(tmp.cleanup)
        self.build = Path(tmp.name) / "build"
        (self.build / "CMakeFiles" / "x.dir").mkdir(parents=True)
        self.compiler = Path(tmp.name) / "fake-c++"
        self.compiler.write_text(FAKE_COMPILER)
        self.compiler.chmod(0o755)

    def compile(self, name, stderr="", rc=0):
        env = {"PATH": "/usr/bin:/bin", "FAKE_STDERR": stderr, "FAKE_RC": str(rc)}
        return subprocess.run([str(LAUNCHER), str(self.compiler), "-c", f"{name}.cpp", "-o", f"CMakeFiles/x.dir/{name}.o"],
                              cwd=self.build, env=env, capture_output=True, text=True, timeout=30)

    def check(self):
        return subprocess.run([str(CHECK), str(self.build)], capture_output=True, text=True, timeout=30)

    def test_launcher_saves_stderr_next_to_the_object_and_passes_it_on(self):
        result = self.compile("a", stderr="a.cpp:1:2: warning: unused variable\n", rc=0)
        self.assertEqual(result.returncode, 0)
        self.assertIn("warning: unused variable", result.stderr)
        record = self.build / "CMakeFiles" / "x.dir" / "a.o.warnings"
        self.assertEqual(record.read_text(), "a.cpp:1:2: warning: unused variable\n")
        self.assertEqual(self.compile("a").returncode, 0)  # a clean recompile empties the record
        self.assertEqual(record.read_text(), "")

    def test_launcher_keeps_the_compilers_exit_status(self):
        self.assertEqual(self.compile("b", stderr="b.cpp:3:1: error: expected ';'\n", rc=1).returncode, 1)

    def test_check_passes_clean_objects(self):
        self.compile("a")
        self.compile("b", stderr="note: only a note\n")
        result = self.check()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("no compiler warnings in 2 objects", result.stdout)

    def test_check_fails_naming_the_file_and_its_first_warning(self):
        self.compile("a")
        self.compile("b", stderr="b.cpp:7:3: warning: comparison of integer expressions [-Wsign-compare]\n")
        result = self.check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("warned about 1 of 2 objects", result.stderr)
        self.assertIn("CMakeFiles/x.dir/b.o.warnings", result.stderr)
        self.assertIn("b.cpp:7:3: warning: comparison of integer expressions", result.stderr)

    def test_check_fails_when_nothing_was_recorded(self):
        result = self.check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("no compiler output recorded", result.stderr)


if __name__ == "__main__":
    unittest.main()
