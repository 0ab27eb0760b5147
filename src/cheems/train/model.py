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
from cheems.models.backbones import FORMAT_KEY, MAX_LENGTH_KEY, is_encoder_config
from cheems.models.encoding import DEFAULT_MAX_LENGTH, effective_max_length
from cheems.models.hf import names_reward_head
from cheems.models.pooling import (
    POOLING_KEY,
    backbone_of,
    head_name,
    last_token_outputs,
    recorded_pooling,
    resolve_pooling,
    reward_forward,
)
from cheems.train.model_card import TrainingFacts, check_card_free, model_card, write_model_card


def unwrap_peft(model: nn.Module) -> nn.Module:
    """The model inside a PEFT wrapper (LoRA), or ``model`` itself."""
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
        self.lm_tied = False  # attach_lm_head: the LM head is the input embeddings
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
        return unwrap_peft(self.model)

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
        lm_at: torch.Tensor | None = None,
        lm_labels: torch.Tensor | None = None,
        **inputs: torch.Tensor | None,
    ) -> Any:
        """Rewards ``[B]`` of padded rows; or, with ``read_at`` (``last``, or ``cls`` on a BERT-like layout), of a
        packed batch (:mod:`cheems.train.packing`): a prepared 4-D ``attention_mask``, its ``position_ids``, and
        the (row, column) of each reward's token, giving ``[len(read_at)]`` rewards. ``inputs``: the optional
        ``token_type_ids``, ``position_ids`` and ``read_at`` of :func:`cheems.models.pooling.reward_forward`.

        With ``lm_at`` ([N, 2] (row, column) of hidden states) and ``lm_labels`` ([N] token ids) — a model with
        an LM head (:meth:`attach_lm_head`, ``--lm-weight``) — returns ``(rewards, nll)``: the summed next-token
        loss of the labels predicted from those hidden states, of the same forward."""
        if lm_at is None:
            return reward_forward(self.hf, self.pooling, input_ids, attention_mask, **inputs)
        head = getattr(self.hf, head_name(self.hf))
        position_ids, read_at = inputs.get("position_ids"), inputs.get("read_at")
        rewards, hidden = last_token_outputs(self.hf, head, input_ids, attention_mask, position_ids, read_at)
        return rewards, self._lm_nll(hidden, lm_at, lm_labels)

    def attach_lm_head(self, weight: torch.Tensor | None, trainable: bool = True) -> None:
        """Give the model the language-model head ``weight`` (``[vocab, hidden]``; None: the input embeddings,
        for a model that ties them), trained with the backbone when ``trainable``. Only ``--lm-weight`` calls it:
        without it the model's parameters and state are exactly the reward model's."""
        self.lm_tied = weight is None
        if weight is not None:
            self.lm_head = nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=weight.dtype)
            with torch.no_grad():
                self.lm_head.weight.copy_(weight)
            self.lm_head.requires_grad_(trainable)

    def own_lm_head(self) -> torch.Tensor | None:
        """The attached LM head's own weight; None when it is tied to the input embeddings."""
        return None if self.lm_tied else self.lm_head.weight

    def lm_weight_matrix(self) -> torch.Tensor:
        """The LM head's weight: its own, or the input embeddings it is tied to."""
        if self.lm_tied:
            return cast("torch.Tensor", self._backbone().get_input_embeddings().weight)  # type: ignore[operator]
        return self.lm_head.weight

    def _lm_nll(self, hidden: torch.Tensor, at: torch.Tensor, labels: Any) -> torch.Tensor:
        """Summed cross-entropy of ``labels`` from the logits at ``at`` only, in fp32 (never ``[rows x width,
        vocab]``). No label: a zero that still depends on the head (every process touches the same weights)."""
        weight = self.lm_weight_matrix()
        picked = hidden[at[:, 0], at[:, 1]] if at.numel() else hidden[:1, 0]
        with torch.autocast(hidden.device.type, enabled=False):  # bf16 logits lose the small probabilities
            logits = nn.functional.linear(picked.float(), weight.float())
        if not at.numel():
            return logits.sum() * 0.0
        return nn.functional.cross_entropy(logits, labels, reduction="sum")


