"""Packed training batches: for causal reward models each prompt's tokens forwarded once per batch.

Listwise training forwards every response of a prompt with that prompt in front. A causal model's
hidden state at a token depends only on the tokens before it, so the responses of one prompt can
share one copy of it: the prompt's tokens, then each response as a segment after them, with an
attention mask that lets a response token see the prompt and the tokens of its own response
before it (block-causal), and position ids that continue from the prompt's end for every response.
The reward is the head at each response's last token: the same number the padded row gives.

The shared part is what the encoded rows have in common (:func:`shared_length`, as
shared-prefix scoring computes it), never a re-tokenized prompt: truncation (``--max-length``
cuts a row's front) and a BPE merge across the prompt/response boundary only shorten the shared
part, so every packed response reads exactly the tokens its unpacked row holds. Several groups
(units) share a row up to ``pack_tokens`` (first-fit, longest first); attention never crosses a
unit, so no padding sits between them. A unit longer than ``pack_tokens`` gets a row of its own.

Encoders (BERT-like, reward at ``[CLS]``) are packed padding-free without sharing: whole sequences
side by side, each attending to itself only, with position ids and token types restarting per
sequence. Their attention is bidirectional: a shared prompt would see the responses and encode
differently.

The mask is an explicit 4-D mask (``[rows, 1, width, width]``), which transformers passes to the
attention as it is: boolean for SDPA, additive float for eager attention, a flex-attention
``BlockMask`` when the model runs ``flex_attention`` (on a GPU: :func:`use_flex_attention`; blocks
that are fully masked are skipped there). Flash-attention's varlen kernels cannot express "a
response sees its prompt" without repeating the prompt, so they are not used.

torch is imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from cheems.models.encoding import Features
from cheems.models.prefix import shared_length, supports_shared_prefix
from cheems.train.forward import CPU_CHUNK_TOKENS

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Unit:
    """Rows (indices into a batch) of one prompt whose first ``shared`` tokens are forwarded once."""

    rows: tuple[int, ...]
    shared: int
    length: int
    """Packed tokens: the shared part once plus every row's remaining tokens."""


@dataclass(frozen=True)
class PackedLayout:
    """Where each token of a packed batch sits; built from token counts alone (no torch)."""

    tokens: list[list[int]]
    """Token ids of each packed row (unpadded)."""
    unit: list[list[int]]
    """Per token, the unit it belongs to (numbered across the batch)."""
    segment: list[list[int]]
    """Per token, 0 for the shared part, ``j + 1`` for the unit's ``j``-th row's own tokens."""
    positions: list[list[int]]
    types: list[list[int]] | None
    """Token type ids (encoders' text pairs), else None."""
    read_at: list[tuple[int, int]]
    """Per batch row (in the batch's order), the (packed row, column) of its reward token: its last
    (causal) or its first, ``[CLS]`` (encoders)."""
    causal: bool
    spans: list[tuple[int, int, int, int]] = field(default_factory=list)
    """Per batch row, (packed row, column of its unit's shared part, shared tokens, column of its own tokens):
    where each of its tokens sits (:meth:`place`)."""

    def place(self, row: int, token: int) -> tuple[int, int]:
        """The (packed row, column) of token ``token`` of batch row ``row``."""
        packed, head, shared, tail = self.spans[row]
        return (packed, head + token) if token < shared else (packed, tail + token - shared)

    @property
    def width(self) -> int:
        return max(map(len, self.tokens))


def pack_budget(setting: int, device: torch.device) -> int:
    """Tokens per packed row for ``pack_tokens``: ``-1`` is 1024 on a CPU (dense masks cost the row's
    square), 4096 elsewhere."""
    if setting > 0:
        return setting
    return CPU_CHUNK_TOKENS if device.type == "cpu" else 4096


def packing_active(setting: str, model: Any) -> bool:
    """Whether ``--packing`` ``setting`` packs batches of ``model`` (a :class:`~cheems.train.model.RewardModel`).

    ``auto`` packs causal reward models read at their last token whose layers all attend fully
    (:func:`supports_shared_prefix`: sliding-window layers would need their window in the mask), and
    BERT-like encoders read at ``[CLS]`` through their pooler (``pooler``, ``dropout``, ``classifier``).
    Encoders pack whole sequences, each attending to itself only: their attention is bidirectional,
    so a shared prompt would see the responses and encode differently. Other layouts stay padded.
    """
    if setting != "auto":
        return False
    if model.pooling == "last":
        return supports_shared_prefix(model.hf)
    backbone = getattr(model.hf, model.hf.base_model_prefix, None)
    return (
        model.pooling == "cls"
        and getattr(backbone, "pooler", None) is not None
        and all(hasattr(model.hf, name) for name in ("dropout", "classifier"))
    )


