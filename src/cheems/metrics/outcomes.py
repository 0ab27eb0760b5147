"""Judged pairs: every comparison of a bench and whether a scorer (or a judge) got it right.

:class:`PromptOutcome` and :class:`PairOutcome` are the readable form, one object per prompt and pair.
:class:`Outcomes` keeps one subset's prompts as numpy columns (about 20 bytes a pair instead of about
400: 3.2 million pairs at 10x paper scale) and hands them back as those objects one prompt at a time,
so the metrics read columns and everything else reads prompts.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np


@dataclass
class ShownVerdict:
    """One judge verdict on a pair: which response was shown first, and what the judge said.

    ``label`` is about the shown order: ``A`` (first shown wins), ``B``, ``C`` (tie), or None when
    no verdict could be parsed (``failure`` names why).
    """

    first: str
    label: str | None
    failure: str | None = None


@dataclass(slots=True)
class PairOutcome:
    """One comparison of the bench and whether the scorer got it right.

    Scores are set for scorers (a reward model, a scores file), ``verdicts`` for a judge.
    """

    chosen: str
    rejected: str
    correct: bool
    chosen_chars: int
    rejected_chars: int
    chosen_score: float | None = None
    rejected_score: float | None = None
    verdicts: list[ShownVerdict] | None = None

    @property
    def margin(self) -> float | None:
        """score(chosen) - score(rejected); None for a judge."""
        if self.chosen_score is None or self.rejected_score is None:
            return None
        return self.chosen_score - self.rejected_score

    def picked(self, verdict: ShownVerdict) -> str | None:
        """The response id a verdict on this pair picks, ``"tie"``, or None (no verdict)."""
        if verdict.label is None:
            return None
        if verdict.label == "C":
            return "tie"
        second = self.rejected if verdict.first == self.chosen else self.chosen
        return verdict.first if verdict.label == "A" else second


@dataclass(slots=True)
class PromptOutcome:
    """The judged comparisons of one prompt."""

    prompt_id: str
    category: str
    pairs: list[PairOutcome]

    def response_scores(self) -> dict[str, float] | None:
        """The score of every response in the prompt's ranked pairs, in order of appearance; None for a judge."""
        scores: dict[str, float] = {}
        for pair in self.pairs:
            if pair.chosen_score is None or pair.rejected_score is None:
                return None
            scores[pair.chosen], scores[pair.rejected] = pair.chosen_score, pair.rejected_score
        return scores


def _column(values: array[Any], dtype: type) -> np.ndarray:
    """An ``array.array`` as a numpy array over the same memory (no copy)."""
    return np.frombuffer(values, dtype=dtype) if len(values) else np.empty(0, dtype=dtype)


