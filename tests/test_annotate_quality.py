"""The dashboard's numbers (cheems.annotate.quality) on hand-built snapshots, worked out by hand,
and their terminal rendering (cheems.annotate.status_tables)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import krippendorff
import pytest
from rich.cells import cell_len
from rich.console import Console

from annotate_server import make_project, prompt, team
from cheems.annotate.answer import KEYS, Answer, Verdict
from cheems.annotate.people import Person, ProjectSettings
from cheems.annotate.quality import ordinal_alpha, status_report
from cheems.annotate.snapshot import AnswerRow, ItemRow, ReviewRow, Snapshot, TaskRow
from cheems.annotate.status_tables import print_status
from cheems.data.schema import Record

UTC8 = timezone(timedelta(hours=8))
NOW = datetime(2024, 5, 2, 12, 0, tzinfo=UTC8)  # local midnight: 2024-05-01 16:00 UTC
T0 = datetime(2024, 5, 1, 8, 0, tzinfo=timezone.utc)  # the day before, local time
PEOPLE = [
    Person(name="ann-01", role="annotator", categories=["数学"]),
    Person(name="ann-02", role="annotator"),
    Person(name="ann-03", role="annotator"),
    Person(name="rev-01", role="reviewer"),
    Person(name="lead", role="admin"),
]


def record(pid: str, rids: list[str], category: str = "数学", rank: dict[str, int] | None = None) -> Record:
    return Record(
        id=pid,
        input=f"问题 {pid}",
        category=[category],
        responses=[{"id": r, "content": f"回答 {r}"} for r in rids],
        rank=rank,
    )


def answer(
    task: str,
    person: str,
    ranking: str,
    scores: dict[str, int] | None = None,
    kind: str = "annotate",
    at: datetime = T0,
    current: bool = True,
) -> AnswerRow:
    """An answer by response id; ``ranking`` in the grammar's shape over ids ("r1>r2=r3")."""
    levels = [level.split("=") for level in ranking.split(">")]
    scores = scores or {r: 5 - i for i, level in enumerate(levels) for r in level}
    return AnswerRow(
        scores=scores,
        levels=levels,
        spans=[],
        flags={},
        note="",
        override=False,
        item_id=f"{task}/{person}/{kind}",
        task_id=task,
        person=person,
        kind=kind,
        submitted_at=at,
        current=current,
    )


def item(task: str, person: str, state: str, kind: str = "annotate", gold: bool = False) -> ItemRow:
    return ItemRow(f"{task}/{person}/{kind}", kind, task, person, state, gold, [])


def snapshot(prompts=(), gold=(), tasks=(), items=(), answers=(), reviews=()) -> Snapshot:
    return Snapshot(
        settings=ProjectSettings(agreement_target=0.9),
        people=PEOPLE,
        prompts={r.id: r for r in prompts},
        gold={r.id: r for r in gold},
        tasks=list(tasks),
        items=list(items),
        answers=list(answers),
        reviews=list(reviews),
    )


def report_of(snap: Snapshot) -> dict:
    report = status_report(snap, now=NOW)
    json.dumps(report, allow_nan=False)  # JSON-ready, never NaN
    return report


def test_empty_project_is_all_zeros_and_nulls():
    report = report_of(snapshot())
    assert report["progress"] == {
        "tasks": 0,
        "tasks_done": 0,
        "items": 0,
        "open": 0,
        "submitted": 0,
        "approved": 0,
        "returned": 0,
        "share_done": None,
        "by_category": {},
        "by_person": report["progress"]["by_person"],
        "by_prompt": [],
    }
    assert report["progress"]["by_person"]["ann-01"]["assigned"] == 0
    assert report["per_day"] == {}
    assert report["agreement"] == {
        "tasks": 0,
        "pairs": 0,
        "pairwise_agreement": None,
        "alpha_scores": None,
        "alpha_ranking": None,
        "below_target": 0,
    }
    assert report["gold"]["ann-01"] == {"role": "annotator", "items": 0, "answered": 0, "pairs": 0, "accuracy": None}
    assert report["gold"]["rev-01"] == {"role": "reviewer", "items": 0, "verdicts": 0, "accuracy": None}
    assert "lead" not in report["gold"]
    assert report["conflicts"] == {
        "prompts": 0,
        "comparisons": 0,
        "conflicts": 0,
        "conflict_ratio": None,
        "by_prompt": [],
    }
    assert report["queues"] == {"reviews_open": 0, "adjudications_open": 0, "returned_open": 0}


