"""How a (prompt, response) becomes reward-model input: the one encoding that scoring and training share.

:class:`RewardEncoder` holds the rule (a chat template when the tokenizer has one, written once
with no special tokens on top; otherwise a text pair ``[CLS] prompt [SEP] response [SEP]``),
the truncation (the prompt is cut first, so the response survives), and the untruncated length
that training's truncation policy counts. :func:`collate` pads encoded rows into tensors.

torch is imported inside functions only; tokenizers are loaded through :func:`load_tokenizer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cheems.errors import InputError
from cheems.models.backbones import ModelSource
from cheems.models.base import ScoreItem, prompt_messages, prompt_text
from cheems.models.quiet import quiet_libraries

if TYPE_CHECKING:
    import torch

Features = tuple[list[int], "list[int] | None"]
"""Token ids and token type ids (text pairs; None with a chat template) of one (prompt, response)."""


@dataclass
class Encoded:
    """One (prompt, response) as the model sees it, and how long it was before truncation."""

    features: Features
    full_length: int
    """Tokens before truncation."""
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
    return min(limits)


class RewardEncoder:
    """Token ids of (prompt, response) items for one model, cut to ``limit`` tokens.

    ``limit`` is ``max_length`` capped by the model (:func:`effective_max_length`). The
    tokenizer is loaded from ``source`` unless given.
    """

    def __init__(self, source: ModelSource, max_length: int, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(source)
        self.limit = effective_max_length(max_length, self.tokenizer, source.config)

    def features(self, items: Sequence[ScoreItem]) -> list[Features]:
        """Token ids (and token type ids for text pairs) of each item, truncated: what the model reads."""
        return [e.features for e in self.encode(items)]

    def encode(self, items: Sequence[ScoreItem]) -> list[Encoded]:
        """Each item's features with its untruncated length (for training's truncation policy)."""
        if not items:
            return []
        tok = self.tokenizer
        # verbose=False and quiet: lengths past the model's limit are the point here, no warnings
        with quiet_libraries():
            responses = [r for _, r in items]
            response_len = [len(x) for x in tok(responses, add_special_tokens=False, verbose=False)["input_ids"]]
            if tok.chat_template:
                return self._encode_chat(items, response_len)
            return self._encode_pairs(items, response_len)

    def _encode_chat(self, items: Sequence[ScoreItem], response_len: list[int]) -> list[Encoded]:
        """The chat template, with no special tokens on top (it already writes BOS and role markers).

        The ids are cut from the left: the end (the response and its last turns) is kept.
        """
        tok = self.tokenizer
        texts = [
            tok.apply_chat_template(prompt_messages(p) + [{"role": "assistant", "content": r}], tokenize=False)
            for p, r in items
        ]
        ids = tok(texts, add_special_tokens=False, verbose=False)["input_ids"]
        return [Encoded((x[-self.limit :], None), len(x), n >= self.limit) for x, n in zip(ids, response_len)]

    def _encode_pairs(self, items: Sequence[ScoreItem], response_len: list[int]) -> list[Encoded]:
        """(prompt, response) as a text pair; the prompt is cut first so the response survives."""
        tok = self.tokenizer
        prompts = [prompt_text(p) for p, _ in items]
        responses = [r for _, r in items]
        specials = tok.num_special_tokens_to_add(pair=True)
        room = self.limit - specials
        prompt_len = [len(x) for x in tok(prompts, add_special_tokens=False, verbose=False)["input_ids"]]
        features: list[Features] = [([], None)] * len(items)
        # only_first needs one prompt token left; a response too long even alone is cut too.
        for strategy, keep in (("only_first", True), ("longest_first", False)):
            idx = [i for i in range(len(items)) if (response_len[i] < room) == keep]
            if not idx:
                continue
            enc = tok(
                [prompts[i] for i in idx], [responses[i] for i in idx], truncation=strategy, max_length=self.limit
            )
            types = enc.get("token_type_ids")
            for j, i in enumerate(idx):
                features[i] = (enc["input_ids"][j], types[j] if types is not None else None)
        return [
            Encoded(f, p + r + specials, r >= room) for f, p, r in zip(features, prompt_len, response_len, strict=True)
        ]


def collate(rows: Sequence[Features], pad_id: int, device: str) -> dict[str, "torch.Tensor"]:
    """Right-pad token ids (and token type ids) into tensors with an attention mask."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    types = torch.zeros((len(rows), width), dtype=torch.long) if rows[0][1] is not None else None
    for r, (ids, tt) in enumerate(rows):
        input_ids[r, : len(ids)] = torch.tensor(ids)
        mask[r, : len(ids)] = 1
        if types is not None and tt is not None:
            types[r, : len(tt)] = torch.tensor(tt)
    batch = {"input_ids": input_ids, "attention_mask": mask}
    if types is not None:
        batch["token_type_ids"] = types
    return {k: v.to(device) for k, v in batch.items()}
