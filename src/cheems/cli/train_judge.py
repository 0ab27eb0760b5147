"""``cheems train-judge`` (:func:`cheems.train_judge`); also ``python -m cheems.cli.train_judge`` (e.g. under
``accelerate launch``)."""

from __future__ import annotations

from typing import Any

from cheems.cli.options import ConfigFile, NoProgress, command_main, run_settings, settings_options
from cheems.train.judge_config import JudgeTrainConfig, check_judge_run, load_judge_config

# the options in the order --help shows them: JudgeTrainConfig's fields and the command's own config and no_progress
JUDGE_OPTIONS = """data model output config chat_template epochs max_length truncation packing lr batch_size grad_accum
warmup_ratio lora.enabled save_every seed bf16 gradient_checkpointing cpu no_progress resume force overwrite""".split()


@settings_options(JudgeTrainConfig, *JUDGE_OPTIONS)
def train_judge_command(
    *, config: ConfigFile = None, no_progress: NoProgress = False, settings: dict[str, Any]
) -> None:
    """Fine-tune a causal chat model as a judge on `cheems export judge-sft` rows (loss on the reply only)."""
    cfg = run_settings(JudgeTrainConfig, load_judge_config, config, settings, no_progress)
    check_judge_run(cfg, config)  # before any training work
    from cheems.train.judge_trainer import train_judge_model  # torch: only once the config is known to be good

    train_judge_model(cfg)


def _main() -> None:
    """``python -m cheems.cli.train_judge``: the command alone (:func:`~cheems.cli.options.command_main`)."""
    command_main("train-judge", train_judge_command)


if __name__ == "__main__":
    _main()
