"""A local category classifier: sentence embeddings of the prompts plus logistic regression over taxonomy paths.

:func:`fit_classifier` trains on prompts that already carry a ``[main, sub]`` path of the taxonomy, holds out a
share of each path's prompts (seeded) and measures on them: accuracy on the path and on the main category,
the majority-class baseline, per-main-category accuracy and the main-category confusion matrix. The
classifier folder holds ``classifier.json`` (the encoder, the classes, the scores) and ``weights.npz``
(read without pickle). :func:`classify_records` assigns the most probable path to every record without a
category; one below ``min_confidence`` is left as it is, for people.

The embeddings are the similarity baseline's (:class:`cheems.models.similarity.SimilarityScorer`:
mean-pooled, unit length) from the default backbone (``m3e-small``) or any encoder named by ``encoder``.
"""

from __future__ import annotations

import io
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import Field, model_validator

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.llm.endpoint import AT_LEAST_ONE
from cheems.llm.sampling import read_prompts
from cheems.models.base import prompt_text
from cheems.models.registry import DTYPES
from cheems.prompts.taxonomy import SEPARATOR, load_taxonomy
from cheems.settings import Cli, Settings, invalid, one_of, rule

if TYPE_CHECKING:
    import numpy as np
    from rich.console import Console

META, WEIGHTS = "classifier.json", "weights.npz"
FORMAT = 1  # of the classifier folder
SHARE = rule(lambda x: 0 <= x < 1, "must be from 0 up to (not including) 1, got {value}")
PROBABILITY = rule(lambda x: 0 <= x <= 1, "must be from 0 to 1, got {value}")


class FitSettings(Settings):
    """What :func:`fit_classifier` needs."""

    encoder: str = Field("m3e-small", description="Sentence encoder: a backbone name, a model folder or a hub id.")
    held_out: Annotated[float, SHARE] = Field(
        0.2, description="Share of each category's labelled prompts held out (rounded down) to measure accuracy."
    )
    seed: int = Field(0, description="Seeds the held-out split.")
    taxonomy: Annotated[str | Path | None, Cli(path=True)] = Field(
        None, description="Taxonomy YAML (default: the one shipped with cheems, cheems/assets/taxonomy.yaml)."
    )
    max_length: Annotated[int, AT_LEAST_ONE] = Field(256, description="Most tokens of a prompt the encoder reads.")
    device: str | None = Field(None, description="cpu, cuda, cuda:1, ... (default: cuda if available).")
    dtype: Annotated[str, one_of(DTYPES, "dtype")] = Field(
        "auto",
        description="Precision of the encoder: auto (bf16 where the GPU or CPU has bf16 units, else fp32), fp32, bf16 "
        "or fp16; categorize apply embeds with the same.",
    )


class ClassifySettings(Settings):
    """What :func:`classify_records` needs besides the classifier."""

    min_confidence: Annotated[float, PROBABILITY] = Field(
        0.0, description="Leave a prompt uncategorised (for people) when the classifier's probability is below this."
    )
    overwrite: bool = False  # the option is categorize apply's (CategorizeSettings.overwrite)


def embed(texts: Sequence[str], encoder: str, max_length: int, device: str | None, dtype: str) -> np.ndarray:
    """Unit-length mean-pooled embeddings of ``texts`` (one row each) from ``encoder``, computed in ``dtype``."""
    from cheems.models.backbones import locate_model
    from cheems.models.similarity import SimilarityScorer

    scorer = SimilarityScorer(locate_model(encoder), max_length=max_length, device=device, dtype=dtype)
    return scorer.embed(texts).numpy()


# ------------------------------------------------------------------------------ fit


