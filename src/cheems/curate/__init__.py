"""Curating a preference set (paper part 2): quality filters, distant supervision, length debias, merging.

Imports only ``cheems.data``, ``cheems.ranking`` and the judge's settings model (a recipe's typed
``judge:`` section): length debias works on ``cheems.ranking.training_pairs`` (the pairs training
would use), and the LLM judge and the RM scorer of a recipe are passed in by the caller.
"""

from cheems.curate.debias import DebiasReport, implied_pairs, length_debias
from cheems.curate.distant import DistantReport, distant_supervision, is_acyclic, keep_comparison
from cheems.curate.filters import FilterConfig, FilterReport, filter_records, non_chinese_share
from cheems.curate.merge import MergeReport, merge_subsets
from cheems.curate.recipe import Recipe, RecipeSummary, load_recipe, run_recipe

__all__ = [
    "DebiasReport",
    "DistantReport",
    "FilterConfig",
    "FilterReport",
    "MergeReport",
    "Recipe",
    "RecipeSummary",
    "distant_supervision",
    "filter_records",
    "implied_pairs",
    "is_acyclic",
    "keep_comparison",
    "length_debias",
    "load_recipe",
    "merge_subsets",
    "non_chinese_share",
    "run_recipe",
]