class Outcomes(Sequence[PromptOutcome]):
    """One subset's judged pairs as columns, in prompt order; indexing or iterating gives :class:`PromptOutcome`\\ s.

    Prompts are rows ``0..n-1`` (:meth:`prompt_id`, ``category`` codes into ``categories``); prompt ``i``'s pairs
    are rows ``offsets[i]:offsets[i + 1]`` of ``chosen``, ``rejected`` (rows of the response columns) and
    ``correct``. A response row has its id (a code into ``ids``), its length in characters and its score
    (NaN for a judge, whose per-pair verdicts are in ``verdicts``, by pair row). Build with :meth:`of`.
    """

    def __init__(self) -> None:
        self._prompt_ids, self._prompt_ends = bytearray(), array("q", [0])  # UTF-8, end to end: ~10 bytes an id
        self.categories: list[str] = []
        self.ids: list[str] = []
        self.verdicts: dict[int, list[ShownVerdict]] = {}
        self._category, self._offsets = array("i"), array("q", [0])
        self._chosen, self._rejected, self._correct = array("i"), array("i"), array("b")
        self._response, self._chars, self._scores = array("i"), array("i"), array("d")

    @classmethod
    def of(cls, prompts: Iterable[PromptOutcome]) -> Outcomes:
        """The columns of ``prompts`` (consumed one at a time: a stream is never held as objects)."""
        if isinstance(prompts, Outcomes):
            return prompts
        table = cls()
        category_codes: dict[str, int] = {}
        id_codes: dict[str, int] = {}
        for prompt in prompts:
            table._prompt_ids += prompt.prompt_id.encode("utf-8", "surrogatepass")
            table._prompt_ends.append(len(table._prompt_ids))
            table._category.append(category_codes.setdefault(prompt.category, len(category_codes)))
            rows: dict[
                tuple[Any, ...], int
            ] = {}  # a response's row in this prompt; a differing length or score gets its own
            for pair in prompt.pairs:
                chosen = table._row(rows, id_codes, pair.chosen, pair.chosen_chars, pair.chosen_score)
                rejected = table._row(rows, id_codes, pair.rejected, pair.rejected_chars, pair.rejected_score)
                if pair.verdicts is not None:
                    table.verdicts[len(table._chosen)] = pair.verdicts
                table._chosen.append(chosen)
                table._rejected.append(rejected)
                table._correct.append(bool(pair.correct))
            table._offsets.append(len(table._chosen))
        table.categories = list(category_codes)
        table.ids = list(id_codes)
        return table

    def _row(
        self, rows: dict[tuple[Any, ...], int], id_codes: dict[str, int], rid: str, chars: int, score: float | None
    ) -> int:
        key = (rid, chars, score)
        row = rows.get(key)
        if row is None:
            row = rows[key] = len(self._chars)
            self._response.append(id_codes.setdefault(rid, len(id_codes)))
            self._chars.append(chars)
            self._scores.append(math.nan if score is None else score)
        return row

    def prompt_id(self, index: int) -> str:
        """The id of prompt row ``index``."""
        start, end = self._prompt_ends[index], self._prompt_ends[index + 1]
        return self._prompt_ids[start:end].decode("utf-8", "surrogatepass")

    # columns
    @property
    def category(self) -> np.ndarray:
        """Each prompt's category, as a code into ``categories``."""
        return _column(self._category, np.int32)

    @property
    def offsets(self) -> np.ndarray:
        return _column(self._offsets, np.int64)

    @property
    def correct(self) -> np.ndarray:
        """Whether each pair is right (bool)."""
        return _column(self._correct, np.bool_)

    def pair_counts(self) -> np.ndarray:
        """Each prompt's number of pairs."""
        return np.diff(self.offsets)

    def right_counts(self) -> np.ndarray:
        """Each prompt's number of right pairs."""
        return self._per_prompt(self.correct)

    def reversed_counts(self) -> np.ndarray:
        """Each prompt's number of pairs scored the wrong way round, score(chosen) < score(rejected): a score tie
        is not reversed (upstream CheemsBench's exact match). For a judge (no scores), its pairs not right."""
        margins = self.margins()
        return self._per_prompt(~self.correct if margins is None else margins < 0)

    def _per_prompt(self, flags: np.ndarray) -> np.ndarray:
        """How many of each prompt's pairs have ``flags`` (one bool per pair) set."""
        # differences of a running count (one int64 array, where bincount over np.repeat needs three)
        running = np.zeros(self.n_pairs + 1, dtype=np.int64)
        running[1:] = flags
        np.cumsum(running[1:], out=running[1:])  # same dtype in and out: numpy needs no casting copy
        offsets = self.offsets
        counts: np.ndarray = running[offsets[1:]] - running[offsets[:-1]]
        return counts

    def length_signs(self) -> np.ndarray:
        """Per pair, the sign of len(chosen) - len(rejected) in characters: 1 longer, -1 shorter, 0 same (int8)."""
        chars = _column(self._chars, np.int32)  # a difference of two lengths < 2**31 fits too
        difference = chars[_column(self._chosen, np.int32)]
        difference -= chars[_column(self._rejected, np.int32)]  # in place: two pair-sized arrays at most
        signs: np.ndarray = np.sign(difference).astype(np.int8)
        return signs

    def scores(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The chosen and the rejected response's score, per pair; None when a pair has none (a judge)."""
        scores = self._response_scores()
        if scores is None:
            return None
        return scores[_column(self._chosen, np.int32)], scores[_column(self._rejected, np.int32)]

    def margins(self) -> np.ndarray | None:
        """score(chosen) - score(rejected) per pair, in order; None for a judge."""
        scores = self._response_scores()
        if scores is None:
            return None
        margins: np.ndarray = scores[_column(self._chosen, np.int32)]
        margins -= scores[_column(self._rejected, np.int32)]  # in place: two pair-sized arrays at most
        return margins

    def _response_scores(self) -> np.ndarray | None:
        """The score of every response row; None when one has none (every row belongs to a pair)."""
        scores = _column(self._scores, np.float64)
        return None if np.isnan(scores).any() else scores

    @property
    def n_pairs(self) -> int:
        return len(self._chosen)

    # the prompts, one object at a time
    def __len__(self) -> int:
        return len(self._prompt_ends) - 1

    @overload
    def __getitem__(self, index: int) -> PromptOutcome: ...
    @overload
    def __getitem__(self, index: slice) -> list[PromptOutcome]: ...
    def __getitem__(self, index: int | slice) -> PromptOutcome | list[PromptOutcome]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = range(len(self))[index]  # negative indices, IndexError
        pairs = [self._pair(j) for j in range(self._offsets[index], self._offsets[index + 1])]
        return PromptOutcome(self.prompt_id(index), self.categories[self._category[index]], pairs)

    def __iter__(self) -> Iterator[PromptOutcome]:
        return (self[i] for i in range(len(self)))

    def _pair(self, j: int) -> PairOutcome:
        chosen, rejected = self._chosen[j], self._rejected[j]
        chosen_score, rejected_score = self._scores[chosen], self._scores[rejected]
        return PairOutcome(
            self.ids[self._response[chosen]],
            self.ids[self._response[rejected]],
            bool(self._correct[j]),
            self._chars[chosen],
            self._chars[rejected],
            None if math.isnan(chosen_score) else chosen_score,
            None if math.isnan(rejected_score) else rejected_score,
            self.verdicts.get(j),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Outcomes({len(self)} prompts, {self.n_pairs} pairs)"
