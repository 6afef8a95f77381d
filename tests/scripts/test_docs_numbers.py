"""scripts/docs_numbers.py: a number a doc quotes from an example folder matches that folder's
committed file at the quoted precision; a wrong digit, a source that is not committed and a
marker with no number before it all fail; the repository's docs pass.

Run by hand: python3 -m unittest tests/scripts/test_docs_numbers.py
"""

import importlib.util
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("docs_numbers", REPO / "scripts" / "docs_numbers.py")
dn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dn)

GAP = ('csv("seed_equal_steps_fashion/comparisons.csv", "diff_pts", '
       '"key=replicas.count & group_a~ema_decay=0, & group_b~epochs=4, model.ema_decay=0,")')
CI = ('csv("seed_equal_steps_fashion/comparisons.csv", "ci95_low", '
      '"key=replicas.count & group_a~ema_decay=0, & group_b~epochs=4, model.ema_decay=0,")')


def check(text, tracked=None):
    return dn.check_text("doc.md", text, dn.Sources(tracked))


class DocsNumbersTest(unittest.TestCase):
    def test_a_quote_rounded_as_the_file_passes_and_a_wrong_digit_fails(self):
        bad, n = check(f"the gap is −3.05 points<!-- = {GAP} -->")
        self.assertEqual((bad, n), ([], 1))
        bad, _ = check(f"the gap is −3.06 points<!-- = {GAP} -->")
        self.assertEqual(len(bad), 1)
        self.assertIn("quotes −3.06", bad[0])
        bad, _ = check(f"the gap is 3.05 points<!-- = {GAP} -->")
        self.assertEqual(len(bad), 1, "an unsigned quote is not a negative value")
        bad, _ = check(f"the gap is 3.05 points<!-- = -{GAP} -->")
        self.assertEqual(bad, [], "the negation is written in the expression")

    def test_a_marker_checks_the_last_numbers_before_it_in_order(self):
        bad, n = check(f"−3.05 (95% CI −3.99 to −2.10)<!-- = {GAP}; {CI} -->")
        self.assertEqual(len(bad), 2, "the two expressions check −3.99 and −2.10, in that order: both wrong")
        bad, n = check(f"−3.05<!-- = {GAP} --> (95% CI −3.99<!-- = {CI} --> to −2.10)")
        self.assertEqual((bad, n), ([], 2))

    def test_a_number_without_a_committed_source_fails(self):
        bad, _ = check(f"−3.05<!-- = {GAP} -->", tracked=set())
        self.assertIn("is not committed", bad[0])
        bad, _ = check('steps 2550<!-- = min(jsonl("seed_critical_batch_fashion/batch.global=32,seed=1/steps.jsonl", '
                       '"step")) -->')
        self.assertIn("no source file", bad[0])
        bad, _ = check(f"the gap<!-- = {GAP} -->")
        self.assertIn("0 number(s) precede it", bad[0])

    def test_the_inventory_lists_unmarked_numbers_of_sections_that_link_a_folder(self):
        text = ("## A\n[report](examples/x/report.md): 1.25 and 2.50<!-- = 2.5 --> (95% CI 1.1 to 2.2)\n"
                "## B\nno folder here: 3.75\n")
        self.assertEqual(dn.unmarked(text), [(2, "1.25"), (2, "1.1"), (2, "2.2")])

    def test_the_docs_pass(self):
        self.assertEqual(dn.main([]), 0)


if __name__ == "__main__":
    unittest.main()
