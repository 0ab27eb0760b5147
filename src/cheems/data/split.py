"""A fixed train / test split of records by prompt, for held-out evaluation.

The split depends only on each record's id and the seed: every prompt gets a key
``sha256(seed:id)``, records are sorted by it and the first ``round(fraction * n)`` form
the test split. So the same file always splits the same way, whatever its line order,
on any machine and Python version (no ``hash()`` salt, no RNG state).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path

from pydantic import Field

from cheems.data.io import ReadResult, record_line
from cheems.data.schema import Record
from cheems.data.stream import stream_records
from cheems.outputs import atomic_file, claim_outputs, together
from cheems.settings import Settings


class SplitSettings(Settings):
    """How ``cheems split`` (:func:`split_file`) holds prompts out."""

    test_fraction: float = Field(0.2, ge=0, le=1, description="Share of prompts held out.")
    seed: int = Field(0, description="Changes which prompts are held out.")


def _split_key(seed: int, record_id: str) -> str:
    return hashlib.sha256(f"{seed}:{record_id}".encode("utf-8")).hexdigest()


def split_records(
    records: list[Record], test_fraction: float = 0.2, seed: int = 0
) -> tuple[list[Record], list[Record]]:
    """(train, test): ``round(test_fraction * len(records))`` prompts held out; both keep the input order.

    Records sharing an id (the same prompt twice) always land on the same side, so no prompt
    is in both splits.
    """
    held_out = held_out_ids([r.id for r in records], test_fraction, seed)
    train = [r for r in records if r.id not in held_out]
    test = [r for r in records if r.id in held_out]
    return train, test


def held_out_ids(ids: Iterable[str], test_fraction: float = 0.2, seed: int = 0) -> set[str]:
    """The ids of the test split: the first ``round(test_fraction * n)`` of the ``n`` distinct ids by split key."""
    if not 0 <= test_fraction <= 1:
        raise ValueError(f"test_fraction must be in [0, 1], got {test_fraction}")
    ordered = sorted(set(ids), key=lambda rid: _split_key(seed, rid))
    return set(ordered[: round(test_fraction * len(ordered))])


def record_id(record: Record) -> str:
    """The id of a record (what the first pass of a streamed split needs, and nothing more)."""
    return record.id


def id_and_line(record: Record) -> tuple[str, str]:
    """(id, output line) of a record (the second pass of a streamed split)."""
    return record.id, record_line(record)


def split_file(
    source: str | Path,
    train: str | Path,
    test: str | Path,
    settings: SplitSettings | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> tuple[int, int, ReadResult]:
    """Split a record file into ``train`` and ``test`` files (both or neither written), as ``cheems split``:
    the number of records in each, and the lines skipped.

    Two passes over ``source``: which prompts are held out depends on every id; the records are not kept.
    ``train`` and ``test`` are claimed first (:func:`cheems.outputs.claim_outputs`): never ``source``, never one file.
    """
    claim_outputs(inputs=[("IN", source)], files=[("--train", train), ("--test", test)])
    settings = settings or SplitSettings()
    ids = stream_records(source, record_id, skip_invalid=skip_invalid, workers=workers, progress="split: ids")
    held_out = held_out_ids(ids, settings.test_fraction, settings.seed)
    issues, counts = ReadResult(), {"train": 0, "test": 0}
    with together(), ExitStack() as files:
        out = {side: files.enter_context(atomic_file(path)) for side, path in (("train", train), ("test", test))}
        lines = stream_records(
            source, id_and_line, skip_invalid=skip_invalid, issues=issues, workers=workers, progress="split: writing"
        )
        for rid, line in lines:
            side = "test" if rid in held_out else "train"
            out[side].write(line + "\n")
            counts[side] += 1
    return counts["train"], counts["test"], issues
