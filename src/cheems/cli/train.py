"""``cheems train`` (:func:`cheems.train`); also ``python -m cheems.cli.train`` (e.g. under ``accelerate launch``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.options import NoProgress, settings_options
from cheems.errors import InputError
from cheems.settings import from_options
from cheems.train.config import TrainConfig, check_run, load_config

# the options in the order --help shows them: TrainConfig's fields and the command's own config and no_progress
TRAIN_OPTIONS = """data output model config epochs max_length lr batch_size grad_accum warmup_ratio reg_coef truncation
pooling packing preset eval_bench allow_overlap eval_every save_every seed bf16 lora.enabled gradient_checkpointing cpu
length_head lm_weight lm_target keep_lm_head no_progress resume force overwrite""".split()


@settings_options(TrainConfig, *TRAIN_OPTIONS)
def train_command(
    *,
    config: Annotated[
        Optional[Path], typer.Option("--config", "-c", help="YAML config; command-line options override it.")
    ] = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Train a reward model on ranked preference records; save a Hugging Face folder to --output."""

    try:
        cfg = load_config(config, settings | ({"progress": False} if no_progress else {}))
    except InputError:
        from_options(TrainConfig, settings)  # a bad option value is an error naming the option
        raise
    check_run(cfg, config, model_given="model" in settings)  # before any training work
    from cheems.train.trainer import train_reward_model  # torch: only once the config is known to be good

    train_reward_model(cfg)


def _main() -> None:
    """``python -m cheems.cli.train``: the command alone, with the CLI's one-line errors and clean interrupts."""
    from cheems.cli.console import run

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command("train")(train_command)
    run(app)


if __name__ == "__main__":
    _main()
