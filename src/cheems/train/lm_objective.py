"""A next-token loss beside the Bradley–Terry loss on the same backbone (``cheems train --lm-weight W``).

The joint objective of a causal reward model is ``(1 - W) * (BT + reg_coef * prior) + W * LM``, where LM is
the mean next-token negative log-likelihood (fp32) over the micro-step's labelled tokens:

* ``lm_target: chosen`` (GRM, Yang et al. 2024, "Regularizing Hidden States Enables Learning Generalizable
  Reward Model for LLMs"): the tokens of the best-ranked responses, read in the rows the BT loss forwards
  anyway. A prompt's best responses are those that lose none of the pairs cheems trains on: every
  top-ranked response of the prompt's resolved ranking (a tie at the top keeps them all; the pairs come from
  a ranking, so every prompt with pairs has at least one). The labelled tokens run from the response's first
  token to the row's end (the chat template's end-of-turn tokens included: the model learns where to stop).
* ``lm_target: critique`` (CLoud, Ankner et al. 2024): a response's ``critique`` (a string field of the
  response in the records) after the response: one extra row per such response, ``[prompt, response]`` as the
  reward reads it followed by the critique's tokens and the end-of-sequence token, labelled on the critique
  only. Its reward is not used. Responses without a critique add no LM tokens.

GRM's code weights the two the same way (``w * sft + (1 - w) * bt``, ``w = 0.01``); its default SFT term is
``-log sigmoid(beta * sum log p(chosen))``. cheems takes the plain token-mean NLL, which does not depend on the
response's length or on which responses share a micro-step, so packed and padded batches give the same loss.

The logits are computed at the labelled positions only (``[tokens, vocab]``, never ``[rows x width, vocab]``).
``W = 0`` (the default) leaves the run as it was: no LM head is loaded, no extra work is done.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models.encoding import Features, RewardEncoder
from cheems.models.prefix import common_prefix_length
from cheems.train.batching import Item, PromptGroup

if TYPE_CHECKING:
    import torch

CRITIQUE_KEY = "critique"
LM_FOLDER = "lm"
"""``--keep-lm-head``: the causal-LM folder inside the output (backbone + LM head + tokenizer)."""


@dataclass
class LmTargets:
    """Which tokens the LM loss reads, per forwarded response (:data:`~cheems.train.batching.Item`)."""

    starts: dict[Item, int] = field(default_factory=dict)
    """``chosen``: the index in the response's row of its first labelled token (the row's rest is labelled)."""
    critiques: dict[Item, tuple[Features, int]] = field(default_factory=dict)
    """``critique``: the extra row (response row + critique) and the index of its first labelled token."""

    def step_rows(self, items: Sequence[Item], rows: list[Features]) -> tuple[list[Features], list[int | None]]:
        """The rows of a micro-step with its critique rows after them, and each row's first labelled token
        (None: no LM tokens in that row)."""
        extra = [self.critiques[i] for i in items if i in self.critiques]
        starts = [self.starts.get(i) for i in items] + [start for _, start in extra]
        return rows + [row for row, _ in extra], starts

    def step_keys(self, items: Sequence[Item]) -> list[int]:
        """The prompt of each row of :meth:`step_rows` (packing shares a prompt's tokens across its rows)."""
        return [p for p, _ in items] + [p for p, r in items if (p, r) in self.critiques]


def best_responses(group: PromptGroup) -> list[str]:
    """The responses of ``group`` that lose none of its pairs (all top-ranked ones of a ranking)."""
    losers = {l for _, l in group.pairs}
    return [rid for rid in group.responses if rid not in losers]


def label_positions(
    rows: Sequence[Features], starts: Sequence[int | None], place: Callable[[int, int], tuple[int, int]]
) -> tuple[list[tuple[int, int]], list[int]]:
    """Where the LM reads each labelled token and what it should predict there.

    Token ``j`` of row ``i`` (``j >= starts[i]``) is predicted from the hidden state of token ``j - 1``, which
    ``place(i, j - 1)`` locates in the forwarded tensors (padded: (row, column); packed: the packed cell).
    """
    at: list[tuple[int, int]] = []
    labels: list[int] = []
    for i, start in enumerate(starts):
        if start is None:
            continue
        ids = rows[i][0]
        for j in range(max(start, 1), len(ids)):
            at.append(place(i, j - 1))
            labels.append(ids[j])
    return at, labels


def lm_inputs(at: list[tuple[int, int]], labels: list[int], device: Any) -> dict[str, torch.Tensor]:
    """``lm_at`` ([N, 2]) and ``lm_labels`` ([N]) of :class:`~cheems.train.model.RewardModel`'s forward."""
    import torch

    return {
        "lm_at": torch.tensor(at, dtype=torch.long, device=device).reshape(-1, 2),
        "lm_labels": torch.tensor(labels, dtype=torch.long, device=device),
    }


def joint_loss(
    bt_loss: torch.Tensor, stats: dict[str, float], nll_sum: torch.Tensor, tokens: int, weight: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """``(1 - weight) * bt_loss + weight * nll_sum / tokens``; the stats gain ``lm_loss`` and ``lm_tokens``.

    A micro-step with no labelled token has an LM term of 0 (``nll_sum`` is then a zero that still reaches the
    LM head, so every process's backward touches the same parameters)."""
    lm = nll_sum / tokens if tokens else nll_sum
    loss = (1 - weight) * bt_loss + weight * lm
    return loss, {**stats, "lm_loss": float(lm.detach()), "lm_tokens": tokens}


# ---------------------------------------------------------------------- targets
def lm_targets(
    records: list[Record],
    groups: list[PromptGroup],
    features: dict[Item, Features],
    encoder: RewardEncoder,
    target: str,
) -> LmTargets:
    """The labelled tokens of every forwarded response for ``target`` (``chosen`` or ``critique``)."""
    if target == "critique":
        return LmTargets(critiques=_critique_rows(records, groups, features, encoder))
    chosen = [(g.prompt, rid) for g in groups for rid in best_responses(g)]
    items = [(records[p].prompt, records[p].response(rid).content) for p, rid in chosen]
    empty = [(prompt, "") for prompt, _ in items]
    full, bare = encoder.untruncated_ids(items), encoder.untruncated_ids(empty)
    starts = {}
    for item, ids, prefix in zip(chosen, full, bare):
        tail = len(ids) - common_prefix_length([ids, prefix])  # the response's tokens to the row's end, before any cut
        starts[item] = max(1, len(features[item][0]) - tail)  # a cut row lost its front, never its end
    return LmTargets(starts=starts)


def _critique_rows(
    records: list[Record], groups: list[PromptGroup], features: dict[Item, Features], encoder: RewardEncoder
) -> dict[Item, tuple[Features, int]]:
    """Each forwarded response with a critique: its row followed by the critique (and eos), cut at the front to
    the encoder's limit, with the index of the critique's first token."""
    tokenizer = encoder.tokenizer
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    found: dict[Item, str] = {}
    for group in groups:
        record = records[group.prompt]
        for rid in group.responses:
            text = (record.response(rid).model_extra or {}).get(CRITIQUE_KEY)
            if text is None:
                continue
            if not isinstance(text, str) or not text.strip():
                raise InputError(
                    f"record '{record.id}' response '{rid}': '{CRITIQUE_KEY}' must be a non-empty string, got {text!r}",
                    field="lm_target",
                    hint="give each critiqued response a text critique, or leave the key out",
                )
            found[group.prompt, rid] = text
    if not found:
        raise InputError(
            f"--lm-target critique: no response in the training data has a '{CRITIQUE_KEY}'",
            field="lm_target",
            hint=f"add a '{CRITIQUE_KEY}' string to the responses (docs/formats.md), or use --lm-target chosen",
        )
    encoded = tokenizer(list(found.values()), add_special_tokens=False, verbose=False)["input_ids"]
    rows: dict[Item, tuple[Features, int]] = {}
    for item, critique in zip(found, encoded):
        critique = list(critique) + eos
        ids = (features[item][0] + critique)[-encoder.limit :]
        rows[item] = ((ids, None), max(1, len(ids) - len(critique)))
    return rows


# ---------------------------------------------------------------------- the LM head
def check_lm_backbone(model: Any, spec: str, option: str) -> None:
    """A joint LM loss (or a kept LM head) needs a causal LM read at its last token: one line otherwise."""
    if model.encoder or model.pooling != "last":
        raise InputError(
            f"{option} needs a causal language model; {spec} is an encoder (BERT-like) with no language-model head",
            field=option.removeprefix("--").replace("-", "_"),
            hint="use a causal LM backbone (e.g. a Qwen2 folder), or leave the option out",
        )


def load_lm_head(location: str, revision: str | None, model: Any, spec: str, option: str) -> torch.Tensor | None:
    """The checkpoint's LM head weight ``[vocab, hidden]``, or None when the model ties it to its input
    embeddings (``tie_word_embeddings``: the embeddings are the head)."""
    check_lm_backbone(model, spec, option)
    if getattr(model.config, "tie_word_embeddings", False):
        return None
    weight = _checkpoint_tensor(location, revision, "lm_head.weight")
    if weight is None:
        raise InputError(
            f"{option} needs the checkpoint's language-model head, and {spec} has none (no lm_head.weight in its "
            "safetensors)",
            field=option.removeprefix("--").replace("-", "_"),
            hint="start from the causal LM's own folder (…ForCausalLM), not from a reward model's",
        )
    return weight


def _checkpoint_tensor(location: str, revision: str | None, name: str) -> torch.Tensor | None:
    """One tensor of a (sharded or single-file) safetensors checkpoint, or None when it holds none by that name."""
    from safetensors import safe_open
    from transformers.utils import cached_file

    def fetch(filename: str) -> str | None:
        return cached_file(
            location,
            filename,
            revision=revision,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
        )

    index = fetch("model.safetensors.index.json")
    if index is not None:
        shard = json.loads(Path(index).read_text(encoding="utf-8")).get("weight_map", {}).get(name)
        path = fetch(shard) if shard else None
    else:
        path = fetch("model.safetensors")
    if path is None:
        return None
    with safe_open(path, framework="pt") as f:
        return f.get_tensor(name) if name in f.keys() else None


def save_causal_lm(model: Any, head: torch.Tensor | None, tokenizer: Any, directory: Path) -> Path:
    """``--keep-lm-head``: the trained backbone with the LM head ``head`` (None: tied to the embeddings) as a
    complete causal-LM folder that ``AutoModelForCausalLM`` loads, with the tokenizer (and its chat template).

    ``model`` is the saved :class:`~cheems.train.model.RewardModel` (LoRA already merged). The reward model's
    own folder stays a plain sequence-classification one: the head lives here only.
    """
    from cheems.data.io import write_json
    from cheems.models.backbones import FORMAT_KEY, MAX_LENGTH_KEY
    from cheems.models.pooling import backbone_of
    from cheems.models.quiet import quiet_libraries
    from cheems.outputs import follow_umask

    hf = model.hf
    state = {f"{hf.base_model_prefix}.{k}": v for k, v in backbone_of(hf).state_dict().items()}
    if head is not None:
        state["lm_head.weight"] = head.detach().to(next(iter(state.values())).dtype)
    directory.mkdir(parents=True, exist_ok=True)
    with quiet_libraries():
        hf.save_pretrained(directory, state_dict=state)
        tokenizer.save_pretrained(directory)
    follow_umask(directory.glob("*.safetensors"))
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    config["architectures"] = [type(hf).__name__.replace("ForSequenceClassification", "ForCausalLM")]
    for key in ("id2label", "label2id", "num_labels", FORMAT_KEY, MAX_LENGTH_KEY):
        config.pop(key, None)
    write_json(directory / "config.json", config)
    return directory
