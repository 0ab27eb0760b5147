"""A reward model: a Hugging Face backbone with a one-output head, giving one scalar per input.

The model is built with ``AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)``,
so a saved checkpoint is a standard Hugging Face folder (``Qwen2ForSequenceClassification``,
``BertForSequenceClassification``, ...) that loads in ``cheems eval --model DIR``, TRL or
RewardBench without this package. A folder that already has a trained one-label head (a released
reward model such as Skywork-Reward-V2: ``*ForSequenceClassification``, ``score.weight``, one label)
keeps it as it is, weights and reward scale, and trains on from it; a backbone without a head gets a
new random one; a head of more labels (a classifier) is refused. :class:`RewardModel` only chooses
which hidden state the head reads, by the rule in :mod:`cheems.models.pooling` that scoring shares:
``last`` for causal LMs, ``cls`` (default) or ``mean`` for encoders. Mean pooling is recorded as
``"cheems_pooling": "mean"`` in ``config.json``; cheems honours it when loading, but loaders other
than cheems (TRL, RewardBench, a plain ``AutoModelForSequenceClassification``) read the ``[CLS]``
token through the (untrained) pooler instead and score differently. Prefer ``cls`` for
checkpoints meant to leave cheems.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from cheems.errors import CheemsWarning, InputError
from cheems.models.backbones import is_encoder_config
from cheems.models.hf import names_reward_head
from cheems.models.pooling import POOLING_KEY, backbone_of, head_name, recorded_pooling, resolve_pooling, reward_forward


def _unwrap_peft(model: nn.Module) -> nn.Module:
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


class RewardModel(nn.Module):
    """``forward(input_ids, attention_mask[, token_type_ids]) -> rewards [B]`` (float32).

    ``model`` is the ``*ForSequenceClassification`` model (or a PEFT model around it); the
    whole computation happens inside :meth:`forward`, so DDP / DeepSpeed wrappers see it.
    """

    def __init__(self, model: nn.Module, pooling: str = "auto", new_head: bool = False) -> None:
        super().__init__()
        self.model = model
        self.new_head = new_head  # the head started random (the checkpoint had none): the usual start of training
        self.encoder = is_encoder_config(self.hf.config)
        self.pooling = resolve_pooling(pooling, self.encoder)
        if self.pooling in ("last", "mean"):
            head = self._head()
            inner = getattr(head, "modules_to_save", None)  # a PEFT ModulesToSaveWrapper
            base = getattr(head, "original_module", head)
            if not isinstance(base, nn.Linear) and inner is None:
                raise InputError(
                    f"pooling {self.pooling!r} needs a linear value head; "
                    f"{type(self.hf).__name__} has {type(base).__name__}",
                    field="pooling",
                    hint="use pooling: cls",
                )

    @property
    def hf(self) -> Any:  # a transformers model: its attributes (config, base_model_prefix) are its class's
        """The Hugging Face ``*ForSequenceClassification`` model (inside PEFT when LoRA is on)."""
        return _unwrap_peft(self.model)

    @property
    def config(self) -> Any:
        return self.hf.config

    def _backbone(self) -> nn.Module:
        return cast("nn.Module", backbone_of(self.hf))

    def _head_name(self) -> str:
        return head_name(self.hf)

    def _head(self) -> nn.Module:
        return cast("nn.Module", getattr(self.hf, self._head_name()))

    def head_weights(self) -> list[str]:
        """The names of the head's weights in the checkpoint: ``["score.weight"]`` for a causal LM's head."""
        name = self._head_name()
        head = self._head()
        return [f"{name}.{weight}" for weight, _ in getattr(head, "original_module", head).named_parameters()]

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: Any,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        read_at: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Rewards ``[B]`` of padded rows; or, with ``read_at`` (``last``, or ``cls`` on a BERT-like layout), of a
        packed batch (:mod:`cheems.train.packing`): a prepared 4-D ``attention_mask``, its ``position_ids``, and
        the (row, column) of each reward's token, giving ``[len(read_at)]`` rewards."""
        return reward_forward(self.hf, self.pooling, input_ids, attention_mask, token_type_ids, position_ids, read_at)


def _set_pad_token(model: Any, tokenizer: Any) -> None:
    if tokenizer.pad_token is None:
        for fallback in (tokenizer.eos_token, tokenizer.unk_token):
            if fallback is not None:
                tokenizer.pad_token = fallback
                break
        else:
            raise InputError(
                "the tokenizer has no pad, eos or unk token to pad with",
                field="model",
                hint="add a pad token to the tokenizer",
            )
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id