def plan_units(rows: Sequence[Features], keys: Sequence[Hashable]) -> list[Unit]:
    """One unit per prompt ``key`` (in order of first appearance), sharing its rows' common first tokens.

    Each row keeps at least one token of its own (its reward is read there); a prompt with one
    row in the batch shares nothing.
    """
    by_key: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        by_key.setdefault(key, []).append(i)
    units = []
    for members in by_key.values():
        seqs = [rows[i][0] for i in members]
        shared = shared_length(seqs)
        units.append(Unit(tuple(members), shared, shared + sum(len(s) - shared for s in seqs)))
    return units


def pack_layout(rows: Sequence[Features], keys: Sequence[Hashable], budget: int, causal: bool = True) -> PackedLayout:
    """Lay the units of a batch (:func:`plan_units`) into rows of at most ``budget`` tokens.

    First-fit, longest unit first; a unit longer than ``budget`` takes a row of its own. Not
    ``causal`` (encoders): every row is a unit of its own (nothing shared), read at its first token.
    """
    units = sorted(plan_units(rows, keys if causal else range(len(rows))), key=lambda u: -u.length)
    placed: list[list[int]] = []  # unit numbers per packed row
    room: list[int] = []
    for n, u in enumerate(units):
        row = next((r for r, free in enumerate(room) if u.length <= free), None)
        if row is None:
            placed.append([])
            room.append(budget)
            row = len(placed) - 1
        placed[row].append(n)
        room[row] -= u.length
    tokens: list[list[int]] = []
    unit_of: list[list[int]] = []
    segment: list[list[int]] = []
    positions: list[list[int]] = []
    types: list[list[int]] = []
    read_at: list[tuple[int, int]] = [(0, 0)] * len(rows)
    spans: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)] * len(rows)
    for r, members in enumerate(placed):
        ids: list[int] = []
        us: list[int] = []
        segs: list[int] = []
        pos: list[int] = []
        tts: list[int] = []
        for n in members:
            u = units[n]
            head = rows[u.rows[0]][0][: u.shared]
            head_at = len(ids)
            ids += head
            us += [n] * u.shared
            segs += [0] * u.shared
            pos += range(u.shared)
            for j, i in enumerate(u.rows):
                tail = rows[i][0][u.shared :]
                spans[i] = (r, head_at, u.shared, len(ids))
                ids += tail
                us += [n] * len(tail)
                segs += [j + 1] * len(tail)
                pos += range(u.shared, u.shared + len(tail))
                tts += rows[i][1] or []  # encoders only, which share nothing: the row's own types
                read_at[i] = (r, len(ids) - 1 if causal else len(ids) - len(tail))
        tokens.append(ids)
        unit_of.append(us)
        segment.append(segs)
        positions.append(pos)
        types.append(tts)
    has_types = bool(rows) and rows[0][1] is not None
    return PackedLayout(tokens, unit_of, segment, positions, types if has_types else None, read_at, causal, spans)


def packed_inputs(layout: PackedLayout, pad_id: int, device: torch.device | str, attention: str) -> dict[str, Any]:
    """Keyword arguments of :class:`~cheems.train.model.RewardModel` for a packed batch.

    ``attention`` is the model's ``config._attn_implementation``: ``sdpa`` gets a boolean 4-D mask
    (True: attend), ``flex_attention`` a ``BlockMask``, anything else an additive float mask.
    Padding at a row's end attends to itself only (a row with nothing to attend to would be NaN).
    """
    import torch

    width, n = layout.width, len(layout.tokens)

    def table(values: list[list[int]], fill: int) -> torch.Tensor:
        out = torch.full((n, width), fill, dtype=torch.long)
        for r, row in enumerate(values):
            out[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        return out.to(device)

    ids, unit, segment = table(layout.tokens, pad_id), table(layout.unit, -1), table(layout.segment, 0)
    positions = table(layout.positions, 0)
    read_at = torch.tensor(layout.read_at, dtype=torch.long, device=device)
    if attention == "flex_attention":
        mask: Any = _block_mask(unit, segment, layout.causal, device)
    else:
        allowed = _allowed(unit, segment, layout.causal)
        mask = allowed if attention == "sdpa" else _additive(allowed)
    inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "read_at": read_at}
    if layout.types is not None:
        inputs["token_type_ids"] = table(layout.types, 0)
    return inputs


