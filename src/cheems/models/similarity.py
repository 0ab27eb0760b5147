"""Zero-shot baseline: how close the response is to the prompt in a sentence-embedding space.

Score = cosine similarity of the mean-pooled last-layer embeddings of prompt and response
(m3e's ``uniem_embedding_strategy: last_mean``). It needs no preference training: a floor that
a trained reward model should clear.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cheems.errors import CheemsWarning
from cheems.models.backbones import ModelSource
from cheems.models.base import SCORING_VERSION, ScoreItem, advance, length_batches, prompt_text
from cheems.models.encoding import collate, effective_max_length, load_tokenizer
from cheems.models.hf import batch_token_budget
from cheems.models.quiet import load_pretrained, missing_weights_text
from cheems.runtime import autocast, compute_dtype, content_hash, pick_device

if TYPE_CHECKING:
    import torch


class SimilarityScorer:
    """Cosine similarity between mean-pooled embeddings of prompt and response."""

    def __init__(
        self,
        source: ModelSource,
        *,
        batch_size: int = 16,
        max_length: int = 512,
        device: str | None = None,
        dtype: str = "auto",
    ) -> None:
        self.name = f"similarity:{source.spec}"
        self.source = source
        self.batch_size = batch_size
        self.max_length = max_length
        self.dtype = dtype
        self._device = device
        self._amp: Any = None
        self._tokenizer: Any = None
        self._model: Any = None

    def fingerprint(self) -> str:
        """Hash of the encoder files' identity and the embedding settings (no weights read)."""
        return "sim-" + content_hash(
            {
                "v": SCORING_VERSION,
                "kind": "similarity",
                "pooling": "mean",
                "model": self.source.identity,
                "max_length": self.max_length,
                "dtype": self.dtype,
            },
            keyed=True,
        )

    def _load(self) -> None:
        import torch
        from transformers import AutoModel

        self._tokenizer = load_tokenizer(self.source)
        self._device = pick_device(self._device)
        self._amp = compute_dtype(self._device, self.dtype)
        model, _, missing = load_pretrained(
            AutoModel, self.source.location, revision=self.source.revision, dtype=torch.float32
        )
        if missing:
            warnings.warn(missing_weights_text(self.source.spec, missing), CheemsWarning, stacklevel=2)
        self._model = model.eval().to(self._device)

    def embed(self, texts: Sequence[str], report: bool = False) -> "torch.Tensor":
        """Unit-length mean-pooled embeddings, one row per text (fp32, on the CPU)."""
        import torch

        if self._model is None:
            self._load()
        tok, dev = self._tokenizer, self._device
        assert dev is not None  # known once the model is loaded
        limit = effective_max_length(self.max_length, tok, self.source.config)
        enc = tok(list(texts), truncation=True, max_length=limit)
        rows = [(ids, None) for ids in enc["input_ids"]]
        out = torch.empty((len(texts), self._model.config.hidden_size))
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        budget = batch_token_budget(dev, self.batch_size, limit)
        with torch.inference_mode(), autocast(dev, self._amp):
            for batch in length_batches([len(r[0]) for r in rows], self.batch_size, budget):
                inputs = collate([rows[i] for i in batch], pad_id, dev)
                hidden = self._model(**inputs).last_hidden_state.float()
                mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
                out[batch] = torch.nn.functional.normalize(pooled, dim=-1).cpu()
                if report:
                    advance(len(batch))
        return out

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        """Cosine similarity of each (prompt, response); each distinct prompt is embedded once."""
        if not items:
            return []
        prompts = [prompt_text(p) for p, _ in items]
        unique = list(dict.fromkeys(prompts))
        where = {p: i for i, p in enumerate(unique)}
        prompt_vecs = self.embed(unique)
        response_vecs = self.embed([r for _, r in items], report=True)
        rows = prompt_vecs[[where[p] for p in prompts]]
        return (rows * response_vecs).sum(dim=-1).tolist()