@dataclass
class FitReport:
    """What a fit measured on the held-out prompts (empty when none was held out)."""

    classes: list[str]
    train: int
    held_out: int
    unlabelled: int  # prompts without a category: not used
    repeated: int = 0  # prompts given again (the same normalised prompt): dropped before the split
    depth: int = 2  # 2: the classes are [main, sub] paths; 1: main categories (some label gives no subcategory)
    accuracy: float | None = None  # on the whole path
    main_accuracy: float | None = None  # on the main category
    majority_accuracy: float | None = None  # always the most common training path
    majority_main_accuracy: float | None = None
    per_main: dict[str, dict[str, float]] = field(default_factory=dict)  # main -> {n, accuracy, majority}
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)  # true main -> predicted main -> count

    def to_dict(self) -> dict[str, Any]:
        """JSON-able report."""
        return dict(self.__dict__)


@dataclass
class Labelled:
    """The labelled prompts a fit uses (:func:`labelled`)."""

    texts: list[str]
    labels: list[str]  # ``main/sub``, or ``main`` at depth 1
    unlabelled: int  # without a category: not used
    repeated: int  # a prompt given again (in any file, with any label): only its first labelled copy is used
    depth: int  # 2 when every label names a [main, sub] path, else 1 (every label cut to its main category)


def labelled(paths: Sequence[Path], settings: FitSettings) -> Labelled:
    """The labelled files' prompts, each once, and their labels at the depth every label has: a label that names a
    main category only makes the fit one of main categories (many labelled sources carry no subcategory).

    A prompt given again (the same prompt as ``dedup`` compares it) is used once, so that no held-out prompt is also
    a training prompt (two copies of one file would otherwise score 1.000). A category that is neither a main
    category nor a [main, sub] path of the taxonomy is an ``InputError`` naming the file and the record."""
    from cheems.prompts.minhash import exact_key  # numpy and datasketch: not at import

    taxonomy = load_taxonomy(settings.taxonomy)
    known = {*taxonomy.paths(), *((main.name,) for main in taxonomy.categories)}
    seen: set[bytes] = set()
    texts: list[str] = []
    paths_of: list[tuple[str, ...]] = []
    unlabelled = repeated = 0
    for path in paths:
        for record in read_prompts(path):
            if not record.category:
                unlabelled += 1
                continue
            if tuple(record.category) not in known:
                raise InputError(
                    f"record '{record.id}' has the category {record.category}, which is no [main, sub] path of the "
                    "taxonomy nor one of its main categories",
                    path=str(path),
                    field="category",
                    hint="map the labels into the taxonomy first (or pass the taxonomy they use with --taxonomy)",
                )
            key = exact_key(record)
            if key in seen:
                repeated += 1
                continue
            seen.add(key)
            texts.append(prompt_text(record.prompt))
            paths_of.append(tuple(record.category))
    depth = min((len(p) for p in paths_of), default=2)
    labels = [SEPARATOR.join(p[:depth]) for p in paths_of]
    if len(set(labels)) < 2:
        raise InputError(
            f"the labelled prompts name {len(set(labels))} category path(s); a classifier needs at least 2",
            path=str(paths[0]),
            hint="give prompts of several categories",
        )
    return Labelled(texts, labels, unlabelled, repeated, depth)


