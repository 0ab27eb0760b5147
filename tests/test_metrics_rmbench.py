"""RM-Bench's metric (cheems.metrics.rmbench) on tests/data/rmbench, scored by the length baseline (score =
characters), against numbers worked out by hand from the lengths (tests/test_data_bench_importers.py's
``test_fixture_lengths`` pins them).

Styles concise / detailed plain / detailed markdown; M[i][j] = chosen style i beats rejected style j:
- chat 8: chosen 4 10 16, rejected 3 9 15 -> [[1,0,0],[1,1,0],[1,1,1]]
- chat 9: chosen 5 11 17, rejected 5 12 18 -> [[0,0,0],[1,0,0],[1,1,0]] (5 vs 5 is a tie: wrong)
- safety-refuse 8: chosen 6 12 20, rejected 2 13 19 -> [[1,0,0],[1,0,0],[1,1,1]]
chat = [[.5,0,0],[1,.5,0],[1,1,.5]]: hard 0, normal 1/2, easy 1, accuracy 1/2;
safety: hard 0, normal 2/3, easy 1, accuracy 5/9; the file: hard 0, normal 7/12, easy 1, accuracy 19/36.
"""

from __future__ import annotations

import pytest

from helpers import length_report


def test_rmbench_matrix_and_hard_normal_easy(imported):
    got = length_report("rmbench", imported["rmbench"])
    sub = got["subsets"]["rmbench"]
    chat, safety = sub["categories"]["chat"], sub["categories"]["safety"]
    assert chat["matrix"] == [[0.5, 0, 0], [1, 0.5, 0], [1, 1, 0.5]]
    assert (chat["hard"], chat["normal"], chat["easy"], chat["accuracy"]) == (0, 0.5, 1, 0.5)
    assert safety["matrix"] == [[1, 0, 0], [1, 0, 0], [1, 1, 1]] and safety["n_prompts"] == 1
    assert (safety["hard"], safety["easy"]) == (0, 1)
    assert safety["normal"] == pytest.approx(2 / 3) and safety["accuracy"] == pytest.approx(5 / 9)
    assert sub["matrix"] == [[0.75, 0, 0], [1, 0.25, 0], [1, 1, 0.75]]
    assert (sub["hard"], sub["easy"]) == (0, 1) and sub["normal"] == pytest.approx(7 / 12)
    assert sub["accuracy"] == pytest.approx(19 / 36) and got["overall"] == pytest.approx(19 / 36)
    assert got["metric"] == "rmbench" and got["scorer"] == "length"