def test_progress_by_category_prompt_and_person():
    # m1 (数学): one task, both items done -> task done. m2 (数学): one item approved, one returned -> not done.
    # c1 (代码): one open item. c2 (代码): one response, no task. Gold items and reviews are left out.
    snap = snapshot(
        prompts=[record("m1", ["a", "b", "c"]), record("m2", ["a", "b"]), record("c1", ["a", "b"], "代码")]
        + [record("c2", ["a"], "代码")],
        gold=[record("g1", ["a", "b"], rank={"a": 1, "b": 2})],
        tasks=[TaskRow(t, t[:2], ["a", "b"], False) for t in ("m1#t1", "m2#t1", "c1#t1")]
        + [TaskRow("g1#t1", "g1", ["a", "b"], True)],
        items=[
            item("m1#t1", "ann-01", "submitted"),
            item("m1#t1", "ann-02", "approved"),
            item("m2#t1", "ann-01", "approved"),
            item("m2#t1", "ann-02", "open"),  # returned: open with an earlier answer
            item("c1#t1", "ann-02", "open"),
            item("g1#t1", "ann-01", "open", gold=True),
            item("m1#t1", "rev-01", "done", kind="review"),
            item("m2#t1", "rev-01", "open", kind="review"),
            item("g1#t1", "rev-01", "open", kind="review", gold=True),
            item("m2#t1", "lead", "open", kind="adjudicate"),
        ],
        answers=[answer("m2#t1", "ann-02", "b>a", current=False), answer("g1#t1", "ann-01", "a>b", current=False)],
    )
    progress = report_of(snap)["progress"]
    # 5 annotate items: 1 submitted + 2 approved done (3/5), 2 open of which 1 returned (the open gold item of
    # ann-01 has an earlier answer too, but gold never counts)
    assert {k: progress[k] for k in ("tasks", "tasks_done", "items", "open", "submitted", "approved", "returned")} == {
        "tasks": 3,
        "tasks_done": 1,
        "items": 5,
        "open": 2,
        "submitted": 1,
        "approved": 2,
        "returned": 1,
    }
    assert progress["share_done"] == pytest.approx(0.6)
    assert progress["by_category"] == {
        "数学": {"tasks": 2, "done": 1, "share_done": 0.5},
        "代码": {"tasks": 1, "done": 0, "share_done": 0.0},
    }
    assert progress["by_prompt"] == [
        {"prompt_id": "m1", "category": "数学", "tasks": 1, "done": 1},
        {"prompt_id": "m2", "category": "数学", "tasks": 1, "done": 0},
        {"prompt_id": "c1", "category": "代码", "tasks": 1, "done": 0},
        {"prompt_id": "c2", "category": "代码", "tasks": 0, "done": 0},
    ]
    people = progress["by_person"]
    assert list(people) == ["ann-01", "ann-02", "ann-03", "rev-01", "lead"]
    assert people["ann-01"] == {
        "role": "annotator",
        "assigned": 2,
        "done": 2,
        "open": 0,
        "returned": 0,
        "reviews_done": 0,
        "reviews_open": 0,
        "adjudications_open": 0,
        "today": 0,
    }
    assert (people["ann-02"]["assigned"], people["ann-02"]["done"], people["ann-02"]["open"]) == (3, 1, 2)
    assert people["ann-02"]["returned"] == 1
    assert (people["rev-01"]["reviews_done"], people["rev-01"]["reviews_open"]) == (1, 1)
    assert people["lead"]["adjudications_open"] == 1
    assert report_of(snap)["queues"] == {"reviews_open": 1, "adjudications_open": 1, "returned_open": 1}


