"""Hugging Face sequence-classification reward models (``AutoModelForSequenceClassification``).

torch and transformers are imported inside functions only: building a scorer and fingerprinting
it stay cheap, and a run whose scores all come from the cache never imports them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cheems.errors import CheemsWarning, InputError
from cheems.models.backbones import ModelSource
from cheems.models.base import SCORING_VERSION, ScoreItem, advance, length_batches, prompt_messages, prompt_text
from cheems.models.quiet import load_pretrained, missing_weights_text, quiet_libraries
from cheems.runtime import autocast, compute_dtype, content_hash, pick_device

if TYPE_CHECKING:
    import torch

# Padded tokens per batch on a CPU. Measured on m3e-small: one sequence already runs the matmuls
# at full speed there, and batches past ~512 tokens only spill the caches (2,350 tok/s at 256-512
# tokens vs 1,900 at 4,096, one thread). GPUs want full batches: batch_size x max_length.
CPU_BATCH_TOKENS = 512
_warned_no_head: set[str] = set()


def batch_token_budget(device: str, batch_size: int, max_length: int) -> int:
    """Most padded tokens per batch (see ``length_batches``) for ``device``."""
    import torch

    return CPU_BATCH_TOKENS if torch.device(device).type == "cpu" else batch_size * max_length


def collate(rows: Sequence[tuple[list[int], list[int] | None]], pad_id: int, device: str) -> dict[str, "torch.Tensor"]:
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


# ---------------------------------------------------------------- the reward model scorer


def has_reward_head(source: ModelSource) -> bool:
    """Check the config: a trained one-score head (True), no head at all (False, warns), or an error.

    A folder without a ``*ForSequenceClassification`` architecture still works (a random head is
    added) so a backbone can be benchmarked, but its scores mean nothing: say so once.
    """
    config = source.config
    if any(a.endswith("ForSequenceClassification") for a in source.architectures):
        n = len(config["id2label"]) if isinstance(config.get("id2label"), dict) else config.get("num_labels", 2)
        if n != 1:
            raise InputError(
                f"model '{source.spec}' has num_labels={n}; a reward model gives one score per response",
                hint="use a reward model trained with num_labels=1 (a classifier is not a reward model)",
            )
        return True
    if source.location not in _warned_no_head:
        _warned_no_head.add(source.location)
        archs = ", ".join(source.architectures) or "none"
        warnings.warn(
            f"model '{source.spec}' has no reward head (architectures: {archs}): new reward head initialised, "
            "a random value head, so its scores mean nothing (fine for throughput tests only)",
            CheemsWarning,
            stacklevel=4,
        )  # point at the load_scorer caller
    return False


class HFRewardScorer:
    """A reward model: reward = the model's one logit for (prompt, response).

    Causal LMs (a ``score`` head) are read at the last real token, found from the attention mask;
    encoders (BERT-like) use their own pooling and classifier.
    """

    def __init__(
        self,
        source: ModelSource,
        *,
        batch_size: int = 16,
        max_length: int = 512,
        device: str | None = None,
        dtype: str = "auto",
    ) -> None:
        self.name = source.spec
        self.source = source
        self.batch_size = batch_size
        self.max_length = max_length
        self.dtype = dtype
        self._device = device
        self._amp: Any = None  # autocast dtype, resolved with the device when the model loads
        self._trained_head = has_reward_head(source)
        self._tokenizer: Any = None
        self._model: Any = None

    def fingerprint(self) -> str:
        """Hash of the model files' identity and the settings that change scores (no weights read)."""
        return "hf-" + content_hash(
            {
                "v": SCORING_VERSION,
                "kind": "hf-seq-cls",
                "model": self.source.identity,
                "max_length": self.max_length,
                "dtype": self.dtype,
            },
            keyed=True,
        )

    @property
    def tokenizer(self) -> Any:
        """The tokenizer (loaded on first use)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.source)
        return self._tokenizer

    @property
    def model(self) -> Any:
        """The model in eval mode on its device (loaded on first use)."""
        if self._model is None:
            self._model = self._load_model()
        return self._model

    def _load_model(self) -> Any:
        import torch
        from transformers import AutoModelForSequenceClassification

        self._device = pick_device(self._device)
        self._amp = compute_dtype(self._device, self.dtype)
        # On a GPU keep the weights in the compute precision (half the memory); on a CPU keep fp32
        # weights and let autocast run the matmuls in bf16. Explicit: transformers may default to
        # the checkpoint's dtype, and bf16 weights on a CPU without bf16 units crawl.
        weights = self._amp if (self._amp is not None and torch.device(self._device).type == "cuda") else torch.float32
        kwargs: dict[str, Any] = {"revision": self.source.revision, "dtype": weights}
        if not self._trained_head:
            kwargs["num_labels"] = 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # a missing (random) head is the same on every run: cacheable
            model, head, other = load_pretrained(AutoModelForSequenceClassification, self.source.location, **kwargs)
        if head and self._trained_head:  # the config names a reward head, the weights lack it
            warnings.warn(
                f"model '{self.source.spec}' has no weights for its reward head ({', '.join(head)}): new reward "
                "head initialised at random, so its scores mean nothing",
                CheemsWarning,
                stacklevel=2,
            )
        if other:
            warnings.warn(missing_weights_text(self.source.spec, other), CheemsWarning, stacklevel=2)
        model.config.use_cache = False  # no KV cache needed to read one reward
        return model.eval().to(self._device)

    def encode(self, items: Sequence[ScoreItem]) -> list[tuple[list[int], list[int] | None]]:
        """Token ids (and token type ids for text pairs) of each (prompt, response), truncated."""
        tok = self.tokenizer
        limit = effective_max_length(self.max_length, tok, self.source.config)
        if tok.chat_template:
            # The template already writes BOS and role markers: add no special tokens on top.
            texts = [
                tok.apply_chat_template(prompt_messages(p) + [{"role": "assistant", "content": r}], tokenize=False)
                for p, r in items
            ]
            ids = tok(texts, add_special_tokens=False, verbose=False)["input_ids"]  # cut below, from the left
            return [(x[-limit:], None) for x in ids]  # keep the end: the response and its last turns
        return self._encode_pairs(items, limit)

    def _encode_pairs(self, items: Sequence[ScoreItem], limit: int) -> list[tuple[list[int], list[int] | None]]:
        """(prompt, response) as a text pair; the prompt is cut first so the response survives."""
        tok = self.tokenizer
        prompts = [prompt_text(p) for p, _ in items]
        responses = [r for _, r in items]
        room = limit - tok.num_special_tokens_to_add(pair=True)
        # verbose=False: these lengths may exceed the model limit on purpose (no warning needed)
        response_len = [len(x) for x in tok(responses, add_special_tokens=False, verbose=False)["input_ids"]]
        out: list[tuple[list[int], list[int] | None]] = [([], None)] * len(items)
        # only_first needs one prompt token left; a response too long even alone is cut too.
        for strategy, keep in (("only_first", True), ("longest_first", False)):
            idx = [i for i in range(len(items)) if (response_len[i] < room) == keep]
            if not idx:
                continue
            enc = tok([prompts[i] for i in idx], [responses[i] for i in idx], truncation=strategy, max_length=limit)
            types = enc.get("token_type_ids")
            for j, i in enumerate(idx):
                out[i] = (enc["input_ids"][j], types[j] if types is not None else None)
        return out

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        """Rewards for (prompt, response) items, batched by length, in the order given."""
        if not items:
            return []
        import torch

        model = self.model
        encoded = self.encode(items)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        last_token_head = isinstance(getattr(model, "score", None), torch.nn.Module)
        scores = [0.0] * len(items)
        budget = batch_token_budget(self._device, self.batch_size, self.max_length)
        batches = length_batches([len(ids) for ids, _ in encoded], self.batch_size, budget)
        with torch.inference_mode(), autocast(self._device, self._amp):
            for batch in batches:
                inputs = collate([encoded[i] for i in batch], pad_id, self._device)
                values = self._last_token_reward(model, inputs) if last_token_head else model(**inputs).logits[:, 0]
                for i, v in zip(batch, values.float().tolist()):
                    scores[i] = v
                advance(len(batch))
        return scores

    @staticmethod
    def _last_token_reward(model: Any, inputs: dict[str, "torch.Tensor"]) -> "torch.Tensor":
        """Run the backbone and apply the ``score`` head at each row's last real token.

        We pad on the right, so for a causal model real tokens never attend to padding and keep
        their positions, and the last real token sits at mask.sum - 1: no pad_token_id guessing
        (which breaks when pad == eos and a text ends in eos).
        """
        import torch

        mask = inputs["attention_mask"]
        hidden = model.base_model(input_ids=inputs["input_ids"], attention_mask=mask).last_hidden_state
        last = mask.sum(dim=1) - 1
        return model.score(hidden[torch.arange(hidden.shape[0], device=hidden.device), last])[:, 0]
