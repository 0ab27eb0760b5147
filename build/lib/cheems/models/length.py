"""The length baseline: longer answers score higher (the bias every RM should beat)."""

from __future__ import annotations

from collections.abc import Sequence

from cheems.models.base import ScoreItem


class LengthScorer:
    """Score = number of characters of the response."""

    name = "length"

    def fingerprint(self) -> str:
        """Constant: the score depends on nothing but the response."""
        return "length-v1"

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        """Character count of each response."""
        return [float(len(response)) for _, response in items]
