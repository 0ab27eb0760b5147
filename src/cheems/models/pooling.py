"""Which hidden state a reward model's head reads: the one pooling rule that scoring and training share.

* ``last`` (causal LMs): the last real token, found from the attention mask, so left and right padding give
  the same reward (position ids are derived from the mask too). The standard ``*ForSequenceClassification``
  class reads the same token whenever the padding token does not occur inside the text.
* ``cls`` (encoders, the default): the standard forward (first token -> pooler -> head), what
  ``BertForSequenceClassification`` computes anywhere else.
* ``mean`` (encoders): the mask-weighted mean of the last hidden states -> dropout -> head. No standard class
  pools this way, so a folder records ``"cheems_pooling": "mean"`` (:data:`POOLING_KEY`) in its config.json and
  :func:`recorded_pooling` reads it back; loaders other than cheems read the ``[CLS]`` token instead.

:func:`reward_forward` is the forward of all three; ``cheems.models.hf`` scores through it and
``cheems.train.model.RewardModel`` trains through it. torch is imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from cheems.errors import InputError
from cheems.models.quiet import HEAD_MODULES

if TYPE_CHECKING:
    import torch

POOLING_KEY = "cheems_pooling"
POOLINGS = ("last", "cls", "mean")


def resolve_pooling(pooling: str, encoder: bool) -> str:
    """``auto`` -> ``cls`` for encoders, ``last`` for causal LMs; reject combinations that cannot work."""
    if pooling == "auto":
        return "cls" if encoder else "last"
    if pooling not in POOLINGS:
        raise InputError(f"unknown pooling {pooling!r}", field="pooling", hint="use auto, last, cls or mean")
    if not encoder and pooling != "last":
        raise InputError(
            f"pooling {pooling!r} is for encoders; a causal LM reads its last token",
            field="pooling",
            hint="use pooling: last (or auto)",
        )
    return pooling


def recorded_pooling(config: Mapping[str, Any] | Any) -> str:
    """The pooling a saved folder records (:data:`POOLING_KEY`, config.json as a dict or a transformers config),
    else ``auto``: only mean pooling is recorded, the others are what the architecture does anyway."""
    value = config.get(POOLING_KEY) if isinstance(config, Mapping) else getattr(config, POOLING_KEY, None)
    return value if isinstance(value, str) and value else "auto"


def model_pooling(model: Any) -> str:
    """The pooling a loaded ``*ForSequenceClassification`` model is scored with: what its folder records, else
    ``last`` for a ``score`` head (causal LMs) and ``cls`` for the rest (encoders' ``classifier``)."""
    import torch

    encoder = not isinstance(getattr(model, "score", None), torch.nn.Module)
    return resolve_pooling(recorded_pooling(model.config), encoder)


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last position whose mask is 1, per row (left or right padding alike)."""
    import torch

    positions = torch.arange(attention_mask.shape[-1], device=attention_mask.device)
    return (positions * attention_mask.long()).argmax(-1)


def backbone_of(model: Any) -> Any:
    """The transformer under a ``*ForSequenceClassification`` model (``model.bert``, ``model.model``...)."""
    return getattr(model, model.base_model_prefix)


def head_name(model: Any) -> str:
    """The attribute that holds the one-score head (``score`` or ``classifier``)."""
    for name in HEAD_MODULES:
        if hasattr(model, name):
            return name
    raise InputError(f"{type(model).__name__} has no 'score' or 'classifier' head", field="model")


def reward_forward(
    model: Any,
    pooling: str,
    input_ids: torch.Tensor,
    attention_mask: Any,
    token_type_ids: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    read_at: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rewards ``[B]`` (float32) of padded rows of a ``*ForSequenceClassification`` ``model`` read by ``pooling``.

    With ``read_at`` (``last``, or ``cls`` on a BERT-like layout), a packed batch (training's packing): a prepared
    4-D ``attention_mask``, its ``position_ids``, and the (row, column) of each reward's token, giving
    ``[len(read_at)]`` rewards.
    """
    extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
    head = getattr(model, head_name(model))
    if pooling == "cls" and read_at is not None:  # packed whole sequences: BERT's pooler at each [CLS]
        backbone = backbone_of(model)  # a BERT-like model: packing checked its pooler
        out = backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **extra)
        first = out[0][read_at[:, 0], read_at[:, 1]]
        pooled = backbone.pooler(first[:, None])  # the pooler reads position 0 of what it is given
        return cast("torch.Tensor", head(model.dropout(pooled))[:, 0].float())
    if pooling == "cls":
        out = model(input_ids=input_ids, attention_mask=attention_mask, **extra)
        return cast("torch.Tensor", out.logits[:, 0].float())
    if pooling == "last":
        return last_token_outputs(model, head, input_ids, attention_mask, position_ids, read_at)[0]
    hidden = backbone_of(model)(input_ids=input_ids, attention_mask=attention_mask, **extra)[0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
    dropout = getattr(model, "dropout", None)
    if callable(dropout):
        pooled = dropout(pooled)
    return cast("torch.Tensor", head(pooled)[:, 0].float())


def last_token_outputs(
    model: Any,
    head: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor | None,
    read_at: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The head at each row's last real token (found from the mask: no pad_token_id guessing, which breaks when
    pad == eos and a text ends in eos), or at ``read_at`` in a packed batch: the rewards of :func:`reward_forward`'s
    ``last`` pooling, and the backbone's last hidden states ``[rows, width, hidden]`` they were read from (a joint
    language-model loss reads its token logits there)."""
    import torch

    if position_ids is None:
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    hidden = backbone_of(model)(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
    )[0]
    if read_at is not None:
        pooled = hidden[read_at[:, 0], read_at[:, 1]]
    else:
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last_token_index(attention_mask)]
    return cast("torch.Tensor", head(pooled)[:, 0].float()), hidden
