"""How training runs its model: a batch's rewards as one autograd graph (in length-sorted chunks when
that saves padding), and scoring records with the in-memory model for evaluation during training.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, cast

import torch

from cheems.data.schema import Record
from cheems.models.base import length_batches
from cheems.models.encoding import Features, RewardEncoder, collate
from cheems.models.hf import batched_rewards
from cheems.train.model import RewardModel

CPU_CHUNK_TOKENS = 1024
"""Auto ``chunk_tokens`` on a single CPU process: 512-2048 were equally fast, 4096 slower, and one
padded pass of 16 oasst1_zh responses (max_length 512) 3.8x slower (m3e-small, 2 cores)."""


def chunk_budget(setting: int, device: torch.device, world: int) -> int:
    """Padded tokens per forward chunk (0: the whole batch in one pass) for ``chunk_tokens``."""
    if setting >= 0:
        return setting
    # auto: several forwards before one backward is plain autograd on one process; under DDP or
    # ZeRO-3 each forward also drives collectives, so those keep one pass per batch
    return CPU_CHUNK_TOKENS if device.type == "cpu" and world == 1 else 0


def forward_rewards(
    model: Any, rows: list[Features], pad_id: int, device: torch.device | str, chunk_tokens: int
) -> torch.Tensor:
    """Rewards of ``rows`` in their order, as one autograd graph.

    With ``chunk_tokens`` the rows are forwarded in length-sorted chunks of at most that many
    padded tokens and the rewards put back in order, so the loss sees the same batch while
    padding (which costs as much compute as real tokens) mostly disappears.
    """
    if not chunk_tokens:
        return cast("torch.Tensor", model(**collate(rows, pad_id, str(device))))
    chunks = length_batches([len(ids) for ids, _ in rows], len(rows), chunk_tokens)
    rewards = torch.cat([model(**collate([rows[i] for i in chunk], pad_id, str(device))) for chunk in chunks])
    order = torch.tensor([i for chunk in chunks for i in chunk], device=rewards.device)
    return rewards[torch.argsort(order)]


def forward_rewards_lm(
    model: Any,
    rows: list[Features],
    starts: list[int | None],
    pad_id: int,
    device: torch.device | str,
    chunk_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """:func:`forward_rewards` with a language-model loss (``--lm-weight``) in the same forwards: the rewards, the
    summed next-token loss of each row's tokens from ``starts[i]`` on (None: none of its tokens) and their count.

    The rows and their chunks are those :func:`forward_rewards` forwards; each chunk's labels go with it.
    """
    from cheems.train.lm_objective import label_positions, lm_inputs

    chunks = length_batches([len(ids) for ids, _ in rows], len(rows), chunk_tokens) if chunk_tokens else []
    chunks = chunks or [list(range(len(rows)))]
    rewards, nll, tokens = [], [], 0
    for chunk in chunks:
        picked = [rows[i] for i in chunk]
        at, labels = label_positions(picked, [starts[i] for i in chunk], lambda i, j: (i, j))
        chunk_rewards, chunk_nll = model(**collate(picked, pad_id, str(device)), **lm_inputs(at, labels, device))
        rewards.append(chunk_rewards)
        nll.append(chunk_nll)
        tokens += len(labels)
    order = torch.tensor([i for chunk in chunks for i in chunk], device=rewards[0].device)
    return torch.cat(rewards)[torch.argsort(order)], torch.stack(nll).sum(), tokens


@torch.no_grad()  # not inference_mode: ZeRO-3 gathers parameters here that training uses afterwards
def score_in_memory(
    model: RewardModel,
    encoder: RewardEncoder,
    records: list[Record],
    *,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
    autocast: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
) -> dict[tuple[str, str], float]:
    """Score every response of ``records`` with the model being trained, encoded as the scorer does.

    Batches of ``batch_size`` responses of similar length; ``autocast`` makes a fresh precision
    context per batch (e.g. ``accelerator.autocast``). The model is back in its mode afterwards.
    """
    keys = [(r.id, resp.id) for r in records for resp in r.responses]
    rows = encoder.features([(r.prompt, resp.content) for r in records for resp in r.responses])
    order = sorted(range(len(keys)), key=lambda i: len(rows[i][0]))  # little padding
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    pad = encoder.tokenizer.pad_token_id if encoder.tokenizer.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    try:
        scores = batched_rewards(lambda inputs: model(**inputs), rows, batches, pad, str(device), autocast)
    finally:
        model.train(was_training)
    return dict(zip(keys, scores))
