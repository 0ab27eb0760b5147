"""Dataset statistics in the shape of the paper's Table 1, and a pool's responses per model and category."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.data.io import ReadResult
from cheems.data.schema import UNCATEGORISED, Record
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


NO_MODEL = "(no model)"


@dataclass
class PoolCounts:
    """Who wrote a pool's responses and what its prompts are about; sums record by record, in any grouping.

    A response stored once for several models (``models``, see ``cheems generate``) counts for each of them.
    """

    responses: Counter[str] = field(default_factory=Counter)  # model -> responses
    prompts: Counter[str] = field(default_factory=Counter)  # model -> prompts it answered
    categories: Counter[tuple[str, str]] = field(default_factory=Counter)  # (main, sub) -> prompts
    category_responses: Counter[str] = field(default_factory=Counter)  # main category -> responses

    def __iadd__(self, other: PoolCounts) -> PoolCounts:
        for name in ("responses", "prompts", "categories", "category_responses"):
            getattr(self, name).update(getattr(other, name))
        return self

    def main_categories(self) -> Counter[str]:
        """Prompts per main category."""
        out: Counter[str] = Counter()
        for (main, _), n in self.categories.items():
            out[main] += n
        return out


def pool_counts(record: Record) -> PoolCounts:
    """One record's share of :class:`PoolCounts`: its category path is (main, sub), sub ``""`` when absent."""
    counts = PoolCounts()
    for response in record.responses:
        counts.responses.update(response.all_models or [NO_MODEL])
    counts.prompts.update(set(counts.responses))
    main = record.main_category
    counts.categories[main, record.category[1] if len(record.category) > 1 else ""] = 1
    counts.category_responses[main] = len(record.responses)
    return counts


@dataclass
class FileStats:
    """One record file's statistics, pool counts and what reading it skipped or warned of."""

    path: str | Path
    stats: DatasetStats
    pool: PoolCounts
    issues: ReadResult


def _file_counts(record: Record) -> tuple[Counts, PoolCounts]:
    return record_counts(record), pool_counts(record)


def file_stats(
    paths: Iterable[str | Path], *, skip_invalid: bool = False, workers: int | None = None
) -> Iterator[FileStats]:
    """Each record file's statistics (:class:`FileStats`), a file at a time, as ``cheems validate`` prints
    them; the records are streamed, not kept."""
    for path in paths:
        issues, total, pool = ReadResult(), Counts(), PoolCounts()
        for counts, share in stream_records(
            path,
            _file_counts,
            skip_invalid=skip_invalid,
            issues=issues,
            workers=workers,
            progress=f"{path}",
            prompts=True,  # a prompt pool (no responses yet) is a valid input: its prompts and categories count
        ):
            total += counts
            pool += share
        yield FileStats(path, total.stats(), pool, issues)


def print_stats(rows: Sequence[FileStats], console: Console) -> None:
    """The statistics of each file as one row of a table (fits an 80-column terminal: short headings on two
    lines, explained in the caption; numbers never wrap, so only a long file name folds); then, over all the
    files, responses per model when any response names its model and prompts per category when any has one."""
    from rich import box
    from rich.table import Table

    caption = "pairs: comparisons without ties; length: mean characters"
    table = Table(title="dataset statistics", caption=caption, box=box.SIMPLE_HEAVY, collapse_padding=True)
    table.add_column("file", overflow="fold")
    for col in ("prompts", "responses", "per\nprompt", "pairs", "prompt\nlength", "chosen\nlength", "rejected\nlength"):
        table.add_column(col, justify="right", no_wrap=True)
    pool = PoolCounts()
    for row in rows:
        s = row.stats
        pool += row.pool
        table.add_row(
            str(row.path),
            str(s.prompts),
            str(s.responses),
            f"{s.responses_per_prompt:.2f}",
            str(s.comparisons),
            f"{s.avg_prompt_chars:.1f}",
            f"{s.avg_chosen_chars:.1f}",
            f"{s.avg_rejected_chars:.1f}",
        )
    console.print(table)
    if set(pool.responses) - {NO_MODEL}:
        console.print(_model_table(pool))
    if set(pool.category_responses) - {UNCATEGORISED}:
        console.print(_category_table(pool))


def _share(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%" if total else "-"


def _model_table(pool: PoolCounts) -> Any:
    from rich import box
    from rich.table import Table

    caption = "a shared text counts for each"
    table = Table(title="responses per model", caption=caption, box=box.SIMPLE_HEAVY, collapse_padding=True)
    table.add_column("model", overflow="fold")
    for col in ("responses", "share", "prompts"):
        table.add_column(col, justify="right", no_wrap=True)
    total = sum(pool.responses.values())
    for name, n in sorted(pool.responses.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(name, str(n), _share(n, total), str(pool.prompts[name]))
    return table


def _category_table(pool: PoolCounts) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title="prompts per category", box=box.SIMPLE_HEAVY, collapse_padding=True)
    table.add_column("category", overflow="fold")
    for col in ("prompts", "share", "responses", "sub-\ncategories"):
        table.add_column(col, justify="right", no_wrap=True)
    mains = pool.main_categories()
    total = sum(mains.values())
    subs = Counter(main for main, sub in pool.categories if sub)
    for main, n in sorted(mains.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(main, str(n), _share(n, total), str(pool.category_responses[main]), str(subs[main]))
    return table
