"""Dataset statistics in the shape of the paper's Table 1."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.data.io import ReadResult
from cheems.data.schema import Record
from cheems.data.stream import stream_records

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class DatasetStats:
    """Counts and average lengths (in characters) of a set of records."""

    prompts: int = 0
    responses: int = 0
    responses_per_prompt: float = 0.0
    comparisons: int = 0  # ties excluded
    avg_prompt_chars: float = 0.0
    avg_chosen_chars: float = 0.0
    avg_rejected_chars: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        return asdict(self)


def prompt_chars(record: Record) -> int:
    """Length of the prompt; for a chat list, the sum of its messages' contents."""
    if isinstance(record.input, str):
        return len(record.input)
    return sum(len(m.content) for m in record.input)


def preference_pairs(record: Record) -> list[tuple[str, str]]:
    """(chosen, rejected) ids: the non-tie comparisons when there are any, else the pairs its rank implies."""
    pairs = [wl for c in record.comparisons if (wl := c.winner_loser()) is not None]
    return pairs or record.ranked_pairs()


def _mean(total: int, n: int) -> float:
    return total / n if n else 0.0


@dataclass
class Counts:
    """The integer sums behind :class:`DatasetStats`: they add up record by record, in any grouping."""

    prompts: int = 0
    responses: int = 0
    pairs: int = 0
    prompt_chars: int = 0
    chosen_chars: int = 0
    rejected_chars: int = 0

    def __iadd__(self, other: "Counts") -> "Counts":
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)
        return self

    def stats(self) -> DatasetStats:
        """Counts and mean lengths."""
        return DatasetStats(
            prompts=self.prompts,
            responses=self.responses,
            responses_per_prompt=_mean(self.responses, self.prompts),
            comparisons=self.pairs,
            avg_prompt_chars=_mean(self.prompt_chars, self.prompts),
            avg_chosen_chars=_mean(self.chosen_chars, self.pairs),
            avg_rejected_chars=_mean(self.rejected_chars, self.pairs),
        )


def record_counts(record: Record) -> Counts:
    """One record's share of the dataset statistics."""
    length = {resp.id: len(resp.content) for resp in record.responses}
    counts = Counts(prompts=1, responses=len(record.responses), prompt_chars=prompt_chars(record))
    for chosen, rejected in preference_pairs(record):
        counts.pairs += 1
        counts.chosen_chars += length[chosen]
        counts.rejected_chars += length[rejected]
    return counts


def dataset_stats(records: Iterable[Record]) -> DatasetStats:
    """Prompts, responses, comparisons (no ties) and mean prompt / chosen / rejected lengths."""
    total = Counts()
    for record in records:
        total += record_counts(record)
    return total.stats()


def file_stats(
    paths: Iterable[str | Path], *, skip_invalid: bool = False, workers: int | None = None
) -> Iterator[tuple[DatasetStats, ReadResult]]:
    """Each record file's statistics and what reading it skipped or warned of, a file at a time, as
    ``cheems validate`` prints them; the records are streamed, not kept."""
    for path in paths:
        issues, total = ReadResult(), Counts()
        for counts in stream_records(
            path, record_counts, skip_invalid=skip_invalid, issues=issues, workers=workers, progress=f"{path}"
        ):
            total += counts
        yield total.stats(), issues


def print_stats(rows: Sequence[tuple[str | Path, DatasetStats]], console: Console) -> None:
    """The statistics of each file as one row of a table (fits an 80-column terminal: short headings on two
    lines, explained in the caption; numbers never wrap, so only a long file name folds)."""
    from rich import box
    from rich.table import Table

    caption = "pairs: comparisons without ties; length: mean characters"
    table = Table(title="dataset statistics", caption=caption, box=box.SIMPLE_HEAVY, collapse_padding=True)
    table.add_column("file", overflow="fold")
    for col in ("prompts", "responses", "per\nprompt", "pairs", "prompt\nlength", "chosen\nlength", "rejected\nlength"):
        table.add_column(col, justify="right", no_wrap=True)
    for path, s in rows:
        table.add_row(
            str(path),
            str(s.prompts),
            str(s.responses),
            f"{s.responses_per_prompt:.2f}",
            str(s.comparisons),
            f"{s.avg_prompt_chars:.1f}",
            f"{s.avg_chosen_chars:.1f}",
            f"{s.avg_rejected_chars:.1f}",
        )
    console.print(table)
