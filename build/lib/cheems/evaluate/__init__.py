"""Metrics, benchmark runner and reports."""

from cheems.evaluate.bench import EvalReport, evaluate, load_bench, score_bench
from cheems.evaluate.metrics import GroupMetrics, expected_calibration_error, overall

__all__ = [
    "EvalReport",
    "GroupMetrics",
    "evaluate",
    "expected_calibration_error",
    "load_bench",
    "overall",
    "score_bench",
]
