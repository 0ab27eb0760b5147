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
from typing import TYPE_CHECKING, Any

from cheems.runtime import lazy_exports, package_version

if TYPE_CHECKING:  # what type checkers see: every name of _EXPORTS with its real type (at run time each is lazy)
    from cheems.analysis.bon import bon as bon
    from cheems.analysis.bon_files import bon_files as bon_files
    from cheems.analysis.compare import compare as compare
    from cheems.analysis.distribution import validate_files as validate_files
    from cheems.analysis.leaderboard import load_leaderboard
    from cheems.analysis.winrate import winrate_files as winrate_files
    from cheems.curate.debias import DebiasSettings as DebiasSettings
    from cheems.curate.debias import debias_file as debias_file
    from cheems.curate.debias import length_debias as length_debias
    from cheems.curate.distant import DistantSettings as DistantSettings
    from cheems.curate.distant import distant_file as distant_file
    from cheems.curate.distant import distant_supervision as distant_supervision
    from cheems.curate.filters import FilterConfig as FilterConfig
    from cheems.curate.filters import filter_file as filter_file
    from cheems.curate.filters import filter_records as filter_records
    from cheems.curate.recipe import Recipe as Recipe
    from cheems.curate.recipe import load_recipe as load_recipe
    from cheems.curate.recipe import run_recipe as run_recipe
    from cheems.curate.subsets import merge_subsets as merge_subsets
    from cheems.data.dataset_stats import file_stats as file_stats
    from cheems.data.importers import ImportSettings as ImportSettings
    from cheems.data.importers import convert_file as convert_file
    from cheems.data.io import ReadResult as ReadResult
    from cheems.data.io import read_scores as read_scores
    from cheems.data.io import write_records as write_records
    from cheems.data.io import write_scores as write_scores
    from cheems.data.schema import Record as Record
    from cheems.data.split import SplitSettings as SplitSettings
    from cheems.data.split import split_file as split_file
    from cheems.data.stream import read_records as read_records
    from cheems.errors import InputError as InputError
    from cheems.evaluate.bench import EvalReport as EvalReport
    from cheems.evaluate.bench import load_bench as load_bench
    from cheems.evaluate.evaluation import ScoredBy as ScoredBy
    from cheems.evaluate.evaluation import evaluate as evaluate  # the package cheems.evaluate, called
    from cheems.evaluate.evaluation import evaluate_files as evaluate_files
    from cheems.evaluate.evaluation import score as score
    from cheems.evaluate.evaluation import score_files as score_files
    from cheems.evaluate.run_settings import BonSettings as BonSettings
    from cheems.evaluate.run_settings import EvalSettings as EvalSettings
    from cheems.evaluate.run_settings import WinrateSettings as WinrateSettings
    from cheems.evaluate.suite import load_suite as load_suite
    from cheems.evaluate.suite import suite_files as suite_files
    from cheems.judge.judge_files import judge_files as judge_files
    from cheems.judge.judge_settings import JudgeSettings as JudgeSettings
    from cheems.judge.judging import judge_records
    from cheems.llm.sampling import GenerateSettings as GenerateSettings
    from cheems.llm.sampling import generate_files as generate_files
    from cheems.models.base import Scorer as Scorer
    from cheems.models.registry import load_scorer as load_scorer
    from cheems.models.score_cache import ScoreCache as ScoreCache
    from cheems.models.scoring import ScoringSettings as ScoringSettings
    from cheems.prompts.judge_sft import JudgeSftSettings as JudgeSftSettings
    from cheems.prompts.judge_sft import export_judge_sft as export_judge_sft
    from cheems.ranking.pairs import training_pairs as training_pairs
    from cheems.ranking.resolve import resolve_file as resolve_file
    from cheems.ranking.resolve import resolve_file_records
    from cheems.ranking.resolve import resolve_record as resolve_record
    from cheems.serve.reward_app import create_reward_app as create_reward_app
    from cheems.serve.reward_app import serve_model as serve_model
    from cheems.serve.serve_settings import ServeSettings as ServeSettings
    from cheems.train.config import TrainConfig as TrainConfig
    from cheems.train.judge_config import JudgeTrainConfig as JudgeTrainConfig
    from cheems.train.judge_trainer import train_judge as train_judge
    from cheems.train.trainer import train as train  # the package cheems.train, called

    # public under another name than their module's (an ``import x as y`` would not re-export them to pyright)
    judge = judge_records  # the package cheems.judge, called
    leaderboard = load_leaderboard
    resolve = resolve_file_records
    __version__: str

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
    "validate_files": "analysis.distribution",
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
    "serve_model": "serve.reward_app",
    "create_reward_app": "serve.reward_app",
    "ServeSettings": "serve.serve_settings",
    "EvalReport": "evaluate.bench",
    "load_bench": "evaluate.bench",
    "score": "evaluate.evaluation",
    "evaluate": "evaluate:",  # the package, callable: cheems.evaluate(...) is evaluation.evaluate(...)
    "compare": "analysis.compare",
    "bon": "analysis.bon",
    "BonSettings": "evaluate.run_settings",
    "bon_files": "analysis.bon_files",
    "WinrateSettings": "evaluate.run_settings",
    "winrate_files": "analysis.winrate",
    "ScoredBy": "evaluate.evaluation",
    "EvalSettings": "evaluate.run_settings",
    "evaluate_files": "evaluate.evaluation",
    "score_files": "evaluate.evaluation",
    "leaderboard": "analysis.leaderboard:load_leaderboard",
    "load_suite": "evaluate.suite",
    "suite_files": "evaluate.suite",
    # training
    "TrainConfig": "train.config",
    "export_judge_sft": "prompts.judge_sft",
    "JudgeSftSettings": "prompts.judge_sft",
    "train": "train:",  # the package, callable: cheems.train(...) is trainer.train(...)
    "JudgeTrainConfig": "train.judge_config",
    "train_judge": "train.judge_trainer",
}
__all__ = sorted(_EXPORTS)
_exported = lazy_exports(__name__, _EXPORTS)


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error there, not an Any

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
