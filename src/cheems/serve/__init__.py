"""``cheems serve``: a reward model over HTTP for RL trainers (OpenRLHF's and vLLM's protocols), scoring
concurrent one-sample requests together, exactly as ``cheems score`` scores."""

from cheems.serve.reward_app import create_reward_app, serve_model
from cheems.serve.serve_settings import ServeSettings

__all__ = ["ServeSettings", "create_reward_app", "serve_model"]
