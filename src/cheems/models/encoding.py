"""How a (prompt, response) becomes reward-model input: the one encoding that scoring and training share.

:class:`RewardEncoder` holds the rule (a chat template when the tokenizer has one, written once
with no special tokens on top; otherwise a text pair ``[CLS] prompt [SEP] response [SEP]``),
the truncation (always from the start: the prompt's first, then the response's when it alone is too
long, so the last token, where the reward is read, survives), and the untruncated length that
training's truncation policy counts. :func:`collate` pads encoded rows into tensors.

torch is imported inside functions only; tokenizers are loaded through :func:`load_tokenizer`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from cheems.errors import CheemsWarning, InputError
from cheems.models.backbones import FORMAT_KEY, FORMATS, MAX_LENGTH_KEY, ModelSource
from cheems.models.base import ScoreItem, prompt_messages, prompt_text
from cheems.models.quiet import quiet_libraries

if TYPE_CHECKING:
    import torch

DEFAULT_MAX_LENGTH = 512
"""Tokens per (prompt, response) when neither the caller nor the model folder says."""

Features = tuple[list[int], "list[int] | None"]
"""Token ids and token type ids (text pairs; None with a chat template) of one (prompt, response)."""

Segment = Any
"""One text's tokens without special tokens: a ``tokenizers.Encoding`` (fast tokenizers) or a list of ids."""


@dataclass
class Counted:
    """One input as the model sees it, and how long it was before truncation."""

    features: Features
    full_length: int
    """Tokens before truncation."""

    @property
    def truncated(self) -> bool:
        """Whether tokens were cut from the start to fit the limit."""
        return self.full_length > len(self.features[0])


@dataclass
class Encoded(Counted):
    """One (prompt, response) as the model sees it, its length before truncation, and whether its response alone
    was too long (what training's truncation policy reads)."""

    response_too_long: bool
    """The response alone does not fit: truncation cuts tokens of its own, not only the prompt."""


def load_tokenizer(source: ModelSource) -> Any:
    """The model's tokenizer, with a clear error when the folder has none."""
    from transformers import AutoTokenizer

    try:
        with quiet_libraries():
            return AutoTokenizer.from_pretrained(source.location, revision=source.revision)
    except (OSError, ValueError) as e:
        raise InputError(
            f"cannot load the tokenizer of model '{source.spec}': {e}",
            hint="the model folder needs its tokenizer files (tokenizer.json / vocab)",
        ) from None


def effective_max_length(max_length: int, tokenizer: Any, config: dict[str, Any]) -> int:
    """``max_length`` capped by what the model can take (position embeddings, tokenizer limit)."""
    limits = [max_length, tokenizer.model_max_length]
    if isinstance(config.get("max_position_embeddings"), int):
        limits.append(config["max_position_embeddings"])
    return cast("int", min(limits))


def scoring_max_length(source: ModelSource, max_length: int | None) -> int:
    """The tokens per (prompt, response) to score ``source`` with: ``max_length`` when given, else what the model
    was trained at (its config's :data:`MAX_LENGTH_KEY`), else :data:`DEFAULT_MAX_LENGTH`.

    A ``max_length`` other than the trained one is used as asked, with one warning saying so: the scores then
    differ from the evaluation the training run reported.
    """
    trained = source.config.get(MAX_LENGTH_KEY)
    if max_length is None:
        return trained if isinstance(trained, int) else DEFAULT_MAX_LENGTH
    if isinstance(trained, int) and trained != max_length:
        warnings.warn(
            f"model '{source.spec}' was trained at {trained} tokens per response ({MAX_LENGTH_KEY} in its "
            f"config.json); scoring at --max-length {max_length} as asked, so its numbers differ from its training "
            "evaluation",
            CheemsWarning,
            stacklevel=3,
        )
    return max_length


