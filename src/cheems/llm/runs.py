"""What every run of a chat model (a judge, a generator) writes and says when it stops: its files, where its work is."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from cheems.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from cheems.outputs import Named


class _Result(Protocol):
    records: list[Any]
    failures: list[Any]

    @property
    def stats(self) -> Any: ...


R = TypeVar("R", bound=_Result)


@dataclass
class ChatRun(Generic[R]):
    """A finished judge or generation run: its result, the output it wrote, its failures list (None: no failure)."""

    result: R
    output: Path
    failures: Path | None


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


def run_to_files(
    output: Path, stats_json: Path | None, inputs: Sequence[Named], cache: Path, what: str, run: Callable[[], R]
) -> ChatRun[R]:
    """Claim the run's files (``output``, its failures list, ``stats_json``; none may replace one of ``inputs``),
    ``run`` it, and write its files together (:func:`write_run`). ``what`` the run caches in ``cache``, for the
    note of an interrupted run. One run at a time writes ``output`` (:func:`cheems.outputs.run_lock`): a second
    is refused, as it would write the file without the first one's results."""
    from cheems.outputs import claim_outputs, run_lock

    side = failures_path(output)
    claim_outputs(
        inputs=inputs,
        files=[("--output", output), ("failures list of --output", side), ("--stats-json", stats_json)],
        note=f"finished {what} are in {cache}; rerun the same command to resume",
    )
    with run_lock(output, what):
        result = run()
        write_run(output, result.records, result.failures, side, stats_json, result.stats.to_dict())
    return ChatRun(result, output, side if result.failures else None)


def write_run(
    output: Path, records: list[Any], failures: list[Any], side: Path, stats_json: Path | None, stats: dict[str, Any]
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


def summary_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """A run's summary: a two-column table without header."""
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("n", justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def request_rows(stats: Any, reason_text: Callable[[str], str] | None = None) -> list[tuple[str, str]]:
    """The rows of a run against an endpoint (judge or generate): failures by reason (in words by ``reason_text``,
    default :func:`cheems.llm.replies.failure_text`), the budget, requests, tokens."""
    from cheems.llm.replies import failure_text

    text = reason_text or failure_text
    return [
        ("failed", str(stats.failed_total)),
        *((f"  {reason}: {text(reason)}", str(n)) for reason, n in sorted(stats.failed.items())),
        ("not attempted (budget)", str(stats.not_attempted)),
        ("requests sent", str(stats.requests)),
        ("tokens in / out", f"{stats.prompt_tokens} / {stats.completion_tokens}"),
    ]


def print_budget_reached(console: Console, stats: Any, items: str, cached: str) -> None:
    """What to do when the request budget ran out: rerun, the cache keeps what was done."""
    if stats.budget_exhausted:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(
                ("request budget reached", "yellow"),
                f": {stats.not_attempted} {items} not asked; "
                f"rerun the same command to resume (cached {cached} are reused)",
            )
        )
