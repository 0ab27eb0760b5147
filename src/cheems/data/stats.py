"""Dataset statistics in the shape of the paper's Table 1."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cheems.data.schema import Record


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


def dataset_stats(records: list[Record]) -> DatasetStats:
    """Prompts, responses, comparisons (no ties) and mean prompt / chosen / rejected lengths."""
    n_prompts = len(records)
    n_responses = sum(len(r.responses) for r in records)
    n_pairs = chosen_chars = rejected_chars = 0
    for record in records:
        length = {resp.id: len(resp.content) for resp in record.responses}
        for chosen, rejected in preference_pairs(record):
            n_pairs += 1
            chosen_chars += length[chosen]
            rejected_chars += length[rejected]
    return DatasetStats(
        prompts=n_prompts,
        responses=n_responses,
        responses_per_prompt=_mean(n_responses, n_prompts),
        comparisons=n_pairs,
        avg_prompt_chars=_mean(sum(prompt_chars(r) for r in records), n_prompts),
        avg_chosen_chars=_mean(chosen_chars, n_pairs),
        avg_rejected_chars=_mean(rejected_chars, n_pairs),
    )