def _last_input_token(tokenizer: Any) -> int | None:
    """The token every input ends with (the end of the assistant turn the chat template writes, or a pair's
    final ``[SEP]``): what the reward of a causal model is read at."""
    try:
        if tokenizer.chat_template:
            turns = [{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好"}]
            text = tokenizer.apply_chat_template(turns, tokenize=False)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = tokenizer("你好", "你好")["input_ids"]
    except Exception:  # a template that wants other turns (a system one, say): scoring will say what is wrong
        return None
    return cast("int | None", ids[-1] if ids else None)


def _set_pad_token(model: Any, tokenizer: Any) -> None:
    """Give the tokenizer a pad token that no input ends with, and the config its id.

    The standard ``*ForSequenceClassification`` classes of causal LMs read the reward at the last token that is
    not ``pad_token_id``: a pad token that ends every input (eos, where the chat template closes the assistant
    turn with it) would make them read the token before it. cheems itself pads by the attention mask.
    """
    last = _last_input_token(tokenizer)
    if tokenizer.pad_token is None or tokenizer.pad_token_id == last:
        candidates = [tokenizer.eos_token, tokenizer.unk_token, *tokenizer.all_special_tokens]
        usable = [t for t in candidates if t is not None and tokenizer.convert_tokens_to_ids(t) != last]
        if not usable and tokenizer.pad_token is None:
            raise InputError(
                "the tokenizer has no pad, eos or unk token to pad with",
                field="model",
                hint="add a pad token to the tokenizer",
            )
        if usable:
            tokenizer.pad_token = usable[0]
    if getattr(model.config, "pad_token_id", None) != tokenizer.pad_token_id:
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
        model = add_lora(model, lora)
    return RewardModel(model, pooling, new_head=bool(head)), tokenizer


def add_lora(model: nn.Module, lora: Any, task_type: str = "SEQ_CLS") -> nn.Module:
    """``model`` with the LoRA adapters of ``lora`` (:class:`~cheems.train.config.LoraSettings`) through PEFT, for
    ``task_type`` (a ``peft.TaskType`` name: ``SEQ_CLS``, the reward model, whose head PEFT trains in full;
    ``CAUSAL_LM``, the judge, whose LM head stays as it is). Used by every trainer; no peft is an InputError."""
    try:
        import peft
    except ImportError:
        raise InputError("LoRA needs the peft package", field="lora", hint="pip install peft") from None
    config = peft.LoraConfig(
        task_type=peft.TaskType[task_type],
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
    training: TrainingFacts | None = None,
) -> Path:
    """Write a standard Hugging Face folder: config (num_labels=1, architectures, pad_token_id), safetensors,
    tokenizer (with its chat template), and a model card (README.md, :mod:`cheems.train.model_card`).

    ``state_dict`` (keys of the *inner* HF model) is for gathered ZeRO-3 weights; by default
    the model's own. LoRA adapters are merged into the saved weights. Mean pooling is
    recorded as ``"cheems_pooling": "mean"`` (see the module docstring); ``recorded`` (the training
    encoder's :meth:`~cheems.models.encoding.RewardEncoder.recorded`: max length and input format)
    goes into config.json too, so scoring reads the model as it was trained. ``training`` (the run's base
    model, data and output) goes into the card. A README.md that cheems did not write is an InputError,
    before anything is written.
    """
    directory = Path(directory)
    check_card_free(directory)
    directory.mkdir(parents=True, exist_ok=True)
    hf = merged_hf_model(model)
    hf.config.num_labels = 1
    _set_pad_token(hf, tokenizer)  # the standard causal classes find the reward's token through pad_token_id
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
    write_model_card(directory, _card(hf.config, tokenizer, model.pooling, directory, training))
    return directory


def _card(config: Any, tokenizer: Any, pooling: str, directory: Path, training: TrainingFacts | None) -> str:
    """The model card of a saved folder, its input format and max length read from ``config`` as scoring reads
    them (a folder saved without them: the tokenizer's chat template, the default length capped by the model)."""
    recorded = getattr(config, FORMAT_KEY, None)
    chat = recorded == "chat" if recorded is not None else bool(tokenizer.chat_template)
    max_length = getattr(config, MAX_LENGTH_KEY, None) or effective_max_length(
        DEFAULT_MAX_LENGTH, tokenizer, config.to_dict()
    )
    folder = training.output if training is not None else str(directory)
    return model_card(config, chat=chat, pooling=pooling, max_length=max_length, folder=folder, training=training)
