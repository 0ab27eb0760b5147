"""Scorers behind one protocol (length baseline, embedding similarity, Hugging Face reward models,
reward model servers: vLLM and OpenRLHF), batched scoring of records with an on-disk score cache.

Importing this package does not import torch; model scorers import it when they first score.
"""

from cheems.models.backbones import resolve_backbone
from cheems.models.base import ScoreItem, Scorer
from cheems.models.length import LengthScorer
from cheems.models.registry import load_scorer
from cheems.models.score_cache import ScoreCache, default_cache_path, score_records

__all__ = [
    "LengthScorer",
    "ScoreCache",
    "ScoreItem",
    "Scorer",
    "default_cache_path",
    "load_scorer",
    "resolve_backbone",
    "score_records",
]
