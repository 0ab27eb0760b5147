"""Curating a preference set (paper part 2): quality filters, distant supervision, length debias, merging.

Imports only ``cheems.data``, ``cheems.ranking`` and the judge's settings model (a recipe's typed
``judge:`` section): length debias works on ``cheems.ranking.training_pairs`` (the pairs training
would use), and the LLM judge and the RM scorer of a recipe are passed in by the caller.

Names are imported on first use (:func:`cheems.runtime.lazy_exports`), so reading the settings
model at CLI start-up does not import every stage.
"""

from cheems.runtime import lazy_exports

_EXPORTS = {
    "DebiasReport": "debias",
    "DistantReport": "distant",
    "FilterConfig": "filters",
    "FilterReport": "filters",
    "MergeReport": "merge",
    "Recipe": "recipe",
    "RecipeSummary": "recipe",
    "debias_step": "debias",
    "distant_step": "distant",
    "distant_supervision": "distant",
    "filter_records": "filters",
    "filter_step": "filters",
    "implied_pairs": "debias",
    "is_acyclic": "distant",
    "keep_comparison": "distant",
    "length_debias": "debias",
    "load_recipe": "recipe",
    "merge_step": "merge",
    "merge_subsets": "merge",
    "non_chinese_share": "filters",
    "run_recipe": "recipe",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