def load_reward_model(
    path: str | Path,
    *,
    pooling: str = "auto",
    dtype: torch.dtype = torch.float32,
    lora: Any = None,
    gradient_checkpointing: bool = False,
    revision: str | None = None,
    tokenizer: Any = None,
) -> tuple[RewardModel, Any]:
    """Load ``path`` (a local folder) as a one-label reward model and its tokenizer.

    ``pooling="auto"`` takes the checkpoint's recorded ``cheems_pooling`` when present. A trained
    one-label head is loaded as saved (``new_head`` False); a head of more labels is an InputError.
    ``lora`` is a :class:`cheems.train.config.LoraSettings`; adapters need ``pip install peft``.
    The tokenizer (``tokenizer``, else the folder's) gets a pad token (eos) when it has none,
    and the config its id.
    """
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from cheems.models.quiet import load_pretrained, missing_weights_text, quiet_libraries

    path = str(path)
    try:
        with quiet_libraries():
            config = AutoConfig.from_pretrained(path, revision=revision)
    except (OSError, ValueError) as e:
        raise InputError(
            f"cannot load a model config from {path!r}: {e}",
            field="model",
            hint="give a folder with config.json (and weights)",
        ) from None
    names_reward_head(path, list(config.architectures or ()), config.num_labels)
    if pooling == "auto":
        pooling = recorded_pooling(config)
    if tokenizer is None:
        with quiet_libraries():
            tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)
    model, head, other = load_pretrained(
        AutoModelForSequenceClassification, path, revision=revision, num_labels=1, dtype=dtype
    )
    if other:
        warnings.warn(missing_weights_text(path, other), CheemsWarning, stacklevel=2)
    _set_pad_token(model, tokenizer)
    model.config.num_labels = 1
    if gradient_checkpointing:
        # non-reentrant checkpointing works with DDP and frozen (LoRA) inputs; transformers 5 renamed the method
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if hasattr(model.config, "use_cache"):
            model.config.use_cache = False
    if lora is not None and getattr(lora, "enabled", False):
        model = _add_lora(model, lora)
    return RewardModel(model, pooling, new_head=bool(head)), tokenizer


def _add_lora(model: nn.Module, lora: Any) -> nn.Module:
    try:
        import peft
    except ImportError:
        raise InputError("LoRA needs the peft package", field="lora", hint="pip install peft") from None
    config = peft.LoraConfig(
        task_type=peft.TaskType.SEQ_CLS,
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
    )
    return peft.get_peft_model(model, config)


def merged_hf_model(model: RewardModel) -> Any:
    """The plain ``*ForSequenceClassification`` model: LoRA adapters merged in (in place) when present."""
    merge = getattr(model.model, "merge_and_unload", None)
    if merge is not None:
        model.model = merge()
    return model.model


def save_reward_model(
    model: RewardModel,
    tokenizer: Any,
    directory: str | Path,
    state_dict: dict[str, torch.Tensor] | None = None,
    recorded: dict[str, Any] | None = None,
) -> Path:
    """Write a standard Hugging Face folder: config (num_labels=1, architectures), safetensors, tokenizer.

    ``state_dict`` (keys of the *inner* HF model) is for gathered ZeRO-3 weights; by default
    the model's own. LoRA adapters are merged into the saved weights. Mean pooling is
    recorded as ``"cheems_pooling": "mean"`` (see the module docstring); ``recorded`` (the training
    encoder's :meth:`~cheems.models.encoding.RewardEncoder.recorded`: max length and input format)
    goes into config.json too, so scoring reads the model as it was trained.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    hf = merged_hf_model(model)
    hf.config.num_labels = 1
    if model.pooling == "mean":
        setattr(hf.config, POOLING_KEY, "mean")
    elif hasattr(hf.config, POOLING_KEY):
        delattr(hf.config, POOLING_KEY)
    for key, value in (recorded or {}).items():
        setattr(hf.config, key, value)
    from cheems.models.quiet import quiet_libraries
    from cheems.outputs import follow_umask

    with quiet_libraries():  # no "Writing model shards" bar
        hf.save_pretrained(directory, state_dict=state_dict)
        tokenizer.save_pretrained(directory)
    follow_umask(directory.glob("*.safetensors"))  # safetensors writes them 0600; the rest follows the umask
    return directory
