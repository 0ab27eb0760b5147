"""A model folder with a broken ``config.json`` is one line naming the file and the field, in every command that
loads a model (``score``, ``eval``, ``train``, ``categorize fit``): the check is ``backbones.check_config``, run by
``locate_model`` (issue 31)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cheems.errors import InputError
from cheems.models.backbones import locate_model
from helpers import assert_user_error, run_main, write_jsonl

tiny_models = pytest.importorskip("tiny_models")

DEMO = Path(__file__).resolve().parents[1] / "src" / "cheems" / "assets" / "demo"

# (name, how config.json is broken, the field the line names)
BROKEN = [
    ("no-model-type", lambda c: c.pop("model_type"), "model_type"),
    ("unknown-model-type", lambda c: c.update(model_type="qwen9"), "model_type"),
    ("hidden-size", lambda c: c.update(hidden_size=32), "hidden_size"),
    ("num-labels", lambda c: c.update(num_labels="one"), "num_labels"),
    ("float128", lambda c: c.update(torch_dtype="float128"), "torch_dtype"),
    ("vocab-zero", lambda c: c.update(vocab_size=0), "vocab_size"),
]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return tiny_models.build_tiny_bert(tmp_path_factory.mktemp("bert") / "model")


def broken_copy(model: Path, folder: Path, edit) -> Path:
    """A copy of ``model`` whose config.json ``edit`` changed (a str replaces the whole text)."""
    shutil.copytree(model, folder)
    config = folder / "config.json"
    if isinstance(edit, str):
        config.write_text(edit, encoding="utf-8")
    else:
        values = json.loads(config.read_text(encoding="utf-8"))
        edit(values)
        config.write_text(json.dumps(values), encoding="utf-8")
    return folder


@pytest.mark.parametrize("name, edit, field", BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_config_is_one_line_from_score(name, edit, field, tiny_bert, tmp_path, monkeypatch, capsys):
    model = broken_copy(tiny_bert, tmp_path / name, edit)
    with pytest.raises(InputError) as caught:
        locate_model(str(model))  # the library makes the check
    assert caught.value.field == field and caught.value.path == str(model / "config.json")
    out = tmp_path / "scores.jsonl"
    proc = run_main(
        "score",
        "-m",
        model,
        "--bench",
        DEMO / "open.jsonl",
        "--no-cache",
        "-o",
        out,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert_user_error(proc, str(model / "config.json"), f"field '{field}'")
    assert not out.exists()


def test_invalid_json_names_its_line(tiny_bert, tmp_path, monkeypatch, capsys):
    model = broken_copy(tiny_bert, tmp_path / "bad-json", '{\n  "model_type": "bert",\n  "hidden_size": 64,,\n}')
    proc = run_main(
        "eval", "-m", model, "--bench", DEMO / "open.jsonl", "--no-cache", monkeypatch=monkeypatch, capsys=capsys
    )
    assert_user_error(proc, f"{model / 'config.json'}:3", "not valid JSON")


def test_eval_train_and_categorize_fit_refuse_the_same_way(tiny_bert, tmp_path, monkeypatch, capsys):
    model = broken_copy(tiny_bert, tmp_path / "m", lambda c: c.update(hidden_size=32))
    where = str(model / "config.json")

    def refused(*args: object) -> str:
        return assert_user_error(run_main(*args, monkeypatch=monkeypatch, capsys=capsys), where, "field 'hidden_size'")

    assert "the weights' bert.embeddings.word_embeddings.weight has 64" in refused(
        "eval", "-m", model, "--bench", DEMO / "open.jsonl", "--no-cache"
    )
    data = write_jsonl(
        tmp_path / "train.jsonl",
        [
            {
                "id": "p",
                "input": "问题",
                "responses": [{"id": "a", "content": "好"}, {"id": "b", "content": "坏"}],
                "rank": [1, 2],
            }
        ],
    )
    refused("train", "-d", data, "-o", tmp_path / "rm", "-m", model, "--cpu")
    labels = [["数学", "代数"], ["写作", "诗歌"], ["代码", "调试"], ["数学", "代数"]]
    labelled = write_jsonl(
        tmp_path / "l.jsonl", [{"id": f"l{k}", "input": f"题目{k}", "category": labels[k % 4]} for k in range(16)]
    )
    refused("categorize", "fit", labelled, "-o", tmp_path / "clf", "--encoder", model, "--device", "cpu")
    assert not (tmp_path / "rm").exists() and not (tmp_path / "clf").exists()
