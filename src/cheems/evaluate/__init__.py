"""Metrics, benchmark runner and reports.

Names are imported on first use (:func:`cheems.runtime.lazy_exports`), so the CLI lists the
``--metric`` registry (:mod:`cheems.evaluate.benchmarks`) at start-up without numpy and the runner.
"""

import sys

from cheems.runtime import callable_package, lazy_exports

_EXPORTS = {
    "EvalReport": "bench",
    "GroupMetrics": "metrics",
    "evaluate_scores": "bench",
    "expected_calibration_error": "metrics",
    "load_bench": "bench",
    "overall": "metrics",
    "score": "evaluation",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
# cheems.evaluate(...) is cheems.evaluate.evaluation.evaluate(...): the package and the public function share the name
callable_package(sys.modules[__name__], "evaluation:evaluate")

# the metrics registered beside benchmarks.py's own, so that --metric lists them wherever METRICS is read
# (each imports numpy or scipy only when it computes)
from cheems.evaluate import kendall, ppe, rewardbench  # noqa: E402, F401
