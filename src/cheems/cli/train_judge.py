"""``cheems train-judge`` (:func:`cheems.train_judge`); also ``python -m cheems.cli.train_judge`` (e.g. under
``accelerate launch``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.options import NoProgress, settings_options
from cheems.errors import InputError
from cheems.settings import from_options
from cheems.train.judge_config import JudgeTrainConfig, check_judge_run, load_judge_config

# the options in the order --help shows them: JudgeTrainConfig's fields and the command's own config and no_progress
JUDGE_OPTIONS = """data model output config chat_template epochs max_length truncation packing lr batch_size grad_accum
warmup_ratio lora.enabled save_every seed bf16 gradient_checkpointing cpu no_progress resume force overwrite""".split()


@settings_options(JudgeTrainConfig, *JUDGE_OPTIONS)
def train_judge_command(
    *,
    config: Annotated[
        Optional[Path], typer.Option("--config", "-c", help="YAML config; command-line options override it.")
    ] = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Fine-tune a causal chat model as a judge on `cheems export judge-sft` rows (loss on the reply only)."""
    try:
        cfg = load_judge_config(config, settings | ({"progress": False} if no_progress else {}))
    except InputError:
        from_options(JudgeTrainConfig, settings)  # a bad option value is an error naming the option
        raise
    check_judge_run(cfg, config)  # before any training work
    from cheems.train.judge_trainer import train_judge_model  # torch: only once the config is known to be good

    train_judge_model(cfg)


def _main() -> None:
    """``python -m cheems.cli.train_judge``: the command alone, with the CLI's one-line errors and clean interrupts."""
    from cheems.cli.console import run

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command("train-judge")(train_judge_command)
    run(app)


if __name__ == "__main__":
    _main()
