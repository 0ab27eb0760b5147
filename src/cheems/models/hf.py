"""Hugging Face sequence-classification reward models (``AutoModelForSequenceClassification``).

torch and transformers are imported inside functions only: building a scorer and fingerprinting
it stay cheap, and a run whose scores all come from the cache never imports them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from cheems.errors import CheemsWarning, InputError
from cheems.models.backbones import ModelSource
from cheems.models.base import SCORING_VERSION, ScoreItem, advance, length_batches, prompt_messages
from cheems.models.encoding import Features, RewardEncoder, collate, scoring_max_length
from cheems.models.pooling import model_pooling, reward_forward
from cheems.models.prefix import PrefixGroup, plan_shared_prefix, prefix_rewards, supports_shared_prefix
from cheems.models.quiet import load_pretrained, missing_weights_text
from cheems.models.sharding import run_batch_share
from cheems.runtime import autocast, content_hash, inference_precision, pick_device

if TYPE_CHECKING:
    import torch

# Padded tokens per batch on a CPU (rows are capped by batch_size as well). Re-measured on m3e-small with
# 2 threads and bf16 weights (issue 33, benchmarks/score_throughput.py --in-process --budgets): 1,024-2,048
# tokens were the fastest (2.80 s for 120 responses, vs 2.94 at 512 and 3.12 at 4,096, a quiet machine), and
# under load from other processes 512 fell further behind (1-2 rows a batch, each a sync point of the threads).
# GPUs want full batches: batch_size x max_length.
CPU_BATCH_TOKENS = 2048
_warned_no_head: set[str] = set()


def batch_token_budget(device: str, batch_size: int, max_length: int) -> int:
    """Most padded tokens per batch (see ``length_batches``) for ``device``."""
    import torch

    return CPU_BATCH_TOKENS if torch.device(device).type == "cpu" else batch_size * max_length


# ---------------------------------------------------------------- the reward model scorer


def batched_rewards(
    forward: Callable[[dict[str, "torch.Tensor"]], "torch.Tensor"],
    rows: Sequence[Features],
    batches: Sequence[Sequence[int]],
    pad_id: int,
    device: str,
    precision: Callable[[], AbstractContextManager[Any]] | None = None,
) -> list[float]:
    """The one batched scoring loop: the reward of each row (in the order of ``rows``).

    Each batch (indices into ``rows``) is padded (:func:`collate`) and run through ``forward``
    (inputs -> one reward per row), inside a fresh ``precision()`` context when given. The
    caller chooses the batches and the grad mode (``torch.inference_mode`` for a scorer,
    ``torch.no_grad`` for a model that trains on). Reports each batch to :func:`advance`.
    """
    import torch

    done: list[torch.Tensor] = []
    for batch in batches:
        inputs = collate([rows[i] for i in batch], pad_id, device)
        with precision() if precision is not None else nullcontext():
            done.append(forward(inputs).float())
        advance(len(batch))
    scores = [0.0] * len(rows)
    if done:  # one copy to the host at the end: no wait on the device between batches
        for i, value in zip((i for batch in batches for i in batch), torch.cat(done).cpu().tolist()):
            scores[i] = value
    return scores


def names_reward_head(spec: str, architectures: list[str], num_labels: int) -> bool:
    """Whether a config names a one-score head (a ``*ForSequenceClassification`` architecture, one label).

    A head of more labels (a classifier) is one :class:`InputError`: it is not a reward model, and
    loading it as one would drop its trained head or fail on the shapes.
    """
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        return False
    if num_labels != 1:
        raise InputError(
            f"model '{spec}' has num_labels={num_labels}; a reward model gives one score per response",
            hint="use a reward model trained with num_labels=1 (a classifier is not a reward model)",
        )
    return True


def has_reward_head(source: ModelSource) -> bool:
    """Check the config: a trained one-score head (True), no head at all (False, warns), or an error.

    A folder without a ``*ForSequenceClassification`` architecture still works (a random head is
    added) so a backbone can be benchmarked, but its scores mean nothing: say so once.
    """
    config = source.config
    n = len(config["id2label"]) if isinstance(config.get("id2label"), dict) else config.get("num_labels", 2)
    if names_reward_head(source.spec, source.architectures, n):
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

    The head reads the hidden state :mod:`cheems.models.pooling` names: causal LMs (a ``score`` head) the last
    real token, found from the attention mask; encoders (BERT-like) their own pooler and classifier, or the mean
    of the hidden states when the folder records mean pooling. With ``shared_prefix`` (the default)
    a causal model runs the tokens the responses of one prompt share once and scores each response
    from that KV cache (:mod:`cheems.models.prefix`): the same scores, so the fingerprint ignores it.
    """

    shards = True  # scores its share of the batches under a launcher (see cheems.models.sharding)

    def __init__(
        self,
        source: ModelSource,
        *,
        batch_size: int = 16,
        max_length: int | None = None,
        device: str | None = None,
        dtype: str = "auto",
        shared_prefix: bool = True,
    ) -> None:
        self.name = source.spec
        self.source = source
        self.batch_size = batch_size
        self.max_length = scoring_max_length(source, max_length)  # None: what the model was trained at
        self.dtype = dtype
        self._device = device
        self._amp: Any = None  # autocast dtype, resolved with the device when the model loads
        self._trained_head = has_reward_head(source)
        self._encoder: RewardEncoder | None = None
        self._model: Any = None
        self.shared_prefix = shared_prefix
        # Items scored from a prompt's KV cache vs by the plain path, over this scorer's life (the fallbacks
        # are silent: the scores are the same either way).
        self.prefix_counts = {"shared": 0, "plain": 0}

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
    def encoder(self) -> RewardEncoder:
        """The model's encoding of (prompt, response), with its tokenizer (loaded on first use)."""
        if self._encoder is None:
            self._encoder = RewardEncoder(self.source, self.max_length)
        return self._encoder

    @property
    def tokenizer(self) -> Any:
        """The tokenizer (loaded on first use)."""
        return self.encoder.tokenizer

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
        # Explicit: transformers may default to the checkpoint's dtype (runtime.inference_precision is the rule).
        weights, self._amp = inference_precision(self._device, self.dtype)
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

    def encode(self, items: Sequence[ScoreItem]) -> list[Features]:
        """Token ids (and token type ids for text pairs) of each (prompt, response), truncated."""
        return self.encoder.features(items)

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        """Rewards for (prompt, response) items, batched by length, in the order given.

        Under a launcher each process runs its share of the batches (:mod:`cheems.models.sharding`).
        """
        if not items:
            return []
        return self.score_encoded(self.encode(items), items)

    def score_texts(self, texts: Sequence[str]) -> list[float]:
        """Rewards for raw texts already rendered by the caller (prompt and response in one string), in order.

        Tokenised as :meth:`RewardEncoder.encode_texts` says (as given, cut from the start), then scored through
        the same batches and forward as :meth:`score`. For a chat-format model the text the chat template writes
        scores exactly as the (prompt, response) item does.
        """
        if not texts:
            return []
        return self.score_encoded([e.features for e in self.encoder.encode_texts(texts)])

    def score_encoded(self, rows: Sequence[Features], items: Sequence[ScoreItem] | None = None) -> list[float]:
        """Rewards of rows this scorer's :attr:`encoder` made, in order: the scoring step under :meth:`score` and
        :meth:`score_texts`, for a caller that reads the encoding too (``cheems serve`` counts tokens and refuses
        long inputs from :meth:`RewardEncoder.counted` / :meth:`RewardEncoder.encode_texts`), so that each input
        is tokenised once.

        ``items`` are the (prompt, response) the rows encode, in the same order: a causal model then runs the
        prompt the rows share once (:meth:`prefix_plan`). None (rendered texts) runs every row whole.
        """
        if not rows:
            return []
        groups, plain = self.prefix_plan(items, rows) if items is not None else ([], list(range(len(rows))))
        return self._score_rows(rows, plain, groups)

    def _score_rows(self, encoded: Sequence[Features], plain: list[int], groups: list[PrefixGroup]) -> list[float]:
        """Rewards of encoded rows: the ``plain`` rows in length batches, each prefix group from its KV cache."""
        import torch

        model = self.model
        dev = self._device
        assert dev is not None  # known once the model is loaded
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        pooling = model_pooling(model)

        def forward(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
            return reward_forward(model, pooling, **inputs)

        def run(batches: Sequence[Sequence[int]]) -> list[float]:
            with torch.inference_mode(), autocast(dev, self._amp):
                scores = batched_rewards(forward, encoded, [b for b in batches if b[0] not in by_first], pad_id, dev)
                for group in (by_first[b[0]] for b in batches if b[0] in by_first):
                    for i, value in prefix_rewards(model, encoded, group, pad_id, dev, self.batch_size, budget).items():
                        scores[i] = value
                return scores

        budget = batch_token_budget(dev, self.batch_size, self.max_length)
        self.prefix_counts["plain"] += len(plain)
        self.prefix_counts["shared"] += len(encoded) - len(plain)
        # The units of work: the plain rows' batches, then each shared-prefix group (keyed by its first row).
        by_first = {group.rows[0]: group for group in groups}
        batches = [
            [plain[j] for j in b] for b in length_batches([len(encoded[i][0]) for i in plain], self.batch_size, budget)
        ] + [group.rows for group in groups]
        return run_batch_share(batches, len(encoded), run)  # under a launcher: this process's share, then all

    def prefix_plan(
        self, items: Sequence[ScoreItem], encoded: Sequence[Features]
    ) -> tuple[list[PrefixGroup], list[int]]:
        """Which rows of ``encoded`` (the ``items``) run from a shared prompt prefix, and which plainly.

        All plain when ``shared_prefix`` is off or the model cannot (:func:`supports_shared_prefix`).
        """
        if not (self.shared_prefix and supports_shared_prefix(self.model)):
            return [], list(range(len(items)))
        keys = [content_hash(p if isinstance(p, str) else prompt_messages(p)) for p, _ in items]
        return plan_shared_prefix(encoded, keys, self.encoder.limit)
