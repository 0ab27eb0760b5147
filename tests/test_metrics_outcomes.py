"""The columnar outcomes (``Outcomes``) give back exactly the prompts they were built from, and the metrics read
from their columns equal the definitions computed pair by pair on those prompts."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.metrics.cheemsbench import calibration_bins, category_metrics, length_split, subset_metrics
from cheems.metrics.outcomes import Outcomes, PairOutcome, PromptOutcome, ShownVerdict

IDS = st.sampled_from(["r1", "r2", "r3", "回答-4", "r5"])
SCORES = st.floats(-50, 50, allow_nan=False, width=64)


@st.composite
def prompts(draw, judge: bool = False) -> list[PromptOutcome]:
    """Prompts of a few categories, 0-5 pairs each; a response keeps its length and score within a prompt
    (as a bench gives them), except where ``draw`` makes one differ (a hand-edited details file)."""
    out = []
    for i in range(draw(st.integers(0, 12))):
        chars = {r: draw(st.integers(0, 40)) for r in ("r1", "r2", "r3", "回答-4", "r5")}
        score = {r: None if judge else draw(SCORES) for r in chars}
        pairs = []
        for _ in range(draw(st.integers(0, 5))):
            chosen, rejected = draw(IDS), draw(IDS)
            odd = draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans())
            rejected_chars = chars[rejected] + (1 if odd else 0)
            verdicts = [ShownVerdict(chosen, draw(st.sampled_from(["A", "B", "C", None])))] if judge else None
            pairs.append(
                PairOutcome(
                    chosen,
                    rejected,
                    draw(st.booleans()) if judge else score[chosen] > score[rejected],
                    chars[chosen],
                    rejected_chars,
                    score[chosen],
                    score[rejected],
                    verdicts,
                )
            )
        out.append(PromptOutcome(f"p{i}", draw(st.sampled_from(["写作", "math", "代码"])), pairs))
    return out


@settings(max_examples=150, deadline=None)
@given(prompts(), st.booleans())
def test_columns_give_back_the_prompts_they_were_built_from(items, judge):
    if judge:
        items = [PromptOutcome(o.prompt_id, o.category, [_judged(p) for p in o.pairs]) for o in items]
    table = Outcomes.of(items)
    assert len(table) == len(items) and table.n_pairs == sum(len(o.pairs) for o in items)
    assert list(table) == items and table == items and items == table
    if items:
        assert table[-1] == items[-1] and table[1:3] == items[1:3]
    assert Outcomes.of(table) is table


def _judged(p: PairOutcome) -> PairOutcome:
    return PairOutcome(p.chosen, p.rejected, p.correct, p.chosen_chars, p.rejected_chars, None, None, [])


@settings(max_examples=150, deadline=None)
@given(prompts())
def test_metrics_from_columns_equal_the_definitions_pair_by_pair(items):
    table = Outcomes.of(items)
    scored = [o for o in items if o.pairs]
    by_category: dict[str, list[PromptOutcome]] = {}
    for o in scored:
        by_category.setdefault(o.category, []).append(o)
    expected = {}
    for name in sorted(by_category):
        group = by_category[name]
        pairs = [p for o in group for p in o.pairs]
        expected[name] = (
            sum(p.correct for p in pairs) / len(pairs),
            sum(all(p.correct for p in o.pairs) for o in group) / len(group),
            len(group),
            len(pairs),
        )
    got = subset_metrics(table)
    assert {n: (m.accuracy, m.exact_match, m.n_prompts, m.n_pairs) for n, m in got.categories.items()} == expected
    assert list(got.categories) == sorted(by_category)
    n = len(expected)
    assert got.accuracy == (sum(e[0] for e in expected.values()) / n if n else 0.0)
    assert got.exact_match == (sum(e[1] for e in expected.values()) / n if n else 0.0)
    all_pairs = [p for o in items for p in o.pairs]
    pooled = category_metrics(items)
    assert pooled.n_pairs == len(all_pairs) and pooled.n_prompts == len(scored)
    for name, keep in (
        ("chosen_longer", lambda p: p.chosen_chars > p.rejected_chars),
        ("chosen_shorter", lambda p: p.chosen_chars < p.rejected_chars),
        ("same_length", lambda p: p.chosen_chars == p.rejected_chars),
    ):
        hits = [p.correct for p in all_pairs if keep(p)]
        want = {"accuracy": sum(hits) / len(hits) if hits else None, "n_pairs": len(hits)}
        assert length_split(table)[name] == want
        assert length_split(items[: len(items) // 2], items[len(items) // 2 :])[name] == want
    margins = [p.chosen_score - p.rejected_score for p in all_pairs]
    bins = _bins_by_hand(margins)
    assert [(b.confidence, b.accuracy, b.count) for b in calibration_bins(table.margins())] == bins
    assert got.ece == (None if not margins else sum(n / len(margins) * abs(acc - conf) for conf, acc, n in bins))


def _bins_by_hand(margins: list[float], n_bins: int = 5) -> list:
    """calibration_bins as a plain loop: |margin| into equal-width bins over [0, max]; sigmoid of the mean size."""
    top = max((abs(m) for m in margins), default=0.0)
    bins: list[list[float]] = [[] for _ in range(n_bins)]
    for m in margins:
        bins[min(int(abs(m) / top * n_bins), n_bins - 1) if top > 0 else 0].append(m)
    return [
        (1 / (1 + math.exp(-sum(abs(m) for m in b) / len(b))), sum(m > 0 for m in b) / len(b), len(b))
        for b in bins
        if b
    ]


def test_a_judge_has_no_scores_and_no_margins():
    table = Outcomes.of(
        [PromptOutcome("p", "c", [PairOutcome("a", "b", True, 3, 4, verdicts=[ShownVerdict("a", "A")])])]
    )
    assert table.scores() is None and table.margins() is None
    assert subset_metrics(table).ece is None
    assert table[0].pairs[0].verdicts == [ShownVerdict("a", "A")]
