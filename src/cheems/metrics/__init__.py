"""The metrics of judged pairs: CheemsBench's (:mod:`cheems.metrics.cheemsbench`) and one module per other
benchmark, each registered as a ``--metric`` (:data:`cheems.metrics.metric_registry.METRICS`), the ``--compat`` rules
(:mod:`cheems.metrics.compat`) and every bootstrap draw (:mod:`cheems.metrics.bootstrap`).

A new benchmark's metric is one module here with one ``@register_metric`` function, and one line below.
Importing the package registers every metric; each imports numpy or scipy only when it computes, so the CLI
lists ``--metric`` at start-up without them.
"""

from cheems.runtime import lazy_exports

# isort: off
# registered in this order, the order --metric lists them
from cheems.metrics import rmbench, rmb, pairwise, judgebench, kendall, ppe, rewardbench  # noqa: F401
# isort: on

_EXPORTS = {
    "GroupMetrics": "cheemsbench",
    "METRICS": "metric_registry",
    "expected_calibration_error": "cheemsbench",
    "overall": "cheemsbench",
    "register_metric": "metric_registry",
    "subset_metrics": "cheemsbench",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