class RewardEncoder:
    """Token ids of (prompt, response) items for one model, cut to ``limit`` tokens.

    ``limit`` is ``max_length`` capped by the model (:func:`effective_max_length`). The
    tokenizer is loaded from ``source`` unless given. The input is the chat template when the
    tokenizer has one, else a text pair, unless the folder records the format it was trained on
    (:data:`FORMAT_KEY`).
    """

    def __init__(self, source: ModelSource, max_length: int, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(source)
        self.limit = effective_max_length(max_length, self.tokenizer, source.config)
        recorded = source.config.get(FORMAT_KEY)
        self.chat = recorded == "chat" if recorded in FORMATS else bool(self.tokenizer.chat_template)
        if self.chat and not self.tokenizer.chat_template:
            raise InputError(
                "the model was trained on its chat template, but its tokenizer has none",
                path=source.spec,
                field=FORMAT_KEY,
                hint="restore the tokenizer files it was saved with (tokenizer_config.json holds the template)",
            )

    def recorded(self) -> dict[str, Any]:
        """The config.json keys that make a saved model score as it was trained (see :data:`MAX_LENGTH_KEY`)."""
        return {MAX_LENGTH_KEY: self.limit, FORMAT_KEY: "chat" if self.chat else "pair"}

    def features(self, items: Sequence[ScoreItem]) -> list[Features]:
        """Token ids (and token type ids for text pairs) of each item, truncated: what the model reads."""
        return [c.features for c in self.counted(items)]

    def counted(self, items: Sequence[ScoreItem]) -> list[Counted]:
        """Each item's :meth:`features` with its length before truncation, from one tokenisation of each text (a
        caller that reports token counts, ``cheems serve``, scores these same features: no second encoding)."""
        if not items:
            return []
        if self.chat:
            return [Counted((ids[-self.limit :], None), len(ids)) for ids in self._chat_ids(items)]
        return list(self._pairs(items))

    def encode(self, items: Sequence[ScoreItem]) -> list[Encoded]:
        """Each item's :meth:`counted` with whether its response alone is too long (for training's truncation
        policy: a chat-format model tokenises each response alone once more for it)."""
        if not items:
            return []
        if not self.chat:
            return self._pairs(items)
        response_len = self._lengths([r for _, r in items])
        return [Encoded(c.features, c.full_length, n >= self.limit) for c, n in zip(self.counted(items), response_len)]

    def untruncated_ids(self, items: Sequence[ScoreItem]) -> list[list[int]]:
        """Each item's token ids before any cut to ``limit`` (:meth:`features` keeps their end): a training
        objective that needs to know where the response starts compares them with those of an empty response."""
        if not items:
            return []
        if self.chat:
            return self._chat_ids(items)
        prompts = self._segments([prompt_text(p) for p, _ in items])
        responses = self._segments([r for _, r in items])
        return [self._with_specials(p, r)[0] for p, r in zip(prompts, responses)]

    def encode_texts(self, texts: Sequence[str]) -> list[Encoded]:
        """Raw texts, already rendered by the caller (prompt and response in one string), as the model reads them.

        The text is tokenised as given. A chat-format model gets no special tokens on top (the text is already
        templated, as :meth:`features` writes it); a pair encoder reads it as one segment with its tokenizer's
        special tokens (``[CLS] text [SEP]``). A text past ``limit`` loses tokens from its start and keeps its end,
        where the reward is read (a pair encoder keeps its special tokens). With no prompt/response split known,
        ``response_too_long`` is True for any text that was cut.
        """
        if not texts:
            return []
        segments = self._segments(texts)
        specials = 0 if self.chat else self.tokenizer.num_special_tokens_to_add(pair=False)
        room = self.limit - specials
        encoded = []
        for segment in segments:
            n = _length(segment)
            kept = _keep_end(segment, room)
            features = (_ids(kept), None) if self.chat else self._with_specials(kept, None)
            encoded.append(Encoded(features, n + specials, n > room))
        return encoded

    def _segments(self, texts: Sequence[str]) -> list[Segment]:
        """Each text's tokens with no special tokens, untruncated (verbose=False: past the limit is no error)."""
        enc = self.tokenizer(list(texts), add_special_tokens=False, verbose=False)
        return list(enc.encodings) if enc.encodings is not None else list(enc["input_ids"])

    def _with_specials(self, first: Segment, second: Segment | None) -> Features:
        """One segment or a pair of segments with the tokenizer's special tokens, as ``tokenizer(a, b)`` writes them.

        Token type ids only where the model reads them (RoBERTa-like encoders do not).
        """
        tok = self.tokenizer
        if isinstance(first, list):  # a Python tokenizer: no Encoding objects
            ids = tok.build_inputs_with_special_tokens(first, second)
            types = tok.create_token_type_ids_from_sequences(first, second)
        else:
            joined = tok.backend_tokenizer.post_process(first, second, add_special_tokens=True)
            ids, types = joined.ids, joined.type_ids
        return list(ids), (list(types) if "token_type_ids" in tok.model_input_names else None)

    def _lengths(self, texts: list[str]) -> list[int]:
        """Tokens of each text alone, untruncated (verbose=False: past the model's limit is no error here)."""
        return [len(x) for x in self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]]

    def _chat_ids(self, items: Sequence[ScoreItem]) -> list[list[int]]:
        """Untruncated ids of the chat template with the response as the assistant's turn.

        No special tokens on top: the template already writes BOS and role markers. Callers keep
        the last ``limit`` ids (the response and the last turns).
        """
        tok = self.tokenizer
        texts = [
            tok.apply_chat_template(prompt_messages(p) + [{"role": "assistant", "content": r}], tokenize=False)
            for p, r in items
        ]
        return cast("list[list[int]]", tok(texts, add_special_tokens=False, verbose=False)["input_ids"])

    def _pairs(self, items: Sequence[ScoreItem]) -> list[Encoded]:
        """(prompt, response) as a text pair ``[CLS] prompt [SEP] response [SEP]`` cut to ``limit`` from the start.

        The prompt loses tokens from its start first, so the response survives whole; a response too long even
        alone loses its start too (the prompt is then empty), keeping its end. The special tokens always stay.
        """
        prompts = self._segments([prompt_text(p) for p, _ in items])
        responses = self._segments([r for _, r in items])
        specials = self.tokenizer.num_special_tokens_to_add(pair=True)
        room = self.limit - specials
        encoded = []
        for prompt, response in zip(prompts, responses):
            full = _length(prompt) + _length(response) + specials
            too_long = _length(response) >= room
            response = _keep_end(response, room)
            prompt = _keep_end(prompt, room - _length(response))
            encoded.append(Encoded(self._with_specials(prompt, response), full, too_long))
        return encoded


