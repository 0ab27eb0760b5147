"""cheems: build and evaluate Chinese reward models from scratch (Wen et al., 2025).

The public Python API (docs/api.md); every ``cheems`` command prints what one of these returns::

    import cheems

    bench = cheems.load_bench(["open.jsonl"])
    report = cheems.evaluate(bench, cheems.load_scorer("length"))
    report.to_dict()  # what `cheems eval --output-json` writes

Names are imported on first use (:func:`cheems.runtime.lazy_exports`): ``import cheems`` loads
neither torch nor the readers. ``cheems.__version__`` is the installed package's version
(:func:`cheems.runtime.package_version`), what ``cheems --version`` prints.
"""

import inspect
from typing import Any

from cheems.runtime import lazy_exports, package_version

_EXPORTS = {
    # records
    "Record": "data.schema",
    "ReadResult": "data.io",
    "read_records": "data.stream",
    "write_records": "data.io",
    "read_scores": "data.io",
    "write_scores": "data.io",
    "InputError": "errors",
    "convert_file": "data.importers",
    "ImportSettings": "data.importers",
    "file_stats": "data.dataset_stats",
    "validate_files": "evaluate.distribution",
    "split_file": "data.split",
    "SplitSettings": "data.split",
    # ranking
    "resolve": "ranking.resolve:resolve_file_records",
    "resolve_record": "ranking.resolve",
    "resolve_file": "ranking.resolve",
    "training_pairs": "ranking.pairs",
    # judging and curation
    "JudgeSettings": "judge.judge_settings",
    "judge": "judge:",  # the package, callable: cheems.judge(...) is judging.judge_records(...)
    "judge_files": "judge.judge_files",
    "GenerateSettings": "llm.sampling",
    "generate_files": "llm.sampling",
    "FilterConfig": "curate.filters",
    "filter_records": "curate.filters",
    "filter_file": "curate.filters",
    "distant_supervision": "curate.distant",
    "distant_file": "curate.distant",
    "DistantSettings": "curate.distant",
    "length_debias": "curate.debias",
    "debias_file": "curate.debias",
    "DebiasSettings": "curate.debias",
    "merge_subsets": "curate.subsets",
    "Recipe": "curate.recipe",
    "load_recipe": "curate.recipe",
    "run_recipe": "curate.recipe",
    # scoring and evaluation
    "Scorer": "models.base",
    "ScoreCache": "models.score_cache",
    "load_scorer": "models.registry",
    "ScoringSettings": "models.scoring",
    "EvalReport": "evaluate.bench",
    "load_bench": "evaluate.bench",
    "score": "evaluate.evaluation",
    "evaluate": "evaluate:",  # the package, callable: cheems.evaluate(...) is evaluation.evaluate(...)
    "compare": "evaluate.evaluation",
    "bon": "evaluate.evaluation",
    "BonSettings": "evaluate.run_settings",
    "bon_files": "evaluate.bon_files",
    "WinrateSettings": "evaluate.run_settings",
    "winrate_files": "evaluate.winrate",
    "ScoredBy": "evaluate.evaluation",
    "EvalSettings": "evaluate.run_settings",
    "evaluate_files": "evaluate.evaluation",
    "score_files": "evaluate.evaluation",
    "leaderboard": "evaluate.leaderboard:load_leaderboard",
    "load_suite": "evaluate.suite",
    "suite_files": "evaluate.suite",
    # training
    "TrainConfig": "train.config",
    "train": "train:",  # the package, callable: cheems.train(...) is trainer.train(...)
}
__all__ = sorted(_EXPORTS)
_exported = lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str) -> Any:
    """A public name, imported on first use; a function comes with its arguments checked
    (:func:`cheems.arguments.checked`: a wrong type raises a ``TypeError`` naming the argument)."""
    if name == "__version__":  # read from the package metadata on first use, not at import
        return package_version()
    found = _exported(name)
    if inspect.isfunction(found):
        from cheems.arguments import checked

        found = globals()[name] = checked(found, name)  # kept: wrapped once, and later lookups skip __getattr__
    return found
