"""scripts/house-rules.py doc-intervals: a quoted interval matches a comparisons.csv row only when
its ends agree at the quoted precision (or, negated, as a shortfall); a wrong digit is caught.

Run by hand: python3 -m unittest tests/scripts/test_doc_intervals.py
"""

import importlib.util
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("house_rules", REPO / "scripts" / "house-rules.py")
rules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rules)


def quotes(text):
    return rules.QUOTED_CI.findall(text)


class DocIntervalsTest(unittest.TestCase):
    row = (95, -4.0129, -1.7271)  # a comparisons.csv row: level, ci95_low, ci95_high

    def test_a_rounded_quote_matches_and_a_wrong_digit_does_not(self):
        (q,) = quotes("−2.87 points (95% CI −4.01 to −1.73)")
        self.assertTrue(rules.matches(q, self.row))
        (q,) = quotes("−2.87 points (95% CI −4.02 to −1.73)")
        self.assertFalse(rules.matches(q, self.row))
        (q,) = quotes("(95% CI −4.0 to −1.7")
        self.assertTrue(rules.matches(q, self.row), "one decimal: rounded to one decimal")

    def test_a_shortfall_is_the_negated_interval_and_the_level_must_agree(self):
        (q,) = quotes("worse by 2.9 points (95% CI 1.7-4.0)")
        self.assertEqual(q, ("95", "1.7", "4.0"))
        self.assertTrue(rules.matches(q, self.row))
        (q,) = quotes("(90% CI −4.01 to −1.73)")
        self.assertFalse(rules.matches(q, self.row), "a 90% quote is not a 95% row")


if __name__ == "__main__":
    unittest.main()
