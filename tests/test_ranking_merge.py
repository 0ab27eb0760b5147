"""One record per prompt: the same prompt in several files merged (responses by text, comparisons unioned)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.ranking import merge_same_prompts, training_pairs
from cheems.train.data import read_training_records
from helpers import write_jsonl


def rec(pid: str, responses: dict[str, str], comparisons=(), rank=None, **extra) -> Record:
    return Record.model_validate(
        {
            "id": pid,
            "input": f"问题{pid}",
            "responses": [{"id": k, "content": v} for k, v in responses.items()],
            "comparisons": [{"a": a, "b": b, "label": lab} for a, b, lab in comparisons],
            "rank": rank,
            **extra,
        }
    )


def texts(record: Record) -> dict[str, str]:
    return {r.id: r.content for r in record.responses}


def judged(record: Record) -> set[tuple[str, str, str]]:
    """The comparisons as (text a, text b, label): what must survive a merge whatever the ids."""
    t = texts(record)
    return {(t[c.a], t[c.b], c.label) for c in record.comparisons}


def test_same_prompt_in_two_files_is_one_record_with_responses_by_text():
    a = rec("p1", {"r1": "甲", "r2": "乙"}, [("r1", "r2", "a")])
    b = rec("p1", {"x": "乙", "y": "丙"}, [("x", "y", "a")])  # 乙 is the same response under another id
    other = rec("p2", {"r1": "丁", "r2": "戊"}, [("r1", "r2", "b")])
    merged, stats = merge_same_prompts([("a.jsonl", [a, other]), ("b.jsonl", [b])])
    assert [r.id for r in merged] == ["p1", "p2"]  # first appearance keeps its place
    one = merged[0]
    assert texts(one) == {"r1": "甲", "r2": "乙", "y": "丙"}
    assert [(c.a, c.b, c.label) for c in one.comparisons] == [("r1", "r2", "a"), ("r2", "y", "a")]  # ids remapped
    assert judged(one) == judged(a) | judged(b)
    assert training_pairs(one) == [("r1", "r2"), ("r2", "y")]
    assert stats.to_dict() == {
        "records_in": 3,
        "records_out": 2,
        "prompts_merged": 1,
        "records_merged": 1,
        "same_responses": 1,
        "renamed_responses": 0,
        "same_comparisons": 0,
        "ranks_resolved": 0,
    }
    assert stats.records_in == stats.records_out + stats.records_merged


def test_an_id_used_for_another_text_is_renamed_and_repeated_comparisons_kept_once():
    a = rec("p1", {"r1": "甲", "r2": "乙"}, [("r1", "r2", "a")])
    b = rec("p1", {"r1": "甲", "r2": "丙"}, [("r1", "r2", "a")])  # r2 is another text here
    c = rec("p1", {"q": "乙", "w": "甲"}, [("w", "q", "a")])  # the same judgement as a's, other ids
    merged, stats = merge_same_prompts([("a", [a]), ("b", [b]), ("c", [c])])
    one = merged[0]
    assert texts(one) == {"r1": "甲", "r2": "乙", "r2-2": "丙"}
    assert judged(one) == judged(a) | judged(b) | judged(c) and len(one.comparisons) == 2
    assert (stats.renamed_responses, stats.same_responses, stats.same_comparisons) == (1, 3, 1)


def test_ranks_that_agree_are_kept_and_ranks_that_disagree_are_resolved_again():
    a = rec("p1", {"r1": "甲", "r2": "乙"}, rank={"r1": 1, "r2": 2})
    same = rec("p1", {"x": "甲", "y": "乙"}, rank={"x": 1, "y": 2})
    merged, stats = merge_same_prompts([("a", [a]), ("b", [same])])
    assert merged[0].rank == {"r1": 1, "r2": 2} and stats.ranks_resolved == 0 and not merged[0].comparisons
    # another file ranks a third response between them, and one flips the order: resolved from all judgements
    b = rec("p1", {"x": "甲", "z": "丙"}, rank={"x": 1, "z": 2})
    flip = rec("p1", {"y": "乙", "x": "甲"}, rank={"y": 1, "x": 2})
    merged, stats = merge_same_prompts([("a", [a]), ("b", [b]), ("c", [flip])])
    one = merged[0]
    assert stats.ranks_resolved == 1
    assert set(one.rank) == {"r1", "r2", "z"}  # every response of every file is ranked
    assert one.rank["r1"] == one.rank["r2"] < one.rank["z"]  # 甲 > 乙 and 乙 > 甲: a cycle, merged into one layer
    assert {c.source for c in one.comparisons} == {"rank"}  # the ranks' own pairs, nothing invented
    assert training_pairs(one) == [("r1", "z")]  # only the judged pair that agrees; 乙 vs 丙 was never compared


def test_a_record_with_only_responses_adds_responses_and_keeps_the_rank():
    a = rec("p1", {"r1": "甲", "r2": "乙"}, rank={"r1": 1, "r2": 2})
    b = rec("p1", {"n": "新"})
    merged, stats = merge_same_prompts([("a", [a]), ("b", [b])])
    assert texts(merged[0]) == {"r1": "甲", "r2": "乙", "n": "新"} and merged[0].rank == {"r1": 1, "r2": 2}
    assert stats.ranks_resolved == 0


@pytest.mark.parametrize(
    "change,field", [({"input": "另一个问题"}, "input"), ({"sys_prompt": "你是助手"}, "sys_prompt")]
)
def test_the_same_id_for_another_prompt_is_an_error_naming_both_files(change, field):
    a = rec("p1", {"r1": "甲"})
    b = Record.model_validate({**a.model_dump(), **change})
    with pytest.raises(InputError) as e:
        merge_same_prompts([("a.jsonl", [a]), ("b.jsonl", [b])])
    assert e.value.path == "b.jsonl" and e.value.field == field and "a.jsonl" in str(e.value)


def test_training_files_are_merged_but_one_file_with_an_id_twice_is_still_an_error(tmp_path: Path):
    a = write_jsonl(tmp_path / "a.jsonl", [rec("p1", {"r1": "甲", "r2": "乙"}, [("r1", "r2", "a")]).to_json()])
    b = write_jsonl(tmp_path / "b.jsonl", [rec("p1", {"r1": "乙", "r3": "丙"}, [("r1", "r3", "a")]).to_json()])
    records, stats = read_training_records([str(a), str(b)])
    assert len(records) == 1 and stats.prompts_merged == 1 and len(records[0].responses) == 3
    twice = write_jsonl(tmp_path / "twice.jsonl", [json.loads(a.read_text())] * 2)
    with pytest.raises(InputError, match="duplicate prompt id"):
        read_training_records([str(twice)])


TEXT = st.sampled_from(["甲", "乙", "丙", "丁", "戊"])


@st.composite
def files(draw) -> list[tuple[str, list[Record]]]:
    """Up to 4 files, each with some of 3 prompts, random response ids and texts, random comparisons."""
    out = []
    for f in range(draw(st.integers(1, 4))):
        records = []
        for pid in draw(st.lists(st.sampled_from(["p1", "p2", "p3"]), unique=True)):
            contents = draw(st.lists(TEXT, min_size=1, max_size=4))
            ids = draw(
                st.lists(
                    st.sampled_from(["r1", "r2", "r3", "r4", "r5"]),
                    min_size=len(contents),
                    max_size=len(contents),
                    unique=True,
                )
            )
            comps = draw(
                st.lists(
                    st.tuples(st.sampled_from(ids), st.sampled_from(ids), st.sampled_from(["a", "b", "tie"])),
                    max_size=4,
                )
            )
            records.append(rec(pid, dict(zip(ids, contents)), comps))
        out.append((f"f{f}.jsonl", records))
    return out


@settings(max_examples=150, deadline=None)
@given(files())
def test_nothing_is_lost(inputs):
    merged, stats = merge_same_prompts(inputs)
    by_id = {r.id: r for r in merged}
    assert len(by_id) == len(merged) == stats.records_out
    assert stats.records_in == sum(len(rs) for _, rs in inputs) == stats.records_out + stats.records_merged
    for _, records in inputs:
        for record in records:
            out = by_id[record.id]
            assert set(texts(record).values()) <= set(texts(out).values())  # every response text survives
            assert judged(record) <= judged(out)  # every judgement survives (ids mapped by text)
    for record in merged:  # a valid record: unique ids, comparisons name known responses
        Record.model_validate(record.model_dump())
