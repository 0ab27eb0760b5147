"""Every knob of ``cheems train-judge``: supervised fine-tuning of a causal chat model on judge rows.

The rows are what ``cheems export judge-sft`` writes (docs/formats.md, "Judge SFT rows"); the run is
:func:`cheems.train.judge_trainer.train_judge`. A setting is one field, as in
:class:`~cheems.train.config.TrainConfig`: its type and checks validate the YAML file (``--config``) and
the options alike, its ``description`` is the option's help. The resolved settings are written next to the
model as ``train_config.yaml`` and can be fed back with ``--config``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from cheems.errors import InputError
from cheems.settings import Cli, Number, Text, TextList, Whole, one_of, rule
from cheems.train.config import (
    PACKING,
    TRUNCATION,
    RunConfig,
    at_least,
    check_model_found,
    claim_run_outputs,
    load_settings,
)

MAX_EPOCHS = 100


class JudgeTrainConfig(RunConfig):
    """Settings of ``cheems train-judge``: the data, the chat model, the run. ``batch_size`` counts rows (one judge
    conversation each) per micro-step per process; the global batch is ``batch_size * grad_accum * processes``."""

    data: Annotated[TextList, Cli("-d", path=True)] = Field(
        default_factory=list, description="Judge SFT rows (cheems export judge-sft); repeat for more files."
    )
    output: Annotated[Text, rule(str.strip, "is empty", "name a folder"), Cli("-o", path=True)] = Field(
        "cheems-judge", description="Folder for the chat model, logs and checkpoints; built in OUTPUT.partial."
    )
    model: Annotated[Text, Cli("-m")] = Field(
        "", description="The causal chat model to fine-tune: a folder or hub id (AutoModelForCausalLM)."
    )
    chat_template: Annotated[Text | None, Cli(path=True)] = Field(
        None, description="A Jinja chat template file, for a model whose tokenizer has none (saved with the model)."
    )
    epochs: Annotated[
        Whole, at_least(1), rule(lambda n: n <= MAX_EPOCHS, f"must be at most {MAX_EPOCHS}, got {{value}}")
    ] = Field(2, description="Epochs.")
    lr: Annotated[Number, rule(lambda x: x > 0, "must be > 0, got {value}")] = Field(
        1e-5, description="Peak learning rate (LoRA usually wants about 1e-4)."
    )
    batch_size: Annotated[Whole, at_least(1)] = Field(8, description="Rows per micro-batch per process.")
    max_length: Annotated[Whole, at_least(2)] = Field(
        4096, description="Max tokens per row (prompt and reply, through the reply's end-of-turn token)."
    )
    truncation: Annotated[Text, one_of(TRUNCATION, "policy")] = Field(
        "drop", description="drop (leave out rows over --max-length) or left_prompt (cut the prompt's start)."
    )
    """Either way the reply (the verdict, a critique) is never cut: a row whose reply alone is over
    ``max_length`` is left out. Both are counted and said."""
    packing: Annotated[Text, one_of(PACKING, "packing")] = Field(
        "auto", description="auto (several rows per sequence, each attending to itself only) or none (padded)."
    )
    """``auto``: a micro-batch's rows laid side by side in sequences of ``pack_tokens`` (first-fit), position ids
    restarting per row and no attention across rows (:mod:`cheems.train.packing`'s layout and masks), for models
    whose layers all attend fully; others (sliding-window layers) and ``none``: right-padded rows."""
    pack_tokens: Annotated[
        Whole, rule(lambda n: n == -1 or n >= 1, "must be -1 (auto) or a token count, got {value}")
    ] = -1
    """Tokens per packed sequence (``packing: auto``); a longer row gets one of its own. ``-1``: 1024 on a CPU,
    4096 on a GPU (:func:`cheems.train.packing.pack_budget`)."""


def load_judge_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> JudgeTrainConfig:
    """Defaults < YAML file ``path`` < ``overrides`` (None values are ignored), validated once
    (:func:`~cheems.train.config.load_settings`)."""
    return load_settings(JudgeTrainConfig, path, overrides)


def check_judge_run(config: JudgeTrainConfig, config_path: str | Path | None = None) -> None:
    """What ``cheems train-judge`` checks before any training work: data and a model are given, the output replaces
    none of the inputs (the config file, a local model, the data, the chat template), and the model is found."""
    if not config.data:
        raise InputError(
            "cheems train-judge needs training data",
            field="data",
            hint="e.g. cheems export judge-sft ranked.jsonl -o judge.jsonl, then --data judge.jsonl",
        )
    if not config.model.strip():
        raise InputError(
            "cheems train-judge needs a causal chat model",
            field="model",
            hint="give --model FOLDER (or a hub id in the Hugging Face cache), e.g. a Qwen2.5 instruct model",
        )
    claim_run_outputs(config, config_path, [("--chat-template", config.chat_template)])
    check_model_found(config.model)