def _allowed(unit: torch.Tensor, segment: torch.Tensor, causal: bool) -> torch.Tensor:
    """``[rows, 1, width, width]``: query q may attend to key k: same unit and, when ``causal``, k not after q
    and k in the shared part or q's own row."""
    import torch

    width = unit.shape[1]
    q, k = unit[:, :, None], unit[:, None, :]
    allowed = (q == k) & (q >= 0)
    if causal:
        sq, sk = segment[:, :, None], segment[:, None, :]
        allowed &= torch.ones(width, width, dtype=torch.bool, device=unit.device).tril() & ((sk == 0) | (sk == sq))
    padding = (unit < 0)[:, :, None] & torch.eye(width, dtype=torch.bool, device=unit.device)
    return (allowed | padding)[:, None]


def _additive(allowed: torch.Tensor) -> torch.Tensor:
    import torch

    # fp32: eager attention adds the mask to its scores, which it computes in at least the model's precision
    return torch.zeros(allowed.shape, dtype=torch.float32, device=allowed.device).masked_fill(
        ~allowed, torch.finfo(torch.float32).min
    )


def _block_mask(
    unit: torch.Tensor, segment: torch.Tensor, causal: bool, device: torch.device | str
) -> Any:  # pragma: no cover - GPU
    """The flex-attention ``BlockMask`` of :func:`_allowed` (blocks fully masked are skipped)."""
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b: Any, h: Any, q: Any, k: Any) -> Any:
        same = unit[b, q] == unit[b, k]
        if causal:
            same = same & (k <= q) & ((segment[b, k] == 0) | (segment[b, k] == segment[b, q]))
        return (same & (unit[b, q] >= 0)) | ((unit[b, q] < 0) & (q == k))

    rows, width = unit.shape
    return create_block_mask(mask_mod, B=rows, H=None, Q_LEN=width, KV_LEN=width, device=str(device))


def use_flex_attention(model: Any) -> bool:  # pragma: no cover - GPU
    """Switch a causal reward model on a GPU to flex attention (masked blocks skipped); False when it cannot.

    Packed rows then get a ``BlockMask``; without flex attention (older torch, a model class that
    does not offer it) they keep SDPA with the boolean mask, which gives the same rewards.
    """
    try:
        from torch.nn.attention.flex_attention import create_block_mask  # noqa: F401

        model.hf.set_attn_implementation("flex_attention")
    except (ImportError, ValueError, AttributeError):
        return False
    return True


def packed_rewards(
    model: Any,
    rows: list[Features],
    keys: Sequence[Hashable],
    pad_id: int,
    device: torch.device | str,
    budget: int,
    attention: str,
    causal: bool = True,
) -> torch.Tensor:
    """Rewards of ``rows`` in their order as one autograd graph, each prompt's rows (same ``keys``) packed.

    ``model`` is the (possibly DDP-wrapped) :class:`~cheems.train.model.RewardModel`; ``attention``
    its attention implementation (see :func:`packed_inputs`); ``causal``: whether it reads its last
    token (else whole sequences are packed, see :func:`pack_layout`).
    """
    layout = pack_layout(rows, keys, budget, causal)
    return cast("torch.Tensor", model(**packed_inputs(layout, pad_id, device, attention)))


def packed_rewards_lm(
    model: Any,
    rows: list[Features],
    keys: Sequence[Hashable],
    starts: list[int | None],
    pad_id: int,
    device: torch.device | str,
    budget: int,
    attention: str,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """:func:`packed_rewards` (causal) with a language-model loss in the same forward (``--lm-weight``): the
    rewards, the summed next-token loss of each row's tokens from ``starts[i]`` on and their count.

    A labelled token is predicted from the hidden state of the token before it in its own row, which the
    block-causal mask makes the padded row's, wherever packing placed it.
    """
    from cheems.train.lm_objective import label_positions, lm_inputs

    layout = pack_layout(rows, keys, budget, True)
    at, labels = label_positions(rows, starts, layout.place)
    rewards, nll = model(**packed_inputs(layout, pad_id, device, attention), **lm_inputs(at, labels, device))
    return rewards, nll, len(labels)


def packing_counts(rows: Sequence[Features], keys: Sequence[Hashable], budget: int) -> dict[str, int]:
    """Tokens of a batch: ``real`` (the rows' own tokens, each prompt counted once), ``padded`` (what the
    padded pass forwards: rows x longest row) and ``packed`` (rows x widest packed row)."""
    layout = pack_layout(rows, keys, budget)
    return {
        "real": sum(map(len, layout.tokens)),  # a packed row holds each unit's tokens once, unpadded
        "padded": len(rows) * max(len(ids) for ids, _ in rows),
        "packed": len(layout.tokens) * layout.width,
    }