def test_per_day_and_today_use_the_local_calendar():
    snap = snapshot(
        prompts=[record("p1", ["a", "b"]), record("p2", ["a", "b"])],
        gold=[record("g1", ["a", "b"], rank={"a": 1, "b": 2})],
        tasks=[TaskRow("p1#t1", "p1", ["a", "b"], False), TaskRow("p2#t1", "p2", ["a", "b"], False)]
        + [TaskRow("g1#t1", "g1", ["a", "b"], True)],
        answers=[
            answer("p1#t1", "ann-01", "a>b", at=datetime(2024, 5, 1, 15, 30, tzinfo=timezone.utc)),  # 05-01 23:30 +8
            answer("p1#t1", "ann-02", "a>b", at=datetime(2024, 5, 1, 16, 30, tzinfo=timezone.utc)),  # 05-02 00:30 +8
            # rejected, then answered again: both submissions are work done on 05-02 (+8)
            answer("p2#t1", "ann-01", "b>a", at=datetime(2024, 5, 2, 1, 0, tzinfo=timezone.utc), current=False),
            answer("p2#t1", "ann-01", "a>b", at=datetime(2024, 5, 2, 2, 0, tzinfo=timezone.utc)),
            # an adjudication is no annotate answer (it counts in "today"); a gold answer is work like any other
            answer("p1#t1", "lead", "a>b", kind="adjudicate", at=datetime(2024, 5, 2, 3, 0, tzinfo=timezone.utc)),
            answer("g1#t1", "ann-01", "a>b", at=datetime(2024, 5, 2, 3, 0, tzinfo=timezone.utc)),
        ],
        reviews=[
            ReviewRow("rv1", "x", "rev-01", True, "", False, None, datetime(2024, 5, 2, 4, 0, tzinfo=timezone.utc)),
            ReviewRow("rv2", "y", "rev-01", True, "", False, None, datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)),
            ReviewRow("rv3", None, "rev-01", False, "x", True, True, datetime(2024, 5, 2, 5, 0, tzinfo=timezone.utc)),
        ],
    )
    report = report_of(snap)
    assert report["per_day"] == {"2024-05-01": 1, "2024-05-02": 4}
    # the same answers on the UTC calendar: 15:30 and 16:30 both fall on 05-01
    assert status_report(snap, now=NOW.astimezone(timezone.utc))["per_day"] == {"2024-05-01": 2, "2024-05-02": 3}
    today = {name: p["today"] for name, p in report["progress"]["by_person"].items()}
    # since 2024-05-01 16:00 UTC: ann-01 the two p2 submissions and the gold answer, ann-02 one, lead one
    # adjudication, rev-01 one review and one planted gold review (rv2 was the day before)
    assert today == {"ann-01": 3, "ann-02": 1, "ann-03": 0, "rev-01": 2, "lead": 1}


