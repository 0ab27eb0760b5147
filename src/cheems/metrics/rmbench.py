"""RM-Bench's metric (``cheems eval --metric rmbench``; THU-KEG/RM-Bench ``scripts/utils.py``): hard, normal
and easy accuracy of the 3x3 style matrix of each domain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cheems.data.bench_layouts import RMBENCH_STYLES
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.metrics.metric_registry import by_category, pair_right, register_metric

if TYPE_CHECKING:  # numpy loads with the first metric computed: the CLI lists METRICS at start-up
    import numpy as np

    from cheems.metrics.outcomes import PromptOutcome


def _triangles(matrix: np.ndarray) -> dict[str, Any]:
    """hard / normal / easy of an RM-Bench matrix, as upstream computes them: the means of the upper-right
    triangle (chosen less styled than rejected), of the diagonal and of the lower-left triangle; ``accuracy``
    is their mean, upstream's ``total_avg_acc``."""
    import numpy as np

    n = len(matrix)
    hard = float(np.sum(np.triu(matrix, 1)) / (n * (n - 1) / 2))
    normal = float(np.mean(np.diag(matrix)))
    easy = float(np.sum(np.tril(matrix, -1)) / (n * (n - 1) / 2))
    return {"accuracy": (hard + normal + easy) / 3, "hard": hard, "normal": normal, "easy": easy}


def _style_matrix(outcome: PromptOutcome, styles: Mapping[str, str | None], subset: str) -> np.ndarray:
    """One prompt's 3×3 hits: row = the chosen response's style, column = the rejected one's."""
    import numpy as np

    index: dict[str | None, int] = {s: i for i, s in enumerate(RMBENCH_STYLES)}
    matrix = np.zeros((len(RMBENCH_STYLES), len(RMBENCH_STYLES)))
    seen = set()
    for p in outcome.pairs:
        cell = (index.get(styles.get(p.chosen, "")), index.get(styles.get(p.rejected, "")))
        if None in cell or cell in seen:
            break
        seen.add(cell)
        matrix[cell] = pair_right(p)
    if len(seen) != matrix.size:
        raise InputError(
            f"prompt '{outcome.prompt_id}' of bench file '{subset}' is not an RM-Bench prompt (3 chosen and 3 "
            f"rejected responses, one of each style {', '.join(RMBENCH_STYLES)})",
            path="--metric rmbench",
            hint="import RM-Bench files with: cheems import rmbench IN -o OUT",
        )
    return matrix


@register_metric("rmbench", title="RM-Bench", help="RM-Bench hard/normal/easy")
def rmbench_subset(outcomes: Sequence[PromptOutcome], records: list[Record], name: str = "") -> dict[str, Any]:
    """The ``rmbench`` metric of one subset (THU-KEG/RM-Bench ``scripts/utils.py`` ``compute_accuracy``): per
    domain (main category) the 3×3 matrix M[i][j] = share of prompts whose chosen response in style i beats
    the rejected one in style j (:data:`~cheems.data.bench_layouts.RMBENCH_STYLES`) and its hard / normal /
    easy (:func:`_triangles`); the subset's numbers and matrix are the means over its domains."""
    import numpy as np

    styles = {r.id: {x.id: getattr(x, "style", None) for x in r.responses} for r in records}
    categories = {}
    for category, group in by_category(outcomes).items():
        matrix = np.mean([_style_matrix(o, styles.get(o.prompt_id, {}), name) for o in group], axis=0)
        categories[category] = {**_triangles(matrix), "matrix": matrix.tolist(), "n_prompts": len(group)}
    matrix = np.mean([c["matrix"] for c in categories.values()], axis=0)
    n_prompts = sum(c["n_prompts"] for c in categories.values())
    return {**_triangles(matrix), "matrix": matrix.tolist(), "n_prompts": n_prompts, "categories": categories}
