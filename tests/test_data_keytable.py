"""cheems.data.keytable: KeyLog (a stream's duplicate check kept as digests) answers as a dict of first
sightings; ScoreTable lists unused scores and repeated rows by their lines without keeping the lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cheems.data.keytable import KeyLog, read_score_table
from cheems.errors import InputError


@given(st.lists(st.tuples(st.text(max_size=3), st.text(max_size=2)), max_size=80), st.integers(1, 6))
def test_key_log_answers_as_a_dict_of_first_sightings(keys, batch) -> None:
    log = KeyLog()
    log.BATCH = batch  # merges into the sorted table every few keys, so that both halves are looked up
    first: dict[tuple[str, str], int] = {}
    for value, key in enumerate(keys):
        assert log.first(key, value) == first.get(key)
        first.setdefault(key, value)
    assert len(log) == len(first)


def test_key_log_tells_keys_of_the_same_text_apart() -> None:
    log = KeyLog()
    assert log.first(("ab", "c"), 1) is None
    assert log.first(("a", "bc"), 2) is None
    assert log.first(("ab", "c"), 3) == 1


def _scores(path: Path, rows: list[tuple[str, str, float] | None]) -> Path:
    lines = ["" if r is None else json.dumps({"prompt_id": r[0], "response_id": r[1], "score": r[2]}) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_score_table_lists_the_scores_never_looked_up_in_file_order(tmp_path) -> None:
    path = _scores(tmp_path / "s.jsonl", [("q", "b", 1.0), None, ("p", "a", 2.0), ("q", "a", 3.0), ("p", "b", 4.0)])
    table = read_score_table(path)
    assert table.get_many("p", ["a", "b", "c"]) == {("p", "a"): 2.0, ("p", "b"): 4.0}
    assert table.unused() == [("q", "b"), ("q", "a")]
    table.get_many("q", ["a", "b"])
    assert table.unused() == []


def test_score_table_names_the_line_of_a_repeat_past_blank_lines(tmp_path) -> None:
    path = _scores(tmp_path / "s.jsonl", [("p", "a", 1.0), None, None, ("p", "b", 2.0), ("p", "a", 3.0)])
    with pytest.raises(InputError) as error:
        read_score_table(path)
    assert str(error.value).startswith(f"{path}:5: second score for prompt 'p' response 'a'")