def agreement_snapshot() -> Snapshot:
    # t1 (three responses): ann-01 r1>r2>r3 gives a, a, a; ann-02 r1=r2>r3 gives tie, a, a -> 2 of 3 pairs agree.
    # t2 (a pair): both r4>r5 -> 1 of 1. t3: one answer only (no overlap). Gold g1#t1: two answers, left out.
    return snapshot(
        prompts=[record("p1", ["r1", "r2", "r3"]), record("p2", ["r4", "r5"]), record("p3", ["r6", "r7"])],
        gold=[record("g1", ["a", "b"], rank={"a": 1, "b": 2})],
        tasks=[
            TaskRow("p1#t1", "p1", ["r1", "r2", "r3"], False),
            TaskRow("p2#t1", "p2", ["r4", "r5"], False),
            TaskRow("p3#t1", "p3", ["r6", "r7"], False),
            TaskRow("g1#t1", "g1", ["a", "b"], True),
        ],
        answers=[
            answer("p1#t1", "ann-01", "r1>r2>r3", {"r1": 5, "r2": 3, "r3": 1}),
            answer("p1#t1", "ann-02", "r1=r2>r3", {"r1": 4, "r2": 4, "r3": 1}),
            answer("p2#t1", "ann-01", "r4>r5", {"r4": 5, "r5": 2}),
            answer("p2#t1", "ann-02", "r4>r5", {"r4": 4, "r5": 2}),
            answer("p3#t1", "ann-03", "r7>r6"),
            answer("p1#t1", "ann-03", "r3>r2>r1", current=False),  # replaced (rejected): not counted
            answer("g1#t1", "ann-01", "a>b"),
            answer("g1#t1", "ann-02", "b>a"),
        ],
    )


def test_pairwise_agreement_alpha_and_below_target():
    agreement = report_of(agreement_snapshot())["agreement"]
    assert agreement["tasks"] == 2
    assert agreement["pairs"] == 4
    assert agreement["pairwise_agreement"] == pytest.approx(3 / 4)
    assert agreement["below_target"] == 1  # t1 agrees on 2/3 < 0.9; t2 on 1/1
    # scores: units (t1,r1) (t1,r2) (t1,r3) (t2,r4) (t2,r5), one row per coder
    expected = krippendorff.alpha(reliability_data=[[5, 3, 1, 5, 2], [4, 4, 1, 4, 2]], level_of_measurement="ordinal")
    assert agreement["alpha_scores"] == pytest.approx(expected)
    # ranking: units (t1,(r1,r2)) (t1,(r1,r3)) (t1,(r2,r3)) (t2,(r4,r5)) with values 1 (a better) / 0 (tie):
    # [1,1,1,1] and [0,1,1,1]. By hand: n_0 = 1, n_1 = 7, n = 8; the only off-diagonal coincidences are o(0,1)
    # = o(1,0) = 1, ordinal delta(0,1) = (n_0 + n_1 - (n_0 + n_1) / 2)^2 = 16, so D_o = 2 * 16 / 8; expected
    # e(0,1) = n_0 n_1 / (n - 1) = 1, D_e = 2 * 16 / 8: alpha = 1 - D_o / D_e = 0.
    assert agreement["alpha_ranking"] == pytest.approx(0.0)
    assert krippendorff.alpha(
        reliability_data=[[1, 1, 1, 1], [0, 1, 1, 1]], level_of_measurement="ordinal"
    ) == pytest.approx(0.0)


def test_alpha_is_null_when_undefined_and_never_nan():
    # one value everywhere: the library raises
    assert ordinal_alpha([{"x": 3, "y": 3}, {"x": 3, "y": 3}]) is None
    # one value over the units two coders share, another only where one coder coded: the library gives NaN
    with pytest.warns(RuntimeWarning):
        nan = krippendorff.alpha(reliability_data=[[1, 2], [1, math.nan]], level_of_measurement="ordinal")
    assert math.isnan(nan)
    assert ordinal_alpha([{"x": 1, "y": 1}, {"x": 2}]) is None
    # no unit with two coders
    assert ordinal_alpha([{"x": 1}, {"y": 2}]) is None
    # two annotators who agree on everything, with one score each: pairwise agreement 1, both alphas null
    snap = snapshot(
        prompts=[record("p1", ["a", "b"])],
        tasks=[TaskRow("p1#t1", "p1", ["a", "b"], False)],
        answers=[
            answer("p1#t1", "ann-01", "a=b", {"a": 3, "b": 3}),
            answer("p1#t1", "ann-02", "a=b", {"a": 3, "b": 3}),
        ],
    )
    agreement = report_of(snap)["agreement"]
    assert (agreement["pairwise_agreement"], agreement["alpha_scores"], agreement["alpha_ranking"]) == (1.0, None, None)


