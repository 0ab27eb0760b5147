"""Which (chosen, rejected) pairs a record trains on."""

from __future__ import annotations

from cheems.data.schema import Record
from cheems.ranking.resolve import agrees, resolve_record


def training_pairs(record: Record) -> list[tuple[str, str]]:
    """The (chosen_id, rejected_id) pairs one record trains on.

    * ``comparisons`` and ``rank``: the non-tie comparisons that agree with ``rank``,
      deduplicated in order of first appearance. Training on the comparisons rather than on
      every pair the ranks imply respects a curated pair list (e.g. after length debiasing).
      A comparison naming a response that ``rank`` leaves out cannot agree and is dropped.
    * only ``comparisons``: resolved first (Algorithm 1, :func:`resolve_record`), then as above,
      so comparisons that conflict with the resolved order (cycles) give no pair.
    * only ``rank``: every pair it implies (:meth:`Record.ranked_pairs`).
    * neither: no pair.

    An empty ``rank`` dict counts as no rank. Ties and self-comparisons never give a pair.
    """
    if not record.comparisons:
        return record.ranked_pairs()
    rank = record.rank or resolve_record(record).rank
    pairs: dict[tuple[str, str], None] = {}  # an ordered set
    for c in record.comparisons:
        outcome = c.winner_loser()
        if outcome is None or c.a == c.b or c.a not in rank or c.b not in rank:
            continue
        if agrees(c, rank):
            pairs[outcome] = None
    return list(pairs)
