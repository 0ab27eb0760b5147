"""Which questions to ask the judge: every pair of a prompt's responses, in a seeded shown order.

The paper's judge compares all C(N,2) pairs, each in a random order against position bias. The
order of a pair depends only on (seed, prompt id, the two response ids), never on a random
generator's state, so a rerun, a resumed run or a run on a subset asks exactly the same questions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from cheems.data.schema import Record


@dataclass(frozen=True)
class PairTask:
    """One question: record ``records[index]``, responses ``a`` and ``b`` (record order), shown as ``shown``.

    ``shown == "ab"`` puts ``a`` in position A; ``"ba"`` puts ``b`` first.
    """

    index: int
    prompt_id: str
    a: str
    b: str
    shown: str

    @property
    def first(self) -> str:
        """The response id shown as answer A."""
        return self.a if self.shown == "ab" else self.b

    @property
    def second(self) -> str:
        """The response id shown as answer B."""
        return self.b if self.shown == "ab" else self.a

    def record_label(self, shown_label: str) -> str:
        """A verdict about the shown order (A/B/C) as a comparison label about ``a``/``b`` (a/b/tie)."""
        if shown_label == "C":
            return "tie"
        first_wins = shown_label == "A"
        return "a" if first_wins == (self.shown == "ab") else "b"


def shown_order(seed: int, prompt_id: str, a: str, b: str) -> str:
    """``"ab"`` or ``"ba"``, fixed by the seed and the pair (a hash, not a generator: order-independent)."""
    key = "\x1f".join((str(seed), prompt_id, a, b)).encode("utf-8")
    return "ab" if hashlib.sha256(key).digest()[0] & 1 == 0 else "ba"


def already_judged(record: Record, annotator: str) -> set[tuple[str, str, str]]:
    """(a, b, shown) of the judge comparisons ``annotator`` already made in this record (kept, not re-asked)."""
    done = set()
    for c in record.comparisons:
        extra = c.model_extra or {}
        if c.source == "judge" and c.annotator == annotator and extra.get("shown") in ("ab", "ba"):
            done.add((c.a, c.b, extra["shown"]))
    return done


def all_pairs(record: Record) -> list[tuple[str, str]]:
    """Every pair of a record's responses, in response order (the paper's C(N,2))."""
    return list(combinations([r.id for r in record.responses], 2))


def ranked_pairs(record: Record) -> list[tuple[str, str]]:
    """The pairs with different ranks (the bench's comparisons), in response order like ``all_pairs``.

    Response order, not (chosen, rejected): a pair is then shown exactly as ``cheems judge`` shows it.
    """
    ranked = {frozenset(p) for p in record.ranked_pairs()}
    return [p for p in all_pairs(record) if frozenset(p) in ranked]


def plan_pairs(
    records: Sequence[Record],
    seed: int = 0,
    both_orders: bool = False,
    skip_judged_by: str | None = None,
    pairs: Callable[[Record], Iterable[tuple[str, str]]] | None = None,
) -> list[PairTask]:
    """The pairs ``pairs`` picks of every record (default: all C(N,2)), in record order then pair order.

    Each pair is shown once in its seeded order, or with ``both_orders`` twice (seeded order
    first, then the reverse). With ``skip_judged_by``, pairs that judge already compared in the
    record (its ``comparisons`` with ``source: judge``) are left out, so judging an output
    file again adds nothing twice.
    """
    tasks: list[PairTask] = []
    for index, record in enumerate(records):
        done = already_judged(record, skip_judged_by) if skip_judged_by else set()
        for x, y in (pairs or all_pairs)(record):
            first = shown_order(seed, record.id, x, y)
            orders = (first, "ba" if first == "ab" else "ab") if both_orders else (first,)
            for shown in orders:
                if (x, y, shown) not in done:
                    tasks.append(PairTask(index, record.id, x, y, shown))
    return tasks