def gold_snapshot() -> Snapshot:
    # g1 ranks a first, b and c tied second; task order [b, a, c] gives the gold labels
    # (b,a) = b, (b,c) = tie, (a,c) = a. ann-01 answers a>b>c: (b,a) = b right, (b,c) = a wrong, (a,c) = a right.
    # g2 ranks y over x; ann-01's current answer y>x is right (its earlier, replaced x>y does not count): 3 of 4.
    return snapshot(
        gold=[
            record("g1", ["a", "b", "c"], rank={"a": 1, "b": 2, "c": 2}),
            record("g2", ["x", "y"], rank={"x": 2, "y": 1}),
        ],
        tasks=[TaskRow("g1#t1", "g1", ["b", "a", "c"], True), TaskRow("g2#t1", "g2", ["x", "y"], True)],
        items=[
            item("g1#t1", "ann-01", "submitted", gold=True),
            item("g2#t1", "ann-01", "approved", gold=True),
            item("g1#t1", "rev-01", "done", kind="review", gold=True),
        ],
        answers=[
            answer("g1#t1", "ann-01", "a>b>c"),
            answer("g2#t1", "ann-01", "x>y", current=False),
            answer("g2#t1", "ann-01", "y>x"),
        ],
        reviews=[
            ReviewRow("v1", None, "rev-01", True, "", True, True, T0),
            ReviewRow("v2", None, "rev-01", False, "错", True, True, T0),
            ReviewRow("v3", None, "rev-01", True, "", True, False, T0),
            ReviewRow("v4", "i9", "rev-01", True, "", False, None, T0),  # an ordinary review: not gold
        ],
    )


def test_gold_accuracy_of_annotators_and_reviewers():
    gold = report_of(gold_snapshot())["gold"]
    assert gold["ann-01"] == {"role": "annotator", "items": 2, "answered": 2, "pairs": 4, "accuracy": 0.75}
    assert gold["ann-02"]["accuracy"] is None
    assert gold["rev-01"]["verdicts"] == 3
    assert gold["rev-01"]["accuracy"] == pytest.approx(2 / 3)
    assert gold["rev-01"]["items"] == 1


def ring_snapshot() -> Snapshot:
    # A ring of four tasks over r1..r4. Everyone ranks r1 > r2 > r3 > r4, except ann-02 on t2 who says r3 > r4 > r2.
    # Strict edges: r2>r3 (t1) and r3>r2 (t2); r2>r4 (t4) and r4>r2 (t2); r3>r4 (t2, t3): one component {r2, r3, r4}
    # whose longest cycle is r2 > r3 > r4 > r2. Ranks: r1 = 1, r2 = r3 = r4 = 2, so every strict comparison inside
    # the component conflicts: t1 (r2,r3), all three of t2, t3 (r3,r4), t4 (r2,r4): 6 of 12.
    # Prompt q: one task, ann-01 ties all three, ann-02 says s1 > s2 > s3: the ties put them in one rank, the three
    # strict comparisons conflict (3 of 6) but the strict graph has no cycle.
    return snapshot(
        prompts=[record("p1", ["r1", "r2", "r3", "r4"]), record("q", ["s1", "s2", "s3"], "代码")],
        tasks=[
            TaskRow("p1#t1", "p1", ["r1", "r2", "r3"], False),
            TaskRow("p1#t2", "p1", ["r2", "r3", "r4"], False),
            TaskRow("p1#t3", "p1", ["r3", "r4", "r1"], False),
            TaskRow("p1#t4", "p1", ["r4", "r1", "r2"], False),
            TaskRow("q#t1", "q", ["s2", "s3", "s1"], False),
        ],
        answers=[
            answer("p1#t1", "ann-01", "r1>r2>r3"),
            answer("p1#t2", "ann-02", "r3>r4>r2"),
            answer("p1#t3", "ann-03", "r1>r3>r4"),
            answer("p1#t4", "ann-01", "r1>r2>r4"),
            answer("q#t1", "ann-01", "s1=s2=s3"),
            answer("q#t1", "ann-02", "s1>s2>s3"),
        ],
    )