def split(labels: Sequence[str], share: float, seed: int) -> tuple[list[int], list[int]]:
    """(training, held-out) indices: ``share`` of each label's prompts held out (rounded down), chosen by ``seed``."""
    by_label: dict[str, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        by_label[label].append(index)
    rng = random.Random(seed)
    train, held = [], []
    for label in sorted(by_label):
        indices = by_label[label]
        rng.shuffle(indices)
        cut = int(len(indices) * share)
        held += indices[:cut]
        train += indices[cut:]
    return sorted(train), sorted(held)


def _measure(report: FitReport, truth: list[str], predicted: list[str], majority: str) -> None:
    """Fill the report's held-out scores."""
    main = [t.split(SEPARATOR)[0] for t in truth]
    main_predicted = [p.split(SEPARATOR)[0] for p in predicted]
    n = len(truth)
    report.accuracy = sum(t == p for t, p in zip(truth, predicted)) / n
    report.main_accuracy = sum(t == p for t, p in zip(main, main_predicted)) / n
    report.majority_accuracy = sum(t == majority for t in truth) / n
    majority_main = majority.split(SEPARATOR)[0]
    report.majority_main_accuracy = sum(t == majority_main for t in main) / n
    counts = Counter(main)
    for name in sorted(counts):
        rows = [i for i in range(n) if main[i] == name]
        report.per_main[name] = {
            "n": len(rows),
            "accuracy": sum(main_predicted[i] == name for i in rows) / len(rows),
            "majority": float(name == majority_main),
        }
        report.confusion[name] = dict(sorted(Counter(main_predicted[i] for i in rows).items()))


def fit_classifier(paths: Sequence[Path], output: Path, settings: FitSettings) -> FitReport:
    """Train the classifier on the labelled prompts of ``paths``, measure it on the held-out ones, save it in
    ``output`` (a folder)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from cheems.data.io import write_bytes, write_json
    from cheems.outputs import together

    data = labelled(paths, settings)
    texts, labels = data.texts, data.labels
    train, held = split(labels, settings.held_out, settings.seed)
    vectors = embed(texts, settings.encoder, settings.max_length, settings.device, settings.dtype)
    # Standardised features: unit-length embeddings have tiny coordinates, which the default L2 penalty would
    # flatten into near-uniform probabilities (useless for --min-confidence). The scaling is folded into the
    # linear weights below, so applying the classifier stays one matrix product.
    mean, scale = vectors[train].mean(axis=0), vectors[train].std(axis=0) + 1e-6
    model = LogisticRegression(max_iter=2000)
    model.fit((vectors[train] - mean) / scale, [labels[i] for i in train])
    classes = [str(c) for c in model.classes_]
    coef = model.coef_ / scale
    intercept = model.intercept_ - coef @ mean
    if len(classes) == 2:  # one row (the second class's log-odds): as two softmax rows, so one formula serves
        coef, intercept = np.vstack([np.zeros_like(coef), coef]), np.concatenate([[0.0], intercept])
    report = FitReport(classes, len(train), len(held), data.unlabelled, data.repeated, data.depth)
    if held:
        majority = Counter(labels[i] for i in train).most_common(1)[0][0]
        predicted = [classes[k] for k in probabilities(vectors[held], coef, intercept).argmax(axis=1)]
        _measure(report, [labels[i] for i in held], predicted, majority)
    weights = io.BytesIO()
    np.savez(weights, coef=coef, intercept=intercept)
    meta = {"format": FORMAT, "encoder": settings.encoder, "max_length": settings.max_length, "dtype": settings.dtype}
    meta["classes"], meta["depth"] = classes, data.depth
    with together():  # both files or neither
        write_bytes(output / WEIGHTS, weights.getvalue())
        write_json(output / META, {**meta, "report": report.to_dict()})
    return report


def probabilities(vectors: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """Softmax of the linear scores: one row of class probabilities per vector."""
    import numpy as np

    scores = vectors @ coef.T + intercept
    scores -= scores.max(axis=1, keepdims=True)
    exp = np.exp(scores)
    return cast("np.ndarray", exp / exp.sum(axis=1, keepdims=True))


# ------------------------------------------------------------------------------ apply


class ClassifierMeta(Settings):
    """``classifier.json``: how the prompts are embedded, the classes (``main/sub`` paths), the fit's report."""

    format: Annotated[int, rule(lambda n: n == FORMAT, f"is format {{value}}; this cheems reads format {FORMAT}")]
    encoder: str
    max_length: Annotated[int, AT_LEAST_ONE]
    dtype: Annotated[str, one_of(DTYPES, "dtype")] = "auto"  # absent in a folder written before it was recorded
    # 2: the classes are main/sub paths; 1: main categories (absent in a folder written before depth 1 was possible)
    depth: Annotated[int, rule(lambda d: d in (1, 2), "is {value}; a class is 1 (main) or 2 (main/sub) deep")] = 2
    classes: list[str] = Field(min_length=2)
    report: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _classes_at_depth(self) -> ClassifierMeta:
        for index, name in enumerate(self.classes):
            if name.count(SEPARATOR) != self.depth - 1:
                form = "main/sub path" if self.depth == 2 else "main category (no '/')"
                raise invalid(f"{name!r} is no {form}", "fit the classifier again", ("classes", index))
        return self


@dataclass
class Classifier:
    """A fitted classifier (:func:`load_classifier`)."""

    meta: ClassifierMeta
    coef: np.ndarray
    intercept: np.ndarray


def load_classifier(folder: Path) -> Classifier:
    """The classifier ``cheems categorize fit`` saved in ``folder``; a missing or broken one is one ``InputError``."""
    import numpy as np

    from cheems.yamlfile import load_yaml_model

    hint = "name a folder written by cheems categorize fit, or fit it again"
    if not folder.is_dir():
        raise InputError("no such classifier folder", path=str(folder), hint=hint)
    meta = load_yaml_model(folder / META, ClassifierMeta, "classifier")[0]
    try:
        with np.load(folder / WEIGHTS, allow_pickle=False) as data:
            coef, intercept = data["coef"], data["intercept"]
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"cannot read the classifier's weights: {e}", path=str(folder / WEIGHTS), hint=hint) from None
    k = len(meta.classes)
    numbers = coef.dtype.kind == intercept.dtype.kind == "f"
    if not numbers or coef.ndim != 2 or coef.shape[0] != k or intercept.shape != (k,):
        raise InputError(f"the weights do not fit the {k} classes of {META}", path=str(folder / WEIGHTS), hint=hint)
    for name, values in (("coef", coef), ("intercept", intercept)):
        if not np.isfinite(values).all():  # NaN or inf wins every argmax: each prompt would get one class
            bad = int((~np.isfinite(values)).sum())
            raise InputError(f"{bad} of the {name} weights are NaN or infinite", path=str(folder / WEIGHTS), hint=hint)
    return Classifier(meta, coef, intercept)


