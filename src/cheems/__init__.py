"""cheems: build and evaluate Chinese reward models from scratch (Wen et al., 2025).

The public Python API (docs/api.md); every ``cheems`` command prints what one of these returns::

    import cheems

    bench = cheems.load_bench(["open.jsonl"])
    report = cheems.evaluate(bench, cheems.load_scorer("length"))
    report.to_dict()  # what `cheems eval --output-json` writes

Names are imported on first use (:func:`cheems.runtime.lazy_exports`): ``import cheems`` loads
neither torch nor the readers.
"""

import sys
import types
from typing import Any

from cheems.runtime import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    # records
    "Record": "data.schema",
    "ReadResult": "data.io",
    "read_records": "data.io",
    "write_records": "data.io",
    "read_scores": "data.io",
    "write_scores": "data.io",
    "InputError": "errors",
    # ranking
    "resolve": "ranking.resolve:resolve_file_records",
    "resolve_record": "ranking.resolve",
    "training_pairs": "ranking.pairs",
    # judging and curation
    "JudgeSettings": "annotate.settings",
    "judge": "annotate.judge:judge_records",
    "FilterConfig": "curate.filters",
    "filter_records": "curate.filters",
    "distant_supervision": "curate.distant",
    "length_debias": "curate.debias",
    "merge_subsets": "curate.merge",
    "Recipe": "curate.recipe",
    "load_recipe": "curate.recipe",
    "run_recipe": "curate.recipe",
    # scoring and evaluation
    "Scorer": "models.base",
    "ScoreCache": "models.cache",
    "load_scorer": "models.registry",
    "ScoringSettings": "models.scoring",
    "EvalReport": "evaluate.bench",
    "load_bench": "evaluate.bench",
    "score": "evaluate.evaluation",
    "evaluate": "evaluate.evaluation",
    "compare": "evaluate.evaluation",
    "bon": "evaluate.evaluation",
    "ScoredBy": "evaluate.evaluation",
    "EvalSettings": "evaluate.run_settings",
    "evaluate_files": "evaluate.evaluation",
    "score_files": "evaluate.evaluation",
    "leaderboard": "evaluate.leaderboard:load_leaderboard",
    # training
    "TrainConfig": "train.config",
    "train": "train.trainer",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)


class _Package(types.ModuleType):
    """``cheems`` itself: importing the subpackage ``cheems.evaluate`` or ``cheems.train`` binds it as an
    attribute of its parent, which would hide the public function of the same name; those two names stay
    the functions (``import cheems.train.config`` and ``from cheems.evaluate import X`` work as before)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
