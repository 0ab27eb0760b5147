"""What the scoring thread of ``cheems serve`` scores: samples from any protocol, scored together in one call.

A :class:`Sample` is either a (prompt, response), encoded exactly as ``cheems score`` encodes it (the model's own
chat template or its text pair), or one text already rendered by the client (OpenRLHF's ``query`` without
``prompts``, vLLM's ``input``), read as given. Either way an input over the model's limit loses tokens from its
start (the encoder's rule: the end, where the reward is read, is kept), and the reply counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cheems.models.base import Prompt, ScoreItem, Scorer
from cheems.models.hf import HFRewardScorer


@dataclass(frozen=True)
class Sample:
    """One input to score: ``prompt`` and the response ``text``, or (``prompt`` None) a whole rendered text."""

    prompt: Prompt | None
    text: str


def item_of(sample: Sample) -> ScoreItem:
    """The (prompt, response) item ``cheems score`` scores for a sample with a prompt."""
    assert sample.prompt is not None, "a rendered text has no (prompt, response) item"
    return sample.prompt, sample.text


@dataclass(frozen=True)
class Scored:
    """A sample's reward, the tokens the model read, and whether tokens were cut from its start to fit."""

    reward: float
    tokens: int
    truncated: bool


class TooLong(ValueError):
    """A sample over the model's limit under ``--truncate error`` (HTTP 400)."""


class TextsUnsupported(ValueError):
    """A rendered text sent to a scorer that only scores (prompt, response) (HTTP 400)."""


def score_samples(scorer: Scorer, samples: Sequence[Sample], refuse_long: bool) -> list[Scored | ValueError]:
    """Each sample's :class:`Scored`, or the error that refuses it; all samples that pass go to the model in one
    call per kind (pairs, texts), which batches them by length as ``cheems score`` does."""
    pairs = [i for i, s in enumerate(samples) if s.prompt is not None]
    texts = [i for i, s in enumerate(samples) if s.prompt is None]
    out: list[Scored | ValueError] = [ValueError("not scored")] * len(samples)
    for rows, kind in ((pairs, "pair"), (texts, "text")):
        if rows:
            for i, result in zip(rows, _score_kind(scorer, [samples[i] for i in rows], kind, refuse_long)):
                out[i] = result
    return out


def _score_kind(scorer: Scorer, samples: list[Sample], kind: str, refuse_long: bool) -> list[Scored | ValueError]:
    """Score samples of one kind: encode once, refuse the long ones when asked, score the rest's features."""
    if not isinstance(scorer, HFRewardScorer):  # a scorer without tokens (length, a remote RM): nothing to count
        if kind == "text":
            why = f"model '{scorer.name}' scores (prompt, response) pairs only: send prompts (OpenRLHF) or messages"
            return [TextsUnsupported(why)] * len(samples)
        return [Scored(r, 0, False) for r in scorer.score([item_of(s) for s in samples])]
    items = [item_of(s) for s in samples] if kind == "pair" else None
    # The one encoding: the counts in the reply and the features the model reads come from it.
    encoded = (
        scorer.encoder.counted(items) if items is not None else scorer.encoder.encode_texts([s.text for s in samples])
    )
    limit = scorer.encoder.limit
    results: list[Scored | ValueError] = [
        TooLong(f"input has {e.full_length} tokens, over this server's limit of {limit} (--max-length)")
        if refuse_long and e.full_length > limit
        else Scored(0.0, len(e.features[0]), e.truncated)
        for e in encoded
    ]
    keep = [i for i, r in enumerate(results) if isinstance(r, Scored)]
    kept_items = [items[i] for i in keep] if items is not None else None
    rewards = scorer.score_encoded([encoded[i].features for i in keep], kept_items)
    for i, reward in zip(keep, rewards):
        done = results[i]
        assert isinstance(done, Scored)
        results[i] = Scored(reward, done.tokens, done.truncated)
    return results