@dataclass
class ClassifyStats:
    """What a classifier run did. Counts are of records."""

    records: int = 0
    assigned: int = 0
    kept: int = 0
    uncertain: int = 0  # below min_confidence: left for people
    by_category: Counter[str] = field(default_factory=Counter)  # main category -> records assigned to it

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary."""
        return {
            "records": self.records,
            "assigned": self.assigned,
            "kept": self.kept,
            "uncertain": self.uncertain,
            "assigned_by_main_category": dict(sorted(self.by_category.items())),
        }


def classify_records(
    records: Sequence[Record], classifier: Classifier, settings: ClassifySettings
) -> tuple[list[Record], ClassifyStats]:
    """Every record, in order, with the classifier's path where it has none (or with ``overwrite``) and the
    probability is at least ``min_confidence``; the run's counts."""
    stats = ClassifyStats(records=len(records))
    asked = [i for i, r in enumerate(records) if settings.overwrite or not r.category]
    stats.kept = len(records) - len(asked)
    out = list(records)
    if asked:
        meta = classifier.meta
        vectors = embed(
            [prompt_text(records[i].prompt) for i in asked], meta.encoder, meta.max_length, None, meta.dtype
        )
        if vectors.shape[1] != classifier.coef.shape[1]:
            raise InputError(
                f"the encoder {meta.encoder} gives {vectors.shape[1]} numbers a prompt, the classifier was fitted "
                f"on {classifier.coef.shape[1]}",
                path="--classifier",
                hint="fit the classifier again with this encoder",
            )
        probs = probabilities(vectors, classifier.coef, classifier.intercept)
        for index, row in zip(asked, probs):
            best = int(row.argmax())
            if row[best] < settings.min_confidence:
                stats.uncertain += 1
                continue
            path = meta.classes[best].split(SEPARATOR)
            stats.assigned += 1
            stats.by_category[path[0]] += 1
            out[index] = records[index].model_copy(update={"category": path})
    return out, stats


# ------------------------------------------------------------------------------ ``cheems categorize`` as one call each


