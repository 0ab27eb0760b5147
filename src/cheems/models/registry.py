"""``load_scorer``: one spec string -> a scorer (length, similarity, an RM server, or a Hugging Face RM)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cheems.errors import InputError
from cheems.models.backbones import locate_model
from cheems.models.base import Scorer
from cheems.models.length import LengthScorer

if TYPE_CHECKING:
    from cheems.annotate.settings import ConnectionSettings

DTYPES = ("auto", "bf16", "fp16", "fp32")
_SPEC_HINT = (
    "use 'length', 'similarity:MODEL', 'vllm:URL#MODEL', 'openrlhf:URL', 'm3e-small', a model folder or a hub id"
)


def load_scorer(
    spec: str,
    *,
    batch_size: int = 16,
    max_length: int = 512,
    device: str | None = None,
    dtype: str = "auto",
    shared_prefix: bool = True,
    connection: ConnectionSettings | None = None,
) -> Scorer:
    """Build the scorer a spec names; weights load lazily, on the first ``score`` call.

    - ``length``: characters of the response (the length baseline);
    - ``similarity:MODEL``: cosine similarity of prompt and response embeddings (zero-shot);
    - ``vllm:URL#MODEL`` / ``openrlhf:URL``: a reward model behind a vLLM or OpenRLHF ``serve_rm``
      server (:mod:`cheems.models.server`; ``batch_size`` = texts per OpenRLHF request, ``connection``
      = how hard to try: the judge's timeout, retries and concurrency, default the judge's defaults);
    - anything else: an ``AutoModelForSequenceClassification`` reward model (hub id, ``id@revision``
      or local folder; ``m3e-small`` = the m3e-small Chinese backbone, with a random head).

    ``dtype``: ``auto`` (bf16 autocast where the hardware has bf16 units, else fp32), ``bf16``,
    ``fp16`` or ``fp32``. Raises ``InputError`` for a bad spec, a missing model or a model that
    does not give one score. ``shared_prefix``: a causal Hugging Face RM runs the tokens the
    responses of one prompt share once (their KV cache) instead of once per response; same scores.
    """
    spec = spec.strip()
    if not spec:
        raise InputError("empty model spec", path="--model", hint=_SPEC_HINT)
    if batch_size < 1:
        raise InputError(f"must be at least 1, got {batch_size}", path="--batch-size", hint="e.g. --batch-size 16")
    if max_length < 8:
        raise InputError(
            f"must be at least 8 tokens, got {max_length}", path="--max-length", hint="e.g. --max-length 512"
        )
    if dtype not in DTYPES:
        # no command has a --dtype option: the place is the argument
        raise InputError(f"unknown dtype '{dtype}'", path="--dtype", hint=f"use one of {', '.join(DTYPES)}")
    if spec == "length":
        return LengthScorer()
    if spec.startswith(("vllm:", "openrlhf:")):
        from cheems.models.server import server_scorer  # lazy: httpx only for server scorers

        return server_scorer(spec, batch_size, connection)
    if spec == "similarity" or spec.startswith("similarity:"):
        model = spec.partition(":")[2].strip()
        if not model:
            raise InputError("'similarity' needs an encoder", path="--model", hint="e.g. similarity:m3e-small")
        from cheems.models.similarity import SimilarityScorer  # lazy: keeps torch-free paths fast

        return SimilarityScorer(
            locate_model(model), batch_size=batch_size, max_length=max_length, device=device, dtype=dtype
        )
    from cheems.models.hf import HFRewardScorer

    return HFRewardScorer(
        locate_model(spec),
        batch_size=batch_size,
        max_length=max_length,
        device=device,
        dtype=dtype,
        shared_prefix=shared_prefix,
    )
