"""What every run of a chat model (a judge, a generator) writes and says when it stops: its files, where its work is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cheems.errors import InputError


def with_saved_note(e: InputError, saved_in: str) -> InputError:
    """``e`` with a note that the judgements finished before it are not lost."""
    return InputError(
        e.message, path=e.path, line=e.line, field=e.field, hint=f"{e.hint}; {saved_in}" if e.hint else saved_in
    )


def failures_path(output: Path) -> Path:
    """``OUT.failures.jsonl`` beside the output (``judged.jsonl`` -> ``judged.failures.jsonl``)."""
    return (
        output.with_name(output.stem + ".failures.jsonl")
        if output.suffix
        else output.with_name(output.name + ".failures.jsonl")
    )


def write_run(
    output: Path, records: list, failures: list, side: Path, stats_json: Path | None, stats: dict[str, Any]
) -> None:
    """A judge or generation run's files, together: the records, the failures list beside them, the statistics.

    With no failures, a failures list left by an earlier run is removed: it would mislead.
    """
    from cheems.data.io import write_json, write_jsonl, write_records
    from cheems.outputs import together

    with together():
        write_records(output, records)
        if failures:
            write_jsonl(side, (f.to_dict() for f in failures))
        if stats_json:
            write_json(stats_json, stats)
    if not failures and side.exists():
        side.unlink()
