"""Shared-prefix scoring for causal reward models: the responses of one prompt run from the prompt's KV cache.

A causal model's hidden state at a token depends only on the tokens before it, so when several
encoded (prompt, response) rows start with the same tokens, that prefix can run once (its key/value
cache) and each row's remaining tokens run from the cache, with position ids continuing after the
prefix: the reward (the head at each row's last token) is the one the full row gives.

:func:`plan_shared_prefix` picks the groups: the rows of one prompt, sharing the tokens their final
encodings actually have in common (so a chat template or BPE merge across the prompt/response
boundary only shortens the shared part; it never makes it wrong). Rows cut by ``--max-length``
(truncation cuts the front, differently per row), prompts with one response and groups sharing too
few tokens stay on the plain path. :func:`supports_shared_prefix` says which models can do it,
:func:`prefix_rewards` runs one group.

torch and transformers are imported inside functions only.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from cheems.models.base import advance, length_batches
from cheems.models.encoding import Features, collate

# Below this many shared tokens a second (prefix) forward pass costs more than it saves.
MIN_SHARED_TOKENS = 16


@dataclass(frozen=True)
class PrefixGroup:
    """Rows (indices) whose first ``length`` token ids are the same."""

    length: int
    rows: list[int]


def common_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    """How many leading token ids all ``sequences`` share."""
    first, n = sequences[0], min(len(s) for s in sequences)
    for seq in sequences[1:]:
        k = 0
        while k < n and seq[k] == first[k]:
            k += 1
        n = k
    return n


def shared_length(sequences: Sequence[Sequence[int]]) -> int:
    """The leading tokens one prompt's rows can share: their common prefix, leaving every row at least one token
    of its own (its reward is read there); 0 for a single row."""
    if len(sequences) < 2:
        return 0
    return min(common_prefix_length(sequences), min(len(s) for s in sequences) - 1)


def plan_shared_prefix(
    rows: Sequence[Features], keys: Sequence[Hashable], limit: int
) -> tuple[list[PrefixGroup], list[int]]:
    """Split rows into shared-prefix groups (rows of one prompt ``key``) and the rows to score plainly.

    A row of ``limit`` tokens or more may have been truncated (its front cut), so it goes plain.
    Each group keeps at least one token of every row out of the prefix: the reward is read there.
    """
    by_prompt: dict[Hashable, list[int]] = {}
    plain: list[int] = []
    for i, (ids, _) in enumerate(rows):
        if len(ids) >= limit:
            plain.append(i)
        else:
            by_prompt.setdefault(keys[i], []).append(i)
    groups: list[PrefixGroup] = []
    for members in by_prompt.values():
        shared = shared_length([rows[i][0] for i in members])
        if shared >= MIN_SHARED_TOKENS:
            groups.append(PrefixGroup(shared, members))
        else:
            plain.extend(members)
    return groups, sorted(plain)


def supports_shared_prefix(model: Any) -> bool:
    """Whether ``model`` reads its reward with a last-token ``score`` head on a decoder that takes a KV cache.

    Encoders (BERT-like: a pooled classifier, bidirectional attention), encoder-decoders, backbones
    whose forward takes no ``past_key_values`` and sliding-window or other non-full attention layers
    (whose caches keep only part of the prefix) are left to the plain path.
    """
    import torch

    config = model.config
    if not isinstance(getattr(model, "score", None), torch.nn.Module) or config.is_encoder_decoder:
        return False
    if _cache_argument(model.base_model) is None:
        return False
    return full_attention_only(config)


def full_attention_only(config: Any) -> bool:
    """Whether every layer of the model ``config`` describes attends to the whole sequence (no sliding-window or
    other layer types): what a shared prefix's cache and a packed mask both need."""
    return all(t == "full_attention" for t in getattr(config, "layer_types", None) or ["full_attention"])


def _cache_argument(backbone: Any) -> str | None:
    """The name a decoder's forward takes its KV cache by: ``past_key_values``, ``cache`` from transformers 5.24
    (its outputs name it the same way), or None when it takes none."""
    parameters = inspect.signature(backbone.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in parameters), None)


def prefix_rewards(
    model: Any, rows: Sequence[Features], group: PrefixGroup, pad_id: int, device: str, batch_size: int, budget: int
) -> dict[int, float]:
    """The reward of each row of ``group``: the prefix runs once, the rest of each row from its cache.

    The rows' remaining tokens are right-padded into batches of at most ``batch_size`` rows and
    ``budget`` padded tokens (:func:`length_batches`); each batch gets its own copy of the prefix
    cache (a forward pass appends to the cache it is given). Reports each batch to :func:`advance`.
    """
    import torch
    from transformers import DynamicCache

    backbone = model.base_model
    name = _cache_argument(backbone)
    assert name is not None  # supports_shared_prefix said so
    prefix = torch.tensor([rows[group.rows[0]][0][: group.length]], device=device)
    cache = backbone(input_ids=prefix, use_cache=True)[name]
    layers = [(layer.keys, layer.values) for layer in cache.layers]
    tails = [rows[i][0][group.length :] for i in group.rows]
    scores: dict[int, float] = {}
    for batch in length_batches([len(t) for t in tails], batch_size, budget):
        padded = collate([(tails[j], None) for j in batch], pad_id, device)
        ids, mask = padded["input_ids"], padded["attention_mask"]
        n, width = ids.shape
        past = DynamicCache([(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in layers])
        full_mask = torch.cat([torch.ones((n, group.length), dtype=mask.dtype, device=device), mask], dim=1)
        positions = torch.arange(group.length, group.length + width, device=device).expand(n, -1)
        hidden = backbone(
            input_ids=ids, attention_mask=full_mask, position_ids=positions, use_cache=True, **{name: past}
        ).last_hidden_state
        last = mask.sum(dim=1) - 1  # right padding: the last real token of each tail
        values = model.score(hidden[torch.arange(n, device=hidden.device), last])[:, 0]
        for j, value in zip(batch, values.float().cpu().tolist()):
            scores[group.rows[j]] = value
        advance(n)
    return scores
