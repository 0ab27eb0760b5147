"""Small builders for records used across tests."""

from __future__ import annotations

from cheems.data.schema import Record


def record(n: int, comparisons: list[tuple[str, str, str]] = (), rank: dict | None = None, pid: str = "p", category: str = "c") -> Record:
    """A record with responses r1..rn and comparisons given as (a, b, label)."""
    return Record.model_validate({
        "id": pid,
        "input": "问题",
        "category": [category],
        "responses": [{"id": f"r{i}", "content": f"回答{i}"} for i in range(1, n + 1)],
        "comparisons": [{"a": a, "b": b, "label": lab} for a, b, lab in comparisons],
        "rank": rank,
    })
