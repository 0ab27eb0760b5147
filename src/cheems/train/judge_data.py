"""Judge SFT rows -> token ids and labels, and the batches ``cheems train-judge`` forwards.

A row is what ``cheems export judge-sft`` writes (docs/formats.md, "Judge SFT rows"): ``messages`` =
``[system, user, assistant]`` (the system turn may be left out), the assistant turn the verdict (or a critique
ending with it). :func:`read_judge_rows` checks that shape and refuses anything else at its file:line.

**The mask** (:func:`encode_row`): the prompt is the chat template applied to the turns before the reply with
the generation prompt (what ``cheems eval --judge-model`` gives the model); the reply is what the template
writes after that for the whole conversation. The two are tokenized apart and joined, the split a generating
model sees. Labels are ``-100`` on every prompt token; the loss is on the reply's tokens **through the first
special token after the reply** (the template's end of turn: Qwen's ``<|im_end|>``), so the model learns to
stop. Whatever the template writes after that token (Qwen's trailing newline) is neither trained nor kept: a
generating model stops at the end-of-turn token and never sees it. A template whose reply has no special token
has the whole reply trained.

**Too long** (``max_length``): ``drop`` leaves the row out; ``left_prompt`` cuts tokens from the prompt's start
(the reply stays whole). A reply longer than ``max_length`` on its own is left out either way: the verdict is
never cut. Both are counted (:class:`JudgeDataSummary`).

**Batches**: each epoch shuffles the rows (seeded by seed and epoch, the same on every process) into
micro-batches of ``batch_size`` rows, as :class:`~cheems.train.batching.EpochPlan` batches of items
``(row index, "")`` so that :func:`cheems.train.schedule.micro_steps` shards and accumulates them as it does the
reward model's. A micro-batch is forwarded padded (:func:`padded_batch`) or packed (:func:`packed_batch`: the
rows side by side in sequences, each attending to itself only, positions restarting per row, by
:func:`cheems.train.packing.pack_layout`'s layout and masks).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from cheems.data.io import iter_rows
from cheems.errors import InputError
from cheems.runtime import content_hash
from cheems.train.batching import EpochPlan

if TYPE_CHECKING:
    import torch

IGNORE = -100
"""The label of a token the loss leaves out (PyTorch's ``cross_entropy`` ``ignore_index``)."""
ROLES = (["system", "user", "assistant"], ["user", "assistant"])
"""The shapes a row's ``messages`` may have: the export's, with or without its system turn."""
SHAPE_HINT = (
    'a row is {"messages": [{"role": "system", ...}, {"role": "user", ...}, {"role": "assistant", ...}], ...}, '
    "as cheems export judge-sft writes"
)


@dataclass(frozen=True)
class JudgeRow:
    """One conversation: its messages (the reply last) and where it was read."""

    messages: list[dict[str, str]]
    path: str
    line: int


@dataclass
class EncodedRow:
    """A row's token ids and its labels (``IGNORE`` but on the trained reply tokens)."""

    ids: list[int]
    labels: list[int]
    cut: bool = False
    """The prompt lost tokens from its start (``left_prompt``)."""

    @property
    def targets(self) -> int:
        return sum(label != IGNORE for label in self.labels)


@dataclass
class JudgeDataSummary:
    """What the data gave: rows read, trained on, cut and left out, and their tokens."""

    rows: int = 0
    kept: int = 0
    truncated: int = 0
    """Rows whose prompt lost tokens from its start (``left_prompt``)."""
    dropped: int = 0
    """Rows left out as over ``max_length`` (all of them with ``drop``; with ``left_prompt`` those whose reply
    alone is too long)."""
    tokens: int = 0
    targets: int = 0
    """Tokens the loss is on (the replies and their end-of-turn tokens)."""
    end_of_turn: list[int] = field(default_factory=list)
    """The special tokens the replies end with (the saved generation config stops at them)."""

    def describe(self) -> str:
        cut = f", {self.truncated} cut at the prompt's start" if self.truncated else ""
        left = f", {self.dropped} over --max-length left out" if self.dropped else ""
        return (
            f"judge data: {self.kept} of {self.rows} rows{cut}{left}; {self.tokens} tokens, "
            f"{self.targets} trained (the replies through their end-of-turn token)"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _bad(message: str, path: str, line: int) -> InputError:
    return InputError(message, path=path, line=line, field="messages", hint=SHAPE_HINT)


def _row_messages(row: Any, path: str, line: int) -> list[dict[str, str]]:
    """The row's messages, checked: the export's shape (system?, user, assistant), every content a string."""
    if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
        raise _bad("a row needs a 'messages' list", path, line)
    messages = row["messages"]
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise _bad("every message needs a 'role' and a text 'content'", path, line)
    roles = [m["role"] for m in messages]
    if not roles or roles[-1] != "assistant":
        raise _bad(f"the last message must be the assistant's reply (roles: {', '.join(roles) or 'none'})", path, line)
    if roles not in ROLES:
        raise _bad(f"roles {', '.join(roles)} are not the export's shape (system, user, assistant)", path, line)
    if not messages[-1]["content"].strip():
        raise _bad("the assistant's reply is empty", path, line)
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def read_judge_rows(paths: Sequence[str]) -> list[JudgeRow]:
    """Every row of the files, checked; the first bad one is an ``InputError`` at its file:line."""
    rows = []
    for path in paths:
        for line, row in iter_rows(path):
            rows.append(JudgeRow(_row_messages(row, str(path), line), str(path), line))
    return rows


def judge_digest(rows: Sequence[JudgeRow]) -> str:
    """The content hash of the rows' messages: a resumed run with other data is refused (unless ``--force``)."""
    return content_hash([r.messages for r in rows])


def prompt_and_reply(tokenizer: Any, messages: list[dict[str, str]]) -> tuple[str, str]:
    """The text the model is given (the turns before the reply, with the generation prompt) and the text the chat
    template writes after it for the whole conversation; InputError when the template does not write the whole
    conversation as the prompt followed by more (a template that rewrites earlier turns cannot be trained so)."""
    prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    whole = tokenizer.apply_chat_template(messages, tokenize=False)
    if not whole.startswith(prompt) or len(whole) == len(prompt):
        raise InputError(
            "the chat template does not write a conversation as its prompt (with the generation prompt) followed "
            "by the reply",
            field="--model",
            hint="give a chat model whose template appends the assistant turn, or --chat-template FILE",
        )
    return prompt, whole[len(prompt) :]


def _through_end_of_turn(reply_ids: list[int], special: set[int]) -> list[int]:
    """The reply's tokens through the first special token (its end of turn); all of them when there is none."""
    end = next((i for i, t in enumerate(reply_ids) if t in special), None)
    return reply_ids if end is None else reply_ids[: end + 1]


def encode_row(tokenizer: Any, messages: list[dict[str, str]], max_length: int, truncation: str) -> EncodedRow | None:
    """The row's ids and labels (see the module docstring for the mask), or None when it is left out as too long.

    ``truncation`` ``left_prompt`` cuts the prompt's first tokens to fit ``max_length``; ``drop`` leaves the row
    out. A reply longer than ``max_length`` on its own is always left out.
    """
    prompt, reply = prompt_and_reply(tokenizer, messages)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    reply_ids = _through_end_of_turn(
        tokenizer(reply, add_special_tokens=False)["input_ids"], set(tokenizer.all_special_ids)
    )
    excess = len(prompt_ids) + len(reply_ids) - max_length
    if excess > 0:
        if truncation == "drop" or len(reply_ids) >= max_length:  # at least one prompt token stays
            return None
        prompt_ids = prompt_ids[excess:]
    return EncodedRow(prompt_ids + reply_ids, [IGNORE] * len(prompt_ids) + reply_ids, cut=excess > 0)


def encode_rows(
    tokenizer: Any, rows: Sequence[JudgeRow], max_length: int, truncation: str
) -> tuple[list[EncodedRow], JudgeDataSummary]:
    """The rows that fit (:func:`encode_row`), in order, and the counts; InputError when none is left."""
    summary = JudgeDataSummary(rows=len(rows))
    special = set(tokenizer.all_special_ids)
    encoded = []
    ends: set[int] = set()
    for row in rows:
        try:
            enc = encode_row(tokenizer, row.messages, max_length, truncation)
        except InputError:
            raise
        except Exception as e:  # the template's own refusal (jinja raise_exception: "roles must alternate", ...)
            raise InputError(
                f"the model's chat template refuses this row: {(str(e).splitlines() or [type(e).__name__])[0]}",
                path=row.path,
                line=row.line,
                hint="give rows in the export's shape, or a chat model (or --chat-template FILE) that takes them",
            ) from None
        if enc is None:
            summary.dropped += 1
            continue
        summary.truncated += enc.cut
        encoded.append(enc)
        if enc.labels[-1] in special:
            ends.add(enc.labels[-1])
    summary.kept = len(encoded)
    summary.tokens = sum(len(e.ids) for e in encoded)
    summary.targets = sum(e.targets for e in encoded)
    summary.end_of_turn = sorted(ends)
    if not encoded:
        raise InputError(
            f"all {len(rows)} rows are over --max-length {max_length}",
            path="--max-length",
            hint="raise --max-length, or pass --truncation left_prompt to cut the prompts' start",
        )
    return encoded, summary


# ---------------------------------------------------------------------- batches
def plan_judge_epoch(n_rows: int, batch_size: int, seed: int, epoch: int) -> EpochPlan:
    """One epoch's micro-batches: the rows shuffled (the same on every process for ``(seed, epoch)``, different per
    epoch) in batches of ``batch_size``, as an :class:`EpochPlan` of ``(row index, "")`` items with no pairs."""
    order = list(range(n_rows))
    random.Random(f"cheems-judge-batches:{seed}:{epoch}").shuffle(order)
    batches = [[(i, "") for i in order[k : k + batch_size]] for k in range(0, n_rows, batch_size)]
    return EpochPlan(batches, [[] for _ in batches], pairs_covered=0, pairs_total=0, forward_passes=n_rows)


def padded_batch(rows: Sequence[EncodedRow], pad_id: int, device: Any) -> dict[str, torch.Tensor]:
    """The rows right-padded to the longest: ``input_ids``, ``attention_mask`` and ``labels`` (``IGNORE`` on pads)."""
    import torch

    width = max(len(r.ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r.ids)] = torch.tensor(r.ids)
        labels[i, : len(r.ids)] = torch.tensor(r.labels)
        mask[i, : len(r.ids)] = 1
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def packed_batch(
    rows: Sequence[EncodedRow], pad_id: int, device: Any, budget: int, attention: str
) -> dict[str, torch.Tensor]:
    """The rows packed side by side in sequences of at most ``budget`` tokens (first-fit, longest first; a longer
    row gets one of its own): ``input_ids``, a 4-D ``attention_mask`` (each row attends to itself only, causally),
    ``position_ids`` restarting per row, and ``labels`` in the same places (``IGNORE`` on the padding).

    The layout and the masks are :mod:`cheems.train.packing`'s, each row a unit of its own (nothing shared);
    ``attention`` is the model's attention implementation (:func:`~cheems.train.packing.packed_inputs`).
    """
    import torch

    from cheems.train.packing import pack_layout, packed_inputs

    layout = pack_layout([(r.ids, None) for r in rows], range(len(rows)), budget, causal=True)
    inputs = packed_inputs(layout, pad_id, device, attention)
    labels = torch.full((len(layout.tokens), layout.width), IGNORE, dtype=torch.long)
    for r, (seq, last) in zip(rows, layout.read_at):  # read_at: the packed row and column of each row's last token
        labels[seq, last - len(r.ids) + 1 : last + 1] = torch.tensor(r.labels)
    inputs.pop("read_at")
    return {**inputs, "labels": labels.to(device)}


def trained_positions(labels: torch.Tensor) -> torch.Tensor:
    """The positions whose logits the loss reads (1-D, sorted): ``t`` where some row's label at ``t + 1`` is trained.
    A judge trains a few tokens a row: computing the vocabulary's logits there only (the model's ``logits_to_keep``)
    spares the ``tokens x vocabulary`` logits of the whole batch (2.5 GB in fp32 for 4,096 tokens of Qwen2)."""
    return (labels[:, 1:] != IGNORE).any(0).nonzero().flatten()


def token_loss(
    logits: torch.Tensor, labels: torch.Tensor, positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, int]:
    """Mean next-token cross-entropy (fp32) over the labelled tokens, and their count: the logit at ``t`` predicts
    the label at ``t + 1``. ``logits`` are every position's, or (``positions``) those of these positions only. In a
    packed sequence a row's last logit faces the next row's first token, a prompt token (``IGNORE``): no loss
    crosses rows."""
    import torch
    import torch.nn.functional as F

    if positions is None:
        positions = torch.arange(labels.shape[1] - 1, device=labels.device)
        logits = logits[:, :-1]
    targets = labels[:, positions + 1]
    n = int((targets != IGNORE).sum())
    total = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE, reduction="sum"
    )
    return total / max(n, 1), n
