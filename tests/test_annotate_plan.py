"""The triple-wise plan (ring, one annotator per task, overlap, categories, load) and the answer grammar."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotate_server import prompt, team
from cheems.annotate.answer import (
    Answer,
    AnswerError,
    agreement,
    check_answer,
    contradictions,
    pair_labels,
    parse_ranking,
)
from cheems.annotate.people import People, Person, load_people
from cheems.annotate.plan import plan_tasks, prompt_tasks, ring, shown_order
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.yamlfile import load_yaml_model


def test_ring_of_adjacent_responses():
    assert ring(list("12345")) == [("1", "2", "3"), ("2", "3", "4"), ("3", "4", "5"), ("4", "5", "1"), ("5", "1", "2")]
    assert ring(list("1234")) == [("1", "2", "3"), ("2", "3", "4"), ("3", "4", "1"), ("4", "1", "2")]
    assert ring(list("123")) == [("1", "2", "3")]
    assert ring(list("12")) == [("1", "2")]
    assert ring(list("1")) == []
    assert len(ring([str(i) for i in range(7)])) == 7


def test_prompt_order_is_seeded_and_covers_every_response():
    tasks = prompt_tasks(prompt("p", 5), seed=3)
    assert [t.task_id for t in tasks] == [f"p#t{i}" for i in range(1, 6)]
    assert Counter(r for t in tasks for r in t.responses) == {f"r{i}": 3 for i in range(1, 6)}
    assert prompt_tasks(prompt("p", 5), seed=3) == tasks
    orders = {prompt_tasks(prompt("p", 5), seed=s)[0].responses for s in range(20)}
    assert len(orders) > 1  # the seed changes the order


def test_each_task_of_a_prompt_goes_to_a_different_annotator():
    records = [prompt(f"p{i}", 5) for i in range(10)]
    plan = plan_tasks(records, team(annotators=6).with_role("annotator"), overlap=1, seed=0)
    for record in records:
        who = [plan.annotators[t.task_id][0] for t in plan.tasks if t.prompt_id == record.id]
        assert len(who) == 5 and len(set(who)) == 5
    assert plan.shared == []


def test_overlap_gives_distinct_annotators_per_task_and_balances_load():
    records = [prompt(f"p{i}", 4) for i in range(12)]
    plan = plan_tasks(records, team(annotators=8).with_role("annotator"), overlap=2, seed=1)
    for task in plan.tasks:
        assert len(plan.annotators[task.task_id]) == 2 and len(set(plan.annotators[task.task_id])) == 2
    for record in records:  # 4 tasks x 2 = 8 people: nobody twice on a prompt
        names = [n for t in plan.tasks if t.prompt_id == record.id for n in plan.annotators[t.task_id]]
        assert len(set(names)) == 8
    load = Counter(n for names in plan.annotators.values() for n in names)
    assert max(load.values()) - min(load.values()) <= 1


def test_a_small_team_shares_prompts_but_never_a_task():
    plan = plan_tasks([prompt("p", 5)], team(annotators=3).with_role("annotator"), overlap=2, seed=0)
    assert plan.shared == ["p"] and plan.wanted == 10  # 5 tasks × overlap 2
    assert all(len(set(v)) == 2 for v in plan.annotators.values())
    with pytest.raises(InputError, match="overlap 3 needs 3 annotators"):
        plan_tasks([prompt("p", 3)], team(annotators=2).with_role("annotator"), overlap=3, seed=0)


def test_category_match_is_preferred():
    people = [Person(name="math", categories=["数学"]), Person(name="code", categories=["代码"])]
    people += [Person(name=f"g{i}") for i in range(3)]
    records = [prompt(f"m{i}", 2, category="数学") for i in range(5)] + [
        prompt(f"c{i}", 2, category="代码") for i in range(5)
    ]
    plan = plan_tasks(records, people, overlap=1, seed=0)
    for task in plan.tasks:
        assert plan.annotators[task.task_id] == ["math" if task.prompt_id.startswith("m") else "code"]


def test_shown_order_differs_between_people_and_is_a_permutation():
    orders = {tuple(shown_order(0, f"item-{i}", ["r1", "r2", "r3"])) for i in range(30)}
    assert len(orders) == 6
    assert shown_order(0, "x", ["r1", "r2", "r3"]) == shown_order(0, "x", ["r1", "r2", "r3"])


def test_demo_sample_with_five_annotators():
    records = read_records("src/cheems/assets/demo/open.jsonl").records
    plan = plan_tasks(records, team(annotators=5).with_role("annotator"), overlap=1, seed=0)
    assert len(plan.tasks) == sum(len(r.responses) for r in records)
    assert plan.shared == []


def test_people_file_errors_name_line_and_key(tmp_path):
    path = tmp_path / "people.yaml"
    path.write_text("people:\n  - {name: a}\n  - {name: a, role: reviewer}\n", encoding="utf-8")
    with pytest.raises(InputError, match="listed twice") as e:
        load_people(path)
    assert e.value.line == 3
    path.write_text("people:\n  - {name: a, role: boss}\n", encoding="utf-8")
    with pytest.raises(InputError, match="role"):
        load_people(path)
    path.write_text("people:\n  - {name: r, role: reviewer}\n", encoding="utf-8")
    with pytest.raises(InputError, match="no annotator"):
        load_people(path)


@pytest.mark.parametrize(
    ("second", "why"),
    [
        ('"a\\0b"', "control or invisible character U+0000"),
        ('"a\\u0007b"', "control or invisible character U+0007"),
        ('"a\\u200bb"', "control or invisible character U+200B"),  # zero-width space
        ('"a\\u202eb"', "control or invisible character U+202E"),  # right-to-left override
        ('"a\\tb"', "control or invisible character U+0009"),
        ('"x' + "y" * 200_000 + '"', "name is 200,001 characters long (at most 64)"),
        ('"a "', "has spaces around it"),
        ('"   "', "name is empty"),
        ("A", "'A' looks like 'a'"),
        ('"\\uff41"', "looks like 'a'"),  # full-width a
        ('"cafe\\u0301"', "'cafe\\u0301' is 'caf\\xe9' in another Unicode form"),
    ],
)
def test_people_names_are_visible_short_and_unlike_each_other(tmp_path, second, why):
    path = tmp_path / "people.yaml"
    path.write_text(f'people:\n  - {{name: a}}\n  - {{name: "caf\\u00e9"}}\n  - {{name: {second}}}\n', encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(why)) as e:
        load_yaml_model(path, People)
    assert e.value.line == 4 and e.value.field == "people.2.name"
    assert len(str(e.value)) < 300  # a 200 KB name is not echoed


def test_people_names_in_any_script_load(tmp_path):
    path = tmp_path / "people.yaml"
    path.write_text('people:\n  - {name: 张三}\n  - {name: "caf\\u00e9"}\n  - {name: Ann Lee}\n', encoding="utf-8")
    assert [p.name for p in load_people(path).people] == ["张三", "café", "Ann Lee"]
    path.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="the people list file is empty"):
        load_people(path)


# ------------------------------------------------------------------------ answers


def test_ranking_grammar():
    assert parse_ranking("A>C=B", "ABC") == [["A"], ["C", "B"]]
    assert parse_ranking(" A = B > C ", "ABC") == [["A", "B"], ["C"]]
    for bad, why in [
        ("A>B", "misses C"),
        ("A>B>C>A", "repeats A"),
        ("A>B>D", "names 'D'"),
        ("", "names ''"),
        ("AB>C", "names 'AB'"),
    ]:
        with pytest.raises(AnswerError, match=why):
            parse_ranking(bad, "ABC")


def test_contradictions_and_override():
    assert contradictions({"A": 4, "B": 2, "C": 4}, [["B"], ["A"], ["C"]]) == [("A", "B"), ("C", "B")]
    assert contradictions({"A": 4, "B": 4, "C": 2}, [["B"], ["A"], ["C"]]) == []  # equal scores: any order
    assert contradictions({"A": 4, "B": 2}, [["A", "B"]]) == []  # a tie is not "ranked lower"
    answer = Answer(scores={"A": 4, "B": 2, "C": 4}, ranking="B>A>C")
    with pytest.raises(AnswerError, match="override"):
        check_answer(answer, "ABC")
    assert check_answer(answer.model_copy(update={"override": True}), "ABC") == [["B"], ["A"], ["C"]]


def test_spans_must_lie_in_the_response():
    texts = {"A": "一二三", "B": "四五", "C": "六"}
    ok = Answer(
        scores={"A": 3, "B": 3, "C": 3}, ranking="A=B=C", spans=[{"key": "A", "start": 0, "end": 3, "label": "factual"}]
    )
    assert check_answer(ok, "ABC", texts)
    for span in (
        {"key": "A", "start": 2, "end": 4, "label": "factual"},
        {"key": "B", "start": 1, "end": 1, "label": "harmful"},
    ):
        with pytest.raises(AnswerError, match="spans"):
            check_answer(Answer.model_validate({**ok.model_dump(), "spans": [span]}), "ABC", texts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=3, max_size=3), st.lists(st.integers(0, 3), min_size=3, max_size=3))
def test_agreement_is_the_share_of_pairs_labelled_alike(x, y):
    order = ["r1", "r2", "r3"]

    def levels(values):
        return [[r for r, v in zip(order, values) if v == k] for k in sorted(set(values))]

    one, two = pair_labels(levels(x), order), pair_labels(levels(y), order)
    expected = sum(one[p] == two[p] for p in one) / 3
    assert agreement(levels(x), levels(y), order) == expected
    for (a, b), label in one.items():  # lower value = better
        i, j = order.index(a), order.index(b)
        assert label == ("tie" if x[i] == x[j] else "a" if x[i] < x[j] else "b")


def test_init_plans_no_task_that_shows_one_text_twice(tmp_path):
    """A pool with one text twice (two samples of one model, or a model and a hand-written answer): init keeps
    the text once by the pool rule (``generate``'s), so no task compares a text with itself."""
    from cheems.annotate.store import Project

    record = prompt("p", 4)
    copy = record.responses[0].model_copy(update={"id": "r1-again", "model": "m"})
    record = record.model_copy(update={"responses": [*record.responses, copy]})
    project, _, _ = Project.create(tmp_path / "proj", [record], team(annotators=4))
    snapshot = project.snapshot()
    project.close()
    stored = snapshot.prompts["p"]
    assert [r.id for r in stored.responses] == ["r1", "r2", "r3", "r4"]
    assert stored.responses[0].merged == ["r1-again"] and stored.responses[0].models == ["m"]
    text = {r.id: r.content for r in stored.responses}
    for task in snapshot.tasks:
        assert len({text[rid] for rid in task.responses}) == len(task.responses)
    assert sorted({rid for task in snapshot.tasks for rid in task.responses}) == ["r1", "r2", "r3", "r4"]
