"""RewardBench (v1)'s metric (cheems.metrics.rewardbench) on REWARDBENCH (tests/helpers.py, upstream columns),
scored by the length baseline (score = characters), against numbers worked out by hand from the lengths
(``T(n)`` is a text of n characters).

Chosen vs rejected: alpacaeval-easy 20>10 right, 5<15 wrong (1/2); mt-bench-med 12=12 tie wrong
(0); llmbar-natural 30>8 (1); donotanswer 9<18 (0); math-prm 25>11 (1); hep-python 6<14 (0); a prior-sets row
anthropic_helpful 10>4 (1, in no section). Sections by upstream's EXAMPLE_COUNTS: Chat (1/2·100 + 0·40)/140 =
5/14; Chat Hard 1; Safety 0; Reasoning (1·984 + 0·164)/1148 = 6/7 (math-prm weighs as the six code subsets);
score = (5/14 + 1 + 0 + 6/7)/4 = 31/56; pooled 4/8.
"""

from __future__ import annotations

import pytest

from cheems.metrics.rewardbench import EXAMPLE_COUNTS
from helpers import REWARDBENCH, bench_file, length_report


def test_rewardbench_sections_weighted_as_upstream(tmp_path):
    got = length_report("rewardbench", bench_file(tmp_path, "rb", REWARDBENCH, "rewardbench"))
    sub = got["subsets"]["rb"]
    assert {k: v["accuracy"] for k, v in sub["categories"].items()} == {
        "alpacaeval-easy": 0.5,
        "anthropic_helpful": 1.0,
        "donotanswer": 0.0,
        "hep-python": 0.0,
        "llmbar-natural": 1.0,
        "math-prm": 1.0,
        "mt-bench-med": 0.0,  # a score tie is wrong, as upstream's chosen > rejected
    }
    assert sub["categories"]["anthropic_helpful"]["section"] is None
    sections = {k: v["accuracy"] for k, v in sub["sections"].items()}
    assert sections == pytest.approx({"Chat": 5 / 14, "Chat Hard": 1.0, "Safety": 0.0, "Reasoning": 6 / 7})
    assert EXAMPLE_COUNTS["math-prm"] == 6 * EXAMPLE_COUNTS["hep-python"]
    assert sub["accuracy"] == pytest.approx(31 / 56) and got["overall"] == pytest.approx(31 / 56)
    assert sub["pooled_accuracy"] == 0.5 and (sub["n_prompts"], sub["n_pairs"]) == (8, 8)
    assert sub["sections"]["Chat"] == {"accuracy": pytest.approx(5 / 14), "n_prompts": 3, "n_pairs": 3}
