"""Reward functions for RL trainers that call a function rather than a server.

- :func:`trl_reward`: TRL's GRPO (``reward_funcs=[trl_reward("rm/")]``), over a local model or a reward server;
- :func:`compute_score`: verl's custom reward function (``custom_reward_function.path`` = the file of
  :mod:`cheems.rewards.verl_custom`), over a reward server;
- :func:`trl_verdict_reward`, :func:`verdict_score`, :func:`verdict_scores`: rewards for training a generative
  judge (its final ``[[A]]``/``[[B]]``/``[[C]]`` tag against the expected verdict; :mod:`cheems.rewards.judge_rewards`).

The reward-model functions score each (prompt, response) in the reward model's own input format, whatever form
the trainer hands them.
"""

from cheems.rewards.grpo import RewardFunction, trl_reward
from cheems.rewards.judge_rewards import VerdictReward, trl_verdict_reward, verdict_score, verdict_scores
from cheems.rewards.verl_custom import compute_score

__all__ = [
    "RewardFunction",
    "VerdictReward",
    "compute_score",
    "trl_reward",
    "trl_verdict_reward",
    "verdict_score",
    "verdict_scores",
]
