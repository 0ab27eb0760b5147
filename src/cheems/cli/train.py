"""``cheems train`` (:func:`cheems.train`); also ``python -m cheems.cli.train`` (e.g. under ``accelerate launch``)."""

from __future__ import annotations

from typing import Any

from cheems.cli.options import ConfigFile, NoProgress, command_main, run_settings, settings_options
from cheems.train.config import TrainConfig, check_run, load_config

# the options in the order --help shows them: TrainConfig's fields and the command's own config and no_progress
TRAIN_OPTIONS = """data output model config epochs max_length lr batch_size grad_accum warmup_ratio reg_coef truncation
pooling packing preset eval_bench allow_overlap eval_every save_every seed bf16 lora.enabled gradient_checkpointing cpu
length_head lm_weight lm_target keep_lm_head no_progress resume force overwrite""".split()


@settings_options(TrainConfig, *TRAIN_OPTIONS)
def train_command(*, config: ConfigFile = None, no_progress: NoProgress = False, settings: dict[str, Any]) -> None:
    """Train a reward model on ranked preference records; save a Hugging Face folder to --output."""
    cfg = run_settings(TrainConfig, load_config, config, settings, no_progress)
    check_run(cfg, config, model_given="model" in settings)  # before any training work
    from cheems.train.trainer import train_reward_model  # torch: only once the config is known to be good

    train_reward_model(cfg)


def _main() -> None:
    """``python -m cheems.cli.train``: the command alone (:func:`~cheems.cli.options.command_main`)."""
    command_main("train", train_command)


if __name__ == "__main__":
    _main()