def test_conflicts_and_named_cycles():
    conflicts = report_of(ring_snapshot())["conflicts"]
    assert conflicts["by_prompt"] == [
        {"prompt_id": "p1", "comparisons": 12, "conflicts": 6, "conflict_ratio": 0.5, "cycles": [["r2", "r3", "r4"]]},
        {"prompt_id": "q", "comparisons": 6, "conflicts": 3, "conflict_ratio": 0.5, "cycles": []},
    ]
    assert (conflicts["prompts"], conflicts["comparisons"], conflicts["conflicts"]) == (2, 18, 9)
    assert conflicts["conflict_ratio"] == pytest.approx(9 / 18)


def test_an_adjudicated_task_counts_its_consensus_only():
    # ann-01 r1>r2>r3 and ann-02 r3>r2>r1 disagree on every pair: six comparisons, every pair both ways, one rank
    # for all, six conflicts, cycle r1 > r2 > r3 > r1 (the longest cycles are r1>r2>r3 and r1>r3>r2; the first in
    # record order is named).
    prompts, tasks = [record("p1", ["r1", "r2", "r3"])], [TaskRow("p1#t1", "p1", ["r2", "r1", "r3"], False)]
    annotators = [answer("p1#t1", "ann-01", "r1>r2>r3"), answer("p1#t1", "ann-02", "r3>r2>r1")]
    before = report_of(snapshot(prompts=prompts, tasks=tasks, answers=annotators))["conflicts"]["by_prompt"]
    assert before == [
        {"prompt_id": "p1", "comparisons": 6, "conflicts": 6, "conflict_ratio": 1.0, "cycles": [["r1", "r2", "r3"]]}
    ]
    # The consensus r1 > r2 = r3 replaces both answers (a superseded consensus does not count): 3 comparisons, none
    # in conflict, no cycle. Agreement still measures the two annotators (0 of 3 pairs).
    consensus = [
        answer("p1#t1", "lead", "r3>r1>r2", kind="adjudicate", current=False),
        answer("p1#t1", "rev-01", "r1>r2=r3", kind="adjudicate", at=T0 + timedelta(hours=1)),
    ]
    report = report_of(snapshot(prompts=prompts, tasks=tasks, answers=annotators + consensus))
    assert report["conflicts"]["by_prompt"] == [
        {"prompt_id": "p1", "comparisons": 3, "conflicts": 0, "conflict_ratio": 0.0, "cycles": []}
    ]
    assert (report["agreement"]["tasks"], report["agreement"]["pairwise_agreement"]) == (1, 0.0)


def printed(snap: Snapshot) -> str:
    console = Console(record=True, width=150, color_system=None)
    print_status(report_of(snap), console)
    return console.export_text()


def test_print_status_shows_the_key_numbers():
    snap = ring_snapshot()
    snap.items.extend([item("p1#t1", "ann-01", "approved"), item("q#t1", "ann-02", "open")])
    snap.answers.append(answer("q#t1", "ann-02", "s3>s2>s1", current=False))  # returned to ann-02
    text = printed(snap)
    flat = " ".join(text.split())
    assert "items done │ 1 / 2 (50.0%) │" in flat
    assert "items open (returned) │ 1 (1) │" in flat
    assert "answers on 2024-05-01 │ 7 │" in flat  # six current answers and the returned one
    assert "数学 │ 4 │ 1 │ 25.0% │" in flat and "代码 │ 1 │ 0 │ 0.0% │" in flat
    assert "pairwise agreement │ 0.0% │" in flat
    assert "conflicts / comparisons │ 9 / 18 │" in flat and "conflict ratio │ 50.0% │" in flat
    assert "p1 │ 6 / 12 │ 50.0% │ r2 > r3 > r4 > r2 │" in flat
    assert "│ q " not in flat  # a conflict through ties is no cycle: not listed
    # Chinese categories align: every line of the category table has the same width on screen
    lines = text[text.index("by category") :].splitlines()[1:7]
    assert len({cell_len(line) for line in lines}) == 1, lines


