"""``cheems categorize fit`` / ``apply --classifier``: a local classifier on a tiny random BERT encoder (m3e-small's
tokenizer, tests/tiny_models.py), so a fit takes a second; the scores are checked for consistency, not for quality."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.prompts.classifier import (
    META,
    WEIGHTS,
    ClassifySettings,
    FitSettings,
    classify_records,
    embed,
    fit_classifier,
    load_classifier,
    probabilities,
)
from helpers import assert_user_error, run_main, write_jsonl
from tiny_models import build_tiny_bert

LABELS = [("数学", "代数")] * 10 + [("写作", "诗歌")] * 10 + [("代码", "调试")] * 5


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> str:
    return str(build_tiny_bert(tmp_path_factory.mktemp("enc") / "tiny-bert"))


def labelled_file(path: Path) -> Path:
    rows = [
        {"id": f"l{k}", "input": f"{sub}题目{k}：{main}", "category": [main, sub]}
        for k, (main, sub) in enumerate(LABELS)
    ]
    rows += [{"id": "u1", "input": "没有类别的提示"}, {"id": "u2", "input": "另一个"}]
    return write_jsonl(path, rows)


def fit_settings(encoder: str, **kw) -> FitSettings:
    return FitSettings(**{"encoder": encoder, "device": "cpu", **kw})


def test_fit_holds_out_each_category_and_scores_against_the_majority(encoder, tmp_path):
    source = labelled_file(tmp_path / "labelled.jsonl")
    report = fit_classifier([source], tmp_path / "clf", fit_settings(encoder))
    assert (report.train, report.held_out, report.unlabelled) == (20, 5, 2)  # 20% of 10, 10 and 5 held out
    assert report.classes == ["代码/调试", "写作/诗歌", "数学/代数"]
    # the majority baseline: the most common training path (a tie of 8 and 8: the first in the file) on 2+2+1
    assert report.majority_accuracy == report.majority_main_accuracy == 2 / 5
    assert {m: s["n"] for m, s in report.per_main.items()} == {"代码": 1, "写作": 2, "数学": 2}
    assert {m: s["majority"] for m, s in report.per_main.items()} == {"代码": 0.0, "写作": 0.0, "数学": 1.0}
    diagonal = sum(row.get(main, 0) for main, row in report.confusion.items())
    assert sum(sum(row.values()) for row in report.confusion.values()) == 5
    assert report.main_accuracy == diagonal / 5 and report.accuracy == diagonal / 5  # one sub per main here
    for main, scores in report.per_main.items():
        assert scores["accuracy"] == report.confusion[main].get(main, 0) / scores["n"]
    saved = json.loads((tmp_path / "clf" / META).read_text(encoding="utf-8"))
    assert saved["report"] == json.loads(json.dumps(report.to_dict())) and saved["encoder"] == encoder
    # seeded: the same split and the same classifier again
    again = fit_classifier([source], tmp_path / "clf2", fit_settings(encoder))
    assert again.to_dict() == report.to_dict()
    assert (tmp_path / "clf" / WEIGHTS).read_bytes() == (tmp_path / "clf2" / WEIGHTS).read_bytes()
    nothing = fit_classifier([source], tmp_path / "clf3", fit_settings(encoder, held_out=0.0))
    assert (nothing.train, nothing.held_out, nothing.accuracy, nothing.confusion) == (25, 0, None, {})


def prompts(n: int) -> list[Record]:
    rows = [{"id": f"p{k}", "input": f"新的题目{k}", "responses": [{"id": "-", "content": ""}]} for k in range(n)]
    return [Record.model_validate(r).model_copy(update={"responses": []}) for r in rows]


def test_apply_assigns_the_most_probable_path_and_leaves_uncertain_ones_for_people(encoder, tmp_path):
    fit_classifier([labelled_file(tmp_path / "l.jsonl")], tmp_path / "clf", fit_settings(encoder))
    classifier = load_classifier(tmp_path / "clf")
    kept = {"id": "k", "input": "x", "category": ["知识"], "responses": [{"id": "r", "content": "y"}]}
    records = [*prompts(6), Record.model_validate(kept)]
    vectors = embed([r.input for r in records[:6]], encoder, 256, "cpu", classifier.meta.dtype)
    probs = probabilities(vectors, classifier.coef, classifier.intercept)
    best = [classifier.meta.classes[row.argmax()].split("/") for row in probs]
    out, stats = classify_records(records, classifier, ClassifySettings())
    assert [r.category for r in out] == [*best, ["知识"]]
    assert (stats.assigned, stats.kept, stats.uncertain) == (6, 1, 0)
    assert stats.by_category == Counter(path[0] for path in best)
    # a threshold between the least and the most confident prompt: those below it keep no category
    confidence = probs.max(axis=1)
    threshold = float((confidence.min() + confidence.max()) / 2)
    out, stats = classify_records(records, classifier, ClassifySettings(min_confidence=threshold))
    assert [r.category for r in out[:6]] == [path if c >= threshold else [] for path, c in zip(best, confidence)]
    assert stats.uncertain == sum(confidence < threshold) > 0 and stats.assigned == 6 - stats.uncertain
    out, stats = classify_records(records, classifier, ClassifySettings(overwrite=True))
    assert stats.kept == 0 and stats.assigned == 7


def test_labelled_data_outside_the_taxonomy_or_of_one_category_is_refused(encoder, tmp_path):
    outside = write_jsonl(tmp_path / "o.jsonl", [{"id": "a", "input": "x", "category": ["数学", "奥数"]}])
    with pytest.raises(InputError, match=r"record 'a' has the category \['数学', '奥数'\], which is no"):
        fit_classifier([outside], tmp_path / "clf", fit_settings(encoder))
    one = write_jsonl(
        tmp_path / "one.jsonl", [{"id": f"a{k}", "input": "x", "category": ["数学", "代数"]} for k in "12"]
    )
    with pytest.raises(InputError, match=r"name 1 category path\(s\); a classifier needs at least 2"):
        fit_classifier([one], tmp_path / "clf", fit_settings(encoder))
    assert not (tmp_path / "clf").exists()


def test_cli_fit_then_apply_and_every_bad_input_is_one_line(encoder, tmp_path, monkeypatch, capsys):
    source = labelled_file(tmp_path / "labelled.jsonl")
    clf = tmp_path / "clf"
    fit = ["categorize", "fit", source, "-o", clf, "--encoder", encoder, "--device", "cpu", "--dtype", "fp32"]
    proc = run_main(*fit, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((clf / META).read_text())["dtype"] == "fp32"  # apply embeds in the fit's precision
    words = " ".join(proc.stdout.split())
    assert "held-out accuracy, main (majority baseline)" in words and "true main category (rows)" in words
    src = write_jsonl(
        tmp_path / "p.jsonl", [{"id": "a", "input": "新题"}, {"id": "b", "input": "x", "category": "数学"}]
    )
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    apply = ["categorize", "apply", src, "-o", out, "--classifier", clf]
    proc = run_main(*apply, "--stats-json", stats, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert "/".join(rows[0]["category"]) in json.loads((clf / META).read_text())["classes"]
    assert rows[1]["category"] == ["数学"]
    assert json.loads(stats.read_text()) == {
        "records": 2,
        "assigned": 1,
        "kept": 1,
        "uncertain": 0,
        "assigned_by_main_category": {rows[0]["category"][0]: 1},
    }

    def refused(*args: object) -> str:
        return assert_user_error(run_main(*args, monkeypatch=monkeypatch, capsys=capsys))

    before = out.read_bytes()
    assert "exactly one of --judge-model" in refused(
        *apply, "--judge-model", "m", "--base-url", "http://127.0.0.1:9/v1"
    )
    assert "exactly one of --judge-model" in refused(*apply[:5])
    assert "--base-url is for --judge-model" in refused(*apply, "--base-url", "http://127.0.0.1:9/v1")
    llm = [*apply[:5], "--judge-model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    assert "--min-confidence is for --classifier" in refused(*llm, "--min-confidence", "0.5")
    assert "--min-confidence" in refused(*apply, "--min-confidence", "1.5")
    assert "no such classifier folder" in refused(*apply[:6], tmp_path / "none")
    meta = json.loads((clf / META).read_text())
    (clf / META).write_text(json.dumps({**meta, "format": 2}), encoding="utf-8")
    assert "classifier.json" in refused(*apply) and "format 2" in refused(*apply)
    (clf / META).write_text(json.dumps(meta), encoding="utf-8")
    (clf / WEIGHTS).write_bytes(b"not a zip")
    assert "cannot read the classifier's weights" in refused(*apply)
    assert out.read_bytes() == before
    assert "--held-out" in refused(*fit[:4], tmp_path / "clf4", "--held-out", "1")
    assert "--output" in refused(*fit[:4], source)  # never replace the labelled file
    outside = write_jsonl(tmp_path / "o.jsonl", [{"id": "a", "input": "x", "category": ["数学", "奥数"]}])
    assert "which is no [main, sub] path" in refused("categorize", "fit", outside, "-o", tmp_path / "c5")
    assert not (tmp_path / "clf4").exists() and not (tmp_path / "c5").exists()


# ------------------------------------------------------------------------------ issue 31


def test_a_labelled_file_given_twice_is_used_once_so_held_out_prompts_are_never_training_prompts(encoder, tmp_path):
    source = labelled_file(tmp_path / "labelled.jsonl")
    once = fit_classifier([source], tmp_path / "once", fit_settings(encoder))
    twice = fit_classifier([source, source], tmp_path / "twice", fit_settings(encoder))
    assert (twice.train, twice.held_out, twice.repeated) == (20, 5, 25)  # not 40 / 10, each prompt once
    assert twice.accuracy == once.accuracy and twice.confusion == once.confusion
    # the same prompt under another spelling (full width, spaces) is the same prompt, as dedup compares them
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    respelled = write_jsonl(tmp_path / "respelled.jsonl", [{**r, "input": f" {r['input']}！"} for r in rows])
    assert fit_classifier([source, respelled], tmp_path / "again", fit_settings(encoder)).repeated == 25


def test_labels_that_give_the_main_category_only_fit_main_categories(encoder, tmp_path, monkeypatch, capsys):
    rows = [{"id": f"m{k}", "input": f"题目{k}：{main}", "category": [main]} for k, (main, _) in enumerate(LABELS)]
    rows[0]["category"] = list(LABELS[0])  # one full path among main-only labels: every label is cut to its main
    source = write_jsonl(tmp_path / "mains.jsonl", rows)
    report = fit_classifier([source], tmp_path / "clf", fit_settings(encoder))
    assert report.depth == 1 and report.classes == ["代码", "写作", "数学"]
    assert report.accuracy == report.main_accuracy
    assert json.loads((tmp_path / "clf" / META).read_text(encoding="utf-8"))["depth"] == 1
    records, stats = classify_records(prompts(4), load_classifier(tmp_path / "clf"), ClassifySettings())
    assert stats.assigned == 4 and all(len(r.category) == 1 and r.category[0] in report.classes for r in records)
    fit = ["categorize", "fit", source, "-o", tmp_path / "c2", "--encoder", encoder, "--device", "cpu"]
    proc = run_main(*fit, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert "fitted on main categories" in " ".join(proc.stdout.split())
    unknown = write_jsonl(tmp_path / "u.jsonl", [{"id": "a", "input": "x", "category": ["奥数"]}])
    with pytest.raises(InputError, match="nor one of its main categories"):
        fit_classifier([unknown], tmp_path / "c3", fit_settings(encoder))


@pytest.mark.parametrize("name", ["coef", "intercept"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_classifier_with_weights_that_are_not_finite_is_refused_at_load(encoder, tmp_path, name, value):
    import numpy as np

    fit_classifier([labelled_file(tmp_path / "l.jsonl")], tmp_path / "clf", fit_settings(encoder))
    with np.load(tmp_path / "clf" / WEIGHTS) as data:
        weights = {k: data[k].copy() for k in ("coef", "intercept")}
    weights[name].flat[0] = value
    np.savez(tmp_path / "clf" / WEIGHTS, **weights)
    with pytest.raises(InputError, match=f"1 of the {name} weights are NaN or infinite") as e:
        load_classifier(tmp_path / "clf")
    assert e.value.path == str(tmp_path / "clf" / WEIGHTS)