def _length(segment: Segment) -> int:
    """Tokens in a segment."""
    return len(segment) if isinstance(segment, list) else len(segment.ids)


def _ids(segment: Segment) -> list[int]:
    """A segment's token ids."""
    return segment if isinstance(segment, list) else list(segment.ids)


def _keep_end(segment: Segment, n: int) -> Segment:
    """The segment's last ``n`` tokens (all of it when it is no longer): the cut is always at the start."""
    if _length(segment) <= n:
        return segment
    if isinstance(segment, list):
        return segment[len(segment) - n :]
    segment.truncate(n, direction="left")  # in place: each segment is tokenised for this one use
    return segment


def collate(rows: Sequence[Features], pad_id: int, device: str) -> dict[str, "torch.Tensor"]:
    """Right-pad token ids (and token type ids) into tensors with an attention mask.

    Each tensor is built in one call from padded lists (no tensor per row) and moved to ``device`` once, from
    pinned memory without waiting on a GPU.
    """
    import torch

    width = max(len(ids) for ids, _ in rows)
    columns = {
        "input_ids": [ids + [pad_id] * (width - len(ids)) for ids, _ in rows],
        "attention_mask": [[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows],
    }
    if rows[0][1] is not None:
        columns["token_type_ids"] = [(tt or []) + [0] * (width - len(tt or [])) for _, tt in rows]
    batch = {k: torch.tensor(v, dtype=torch.long) for k, v in columns.items()}
    if torch.device(device).type != "cuda":
        return batch
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
