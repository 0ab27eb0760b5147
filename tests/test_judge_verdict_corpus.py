"""The verdict corpus: realistic judge replies, each labelled with its intended verdict or null (no verdict).

The parser must never take a label from a reply that states no clear final answer, and must read at
least 90% of the replies that do. ``benchmarks/verdict_coverage.py`` prints the full table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cheems.judge.verdict import FAILURE_REASONS, parse_verdict

CORPUS = Path(__file__).parent / "data" / "verdict_corpus.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_corpus_is_big_and_varied():
    assert len(ROWS) >= 80
    assert {r["verdict"] for r in ROWS} == {"A", "B", "C", None}
    assert {(r["lang"], r["think"]) for r in ROWS} == {("zh", False), ("zh", True), ("en", False), ("en", True)}
    assert len({r["reply"] for r in ROWS}) == len(ROWS)  # no reply counted twice


@pytest.mark.parametrize("row", [r for r in ROWS if r["verdict"] is None], ids=lambda r: r["note"])
def test_no_verdict_is_ever_taken_from_a_reply_without_a_clear_answer(row):
    verdict = parse_verdict(row["reply"])
    assert verdict.label is None and verdict.failure in FAILURE_REASONS


def test_coverage_of_clear_answers_and_no_wrong_label():
    clear = [r for r in ROWS if r["verdict"] is not None]
    read = [parse_verdict(r["reply"]).label for r in clear]
    wrong = [(r["reply"], got) for r, got in zip(clear, read) if got not in (None, r["verdict"])]
    assert wrong == []  # a label, when taken, is the intended one
    coverage = sum(got == r["verdict"] for r, got in zip(clear, read)) / len(clear)
    print(
        f"\nverdict coverage: {coverage:.3f} of {len(clear)} clear replies "
        f"({sum(r['verdict'] is None for r in ROWS)} no-verdict replies, all refused)"
    )
    assert coverage >= 0.90
