"""The evaluation run: a bench in, judged pairs out (:mod:`cheems.metrics` computes their numbers), the report,
its checks, suites of benches and the doctor.

Names are imported on first use (:func:`cheems.runtime.lazy_exports`), so the CLI starts without numpy and the
runner.
"""

import sys

from cheems.runtime import callable_package, lazy_exports

_EXPORTS = {
    "EvalReport": "bench",
    "evaluate_scores": "bench",
    "load_bench": "bench",
    "score": "evaluation",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
# cheems.evaluate(...) is cheems.evaluate.evaluation.evaluate(...): the package and the public function share the name
callable_package(sys.modules[__name__], "evaluation:evaluate")
