"""Reward functions for RL trainers that call a function rather than a server.

- :func:`trl_reward`: TRL's GRPO (``reward_funcs=[trl_reward("rm/")]``), over a local model or a reward server;
- :func:`compute_score`: verl's custom reward function (``custom_reward_function.path`` = the file of
  :mod:`cheems.rewards.verl_custom`), over a reward server.

Both score each (prompt, response) in the reward model's own input format, whatever form the trainer hands them.
"""

from cheems.rewards.grpo import RewardFunction, trl_reward
from cheems.rewards.verl_custom import compute_score

__all__ = ["RewardFunction", "compute_score", "trl_reward"]
