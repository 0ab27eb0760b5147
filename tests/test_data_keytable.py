"""cheems.data.keytable.KeyLog: a stream's duplicate check kept as digests, answering as a dict of first sightings."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cheems.data.keytable import KeyLog


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