def test_print_status_shows_gold_accuracy_per_person():
    flat = " ".join(printed(gold_snapshot()).split())
    assert "ann-01 │ 0 │ 0 │ 0 │ 0 │ 0 │ 75.0% (4) │" in flat
    assert "ann-02 │ 0 │ 0 │ 0 │ 0 │ 0 │ - │" in flat
    assert "rev-01 │ reviewer │ 0 │ 0 │ 0 │ 0 │ 66.7% (3) │" in flat
    assert "lead │ admin │ 0 │ 0 │ 0 │ 0 │ - │" in flat


def test_print_status_fits_80_columns():
    console = Console(record=True, width=80, color_system=None)
    print_status(report_of(gold_snapshot()), console)
    text = console.export_text()
    assert "…" not in text  # no header or name cut short
    assert max(cell_len(line) for line in text.splitlines()) <= 80


def test_a_real_project_through_the_store(tmp_path):
    # One prompt, one task, two annotators who disagree on every pair, every submission reviewed (rate 1).
    project, _ = make_project(tmp_path / "p", [prompt("p1")], team(annotators=2), overlap=2, review_rate=1.0)

    def submit(name: str, ranking_by_id: str) -> None:
        item = project.next_item(name)
        key = {rid: KEYS[i] for i, rid in enumerate(item.shown)}
        levels = [[key[r] for r in level.split("=")] for level in ranking_by_id.split(">")]
        scores = {k: 5 - i for i, level in enumerate(levels) for k in level}
        project.submit(item.item_id, name, Answer(scores=scores, ranking=">".join("=".join(x) for x in levels)))

    submit("ann-01", "r1>r2>r3")
    submit("ann-02", "r3>r2>r1")
    report = report_of(project.snapshot())
    assert (report["agreement"]["tasks"], report["agreement"]["pairwise_agreement"]) == (1, 0.0)
    assert report["agreement"]["below_target"] == 1
    assert report["conflicts"]["by_prompt"][0] == {
        "prompt_id": "p1",
        "comparisons": 6,
        "conflicts": 6,
        "conflict_ratio": 1.0,
        "cycles": [["r1", "r2", "r3"]],
    }
    assert report["queues"] == {"reviews_open": 2, "adjudications_open": 1, "returned_open": 0}
    assert sum(report["per_day"].values()) == 2

    submit("rev-01", "r1>r2=r3")  # the adjudication comes first in the reviewer's queue
    items = project.snapshot().items
    annotated = {i.item_id: i.person for i in items if i.kind == "annotate"}
    for review in (i for i in items if i.kind == "review"):
        approve = annotated[review.reviews] == "ann-01"
        project.review(review.item_id, "rev-01", Verdict(approve=approve, reason="" if approve else "r3 不是最好的"))
    report = report_of(project.snapshot())
    progress = report["progress"]
    assert (progress["items"], progress["open"], progress["returned"], progress["approved"]) == (2, 1, 1, 1)
    assert progress["by_person"]["ann-02"]["returned"] == 1
    assert report["queues"] == {"reviews_open": 0, "adjudications_open": 0, "returned_open": 1}
    assert report["agreement"]["tasks"] == 0  # ann-02's answer no longer stands
    # the consensus r1 > r2 = r3 stands for the task: three comparisons, none in conflict
    assert report["conflicts"]["by_prompt"][0]["comparisons"] == 3
    assert report["conflicts"]["conflicts"] == 0