def fit_files(paths: Sequence[Path], output: Path, settings: FitSettings) -> FitReport:
    """:func:`fit_classifier` after checking that the classifier folder replaces none of the labelled files."""
    from cheems.outputs import claim_outputs

    taxonomy = Path(settings.taxonomy) if settings.taxonomy is not None else None
    inputs = [*(("LABELLED", p) for p in paths), ("--taxonomy", taxonomy)]
    claim_outputs(inputs=inputs, folders=[("--output", output, (META, WEIGHTS))])
    return fit_classifier(paths, output, settings)


def classify_files(
    source: Path, output: Path, folder: Path, settings: ClassifySettings, stats_json: Path | None = None
) -> ClassifyStats:
    """Categorise the prompts of ``source`` with the classifier in ``folder`` (:func:`classify_records`) into
    ``output``, the counts to ``stats_json``; neither may replace an input."""
    from cheems.data.io import write_json, write_records
    from cheems.outputs import claim_outputs, together

    claim_outputs(
        inputs=[("PROMPTS", source), ("--classifier", folder)],
        files=[("--output", output), ("--stats-json", stats_json)],
    )
    classifier = load_classifier(folder)
    records, stats = classify_records(read_prompts(source), classifier, settings)
    with together():
        write_records(output, records)
        if stats_json is not None:
            write_json(stats_json, stats.to_dict())
    return stats


def print_fit(report: FitReport, output: Path, console: Console) -> None:
    """The fit's held-out scores beside the majority baseline, per main category, and the confusion matrix."""
    from rich.table import Table

    from cheems.llm.runs import summary_table

    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    rows = [
        ("labelled prompts used (train / held out)", f"{report.train} / {report.held_out}"),
        ("without a category (not used)", str(report.unlabelled)),
        ("given again (used once, before the split)", str(report.repeated)),
        ("category paths" if report.depth == 2 else "main categories", str(len(report.classes))),
        (
            "held-out accuracy, path (majority baseline)",
            f"{share(report.accuracy)} ({share(report.majority_accuracy)})",
        ),
        (
            "held-out accuracy, main (majority baseline)",
            f"{share(report.main_accuracy)} ({share(report.majority_main_accuracy)})",
        ),
    ]
    console.print(summary_table("categorize fit", rows))
    if report.depth == 1:
        console.print(
            "[yellow]fitted on main categories[/]: some labels give no subcategory, so every label was cut "
            "to its main category and apply assigns main categories only"
        )
    if report.per_main:
        mains = list(report.per_main)
        table = Table(title="held out: true main category (rows) × predicted (columns)")
        table.add_column("main")
        table.add_column("n", justify="right")
        table.add_column("accuracy", justify="right")
        table.add_column("majority", justify="right")
        predicted = sorted({p for row in report.confusion.values() for p in row} | set(mains))
        for name in predicted:
            table.add_column(name, justify="right")
        for name in mains:
            scores = report.per_main[name]
            counts = report.confusion[name]
            cells = [str(counts.get(p, 0)) for p in predicted]
            table.add_row(name, str(int(scores["n"])), share(scores["accuracy"]), share(scores["majority"]), *cells)
        console.print(table)
    else:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(
                ("nothing was held out", "yellow"), " (--held-out 0, or too few prompts per category): no accuracy"
            )
        )
    console.print(f"wrote {output}")


def print_classify_run(stats: ClassifyStats, output: Path, console: Console) -> None:
    """A classifier run as a table: assigned (per main category), kept, uncertain."""
    from cheems.llm.runs import summary_table

    rows = [
        ("records", str(stats.records)),
        ("assigned", str(stats.assigned)),
        *((f"  {main}", str(n)) for main, n in sorted(stats.by_category.items())),
        ("kept (had a category)", str(stats.kept)),
        ("uncertain (below --min-confidence)", str(stats.uncertain)),
    ]
    console.print(summary_table("categorize: classifier", rows))
    console.print(f"wrote {output}")
    if stats.uncertain:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(
                (f"{stats.uncertain} record(s) left uncategorised", "yellow"), " for people (below --min-confidence)"
            )
        )
