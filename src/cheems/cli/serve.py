"""``cheems serve MODEL``: the reward model over HTTP for RL trainers (OpenRLHF ``/get_reward``, vLLM
``/classify`` and ``/pooling``). Thin: the server is :func:`cheems.serve.serve_model`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cheems.cli.console import console, err
from cheems.cli.options import settings_options
from cheems.models.scoring import ScoringSettings
from cheems.serve.serve_settings import ServeSettings
from cheems.settings import settings_of

SERVE_OPTIONS = "host port max_batch max_wait_ms max_queue request_timeout truncate api_key_env served_model_name"
SCORING = ("max_length", "batch_size", "device", "dtype", "no_shared_prefix")


@settings_options((ServeSettings, ScoringSettings), *SERVE_OPTIONS.split(), *SCORING, show_defaults=True)
def serve(
    *,
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Reward model: anything `cheems score --model` takes.")],
    settings: dict[str, Any],
) -> None:
    """Serve a reward model to RL trainers (OpenRLHF /get_reward, vLLM /classify and /pooling) until Ctrl-C;
    concurrent requests are scored together, with cheems score's rewards."""
    from cheems.serve import serve_model

    cfg = settings_of(ServeSettings, settings)
    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"warning: listening on {cfg.host}: anyone who can reach it may use the model", style="yellow")
    address = f"http://{f'[{cfg.host}]' if ':' in cfg.host else cfg.host}:{cfg.port}"
    line = f"serving {model} at {address} (POST /get_reward, /classify, /pooling)"
    serve_model(
        settings_of(ScoringSettings, {**settings, "model": model}),
        cfg,
        ready=lambda: console.print(line, soft_wrap=True),
    )
