"""Reward-model training end to end on tiny models: learning, truncation, checkpoints, resume,
the ``cheems eval`` round trip, the causal path and a 2-process CPU run."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from safetensors.torch import load_file

from cheems.data.stream import read_records
from cheems.models.backbones import locate_model
from cheems.models.encoding import RewardEncoder
from cheems.ranking.pairs import training_pairs
from cheems.train.checkpoint import latest_checkpoint
from cheems.train.config import load_config
from cheems.train.data import build_training_set
from cheems.train.forward import score_in_memory
from cheems.train.trainer import train_reward_model
from helpers import assert_user_error, run_main

tiny_models = pytest.importorskip("tiny_models")
REPO = Path(__file__).resolve().parents[1]
GOOD = ["这个回答准确清楚，很好。", "回答正确，解释详细，非常好。", "很好，条理清楚。"]
BAD = ["这个回答错误很多，很差。", "答非所问，很差。", "内容混乱，错误，差。"]


def write_records(path: Path, n_prompts: int, seed: int = 0, long_response: str | None = None) -> Path:
    """Prompts with 2-4 responses: good ones rank above bad ones (one tie among the bad)."""
    rows = []
    for i in range(n_prompts):
        k = 2 + i % 3
        responses, rank = [], {}
        for j in range(k):
            text = GOOD[(i + j) % 3] if j == 0 else BAD[(i + j + seed) % 3] + "。" * j
            responses.append({"id": f"r{j}", "content": long_response if (long_response and j == 1) else text})
            rank[f"r{j}"] = 1 if j == 0 else 2 + (j > 2)
        rows.append(
            {
                "id": f"s{seed}-p{i}",
                "input": f"第{i}个问题：请回答。",
                "category": ["理解" if i % 2 else "知识"],
                "responses": responses,
                "rank": rank,
            }
        )
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# tiny models: one torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return tiny_models.build_tiny_bert(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    return tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_records(tmp_path_factory.mktemp("data") / "train.jsonl", 10)


def config(model: Path, data: Path, output: Path, **kw):
    base = {
        "model": str(model),
        "data": [str(data)],
        "output": str(output),
        "epochs": 1,
        "batch_size": 6,
        "lr": 1e-3,
        "progress": False,
        "bf16": False,
        "cpu": True,
    }
    return load_config(None, {**base, **kw})


def pair_loss(model, encoder, records) -> float:
    scores = score_in_memory(model, encoder, records)
    losses = [
        -F.logsigmoid(torch.tensor(scores[r.id, w] - scores[r.id, l])) for r in records for w, l in training_pairs(r)
    ]
    return float(torch.stack(losses).mean())


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def log_rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "train_log.csv").open(encoding="utf-8") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


# ---------------------------------------------------------------- learning


def test_loss_decreases_on_tiny_bert(tiny_bert, data, tmp_path):
    records = read_records(data).records
    encoder = RewardEncoder(locate_model(str(tiny_bert)), 512)
    from cheems.train.model import load_reward_model

    before_model, _ = load_reward_model(tiny_bert)
    before = pair_loss(before_model, encoder, records)
    result = train_reward_model(config(tiny_bert, data, tmp_path / "rm", epochs=3, warmup_ratio=0.0, lr=5e-3))
    after = pair_loss(result.model, encoder, records)
    assert after < before - 0.2, (before, after)
    assert len(result.history) == result.global_step > 0
    first, last = result.history[0], result.history[-1]
    assert last["loss"] < first["loss"]
    plans = result.epoch_plans
    assert len(plans) == 3 and all(p["forward_passes"] == result.data.responses for p in plans)
    assert all(p["pairs_covered"] <= p["pairs_total"] == result.data.pairs for p in plans)
    metrics = json.loads((tmp_path / "rm" / "metrics.json").read_text())
    assert metrics["global_step"] == result.global_step and metrics["data"]["pairs"] == result.data.pairs
    saved = yaml.safe_load((tmp_path / "rm" / "train_config.yaml").read_text())
    assert saved["epochs"] == 3 and saved["data"] == [str(data)]


# ---------------------------------------------------------------- truncation


def test_truncation_policies_count_and_cut(tiny_bert, tmp_path):
    path = write_records(tmp_path / "long.jsonl", 4, long_response="很长的回答。" * 40)
    records = read_records(path).records
    encoder = RewardEncoder(locate_model(str(tiny_bert)), 32)
    keep = build_training_set(records, encoder, "left_prompt")
    drop = build_training_set(records, encoder, "drop")
    full = build_training_set(records, RewardEncoder(locate_model(str(tiny_bert)), 512), "left_prompt")
    assert full.summary.truncated == full.summary.dropped == 0
    # every record has one over-long response (r1)
    assert keep.summary.truncated == 4 and keep.summary.response_truncated == 4 and keep.summary.dropped == 0
    assert keep.summary.pairs == full.summary.pairs
    assert all(len(ids) <= 32 for ids, _ in keep.features.values())
    assert drop.summary.dropped == 4 and drop.summary.truncated == 0
    assert drop.summary.dropped_pairs == full.summary.pairs - drop.summary.pairs > 0
    assert all((p, "r1") not in drop.features for p in range(4))
    # a short response keeps all its tokens: the prompt is cut first
    tok = encoder.tokenizer
    short = build_training_set(
        read_records(write_records(tmp_path / "s.jsonl", 2)).records,
        RewardEncoder(locate_model(str(tiny_bert)), 20),
        "left_prompt",
    )
    ids, _ = short.features[0, "r0"]
    response = tok(GOOD[0], add_special_tokens=False)["input_ids"]
    assert short.summary.truncated > 0 and ids[-len(response) - 1 : -1] == response


def test_full_length_matches_the_untruncated_encoding(tiny_bert, tiny_qwen):
    items = [
        ("问题一", "回答" * 5),
        (
            [
                {"role": "user", "content": "你好"},
                {"role": "assistant", "content": "嗨"},
                {"role": "user", "content": "再见"},
            ],
            "好的，再见。" * 3,
        ),
    ]
    for model in (tiny_bert, tiny_qwen):
        wide = RewardEncoder(locate_model(str(model)), 500).encode(items)
        assert [len(e.features[0]) for e in wide] == [e.full_length for e in wide]
        narrow = RewardEncoder(locate_model(str(model)), 12).encode(items)
        assert [e.full_length for e in narrow] == [e.full_length for e in wide]
        assert all(len(e.features[0]) <= 12 for e in narrow)


# ---------------------------------------------------------------- checkpoints and the eval round trip


def test_saved_model_scores_the_same_in_cheems_eval(tiny_bert, data, tmp_path, cheems_cli):
    from cheems.evaluate import evaluate_scores, load_bench
    from cheems.models import load_scorer, score_records
    from cheems.runtime import compute_dtype

    bench = write_records(tmp_path / "open.jsonl", 6, seed=1)  # the training prompts: an overlap, allowed here
    result = train_reward_model(
        config(
            tiny_bert, data, tmp_path / "rm", eval_bench=[str(bench)], allow_overlap=True, save_every=2, max_length=512
        )
    )
    out = tmp_path / "rm"
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert latest_checkpoint(out) is not None
    run = cheems_cli("eval", "--bench", bench, "--model", out, "--no-cache", "--output-json", tmp_path / "e.json")
    assert run.returncode == 0, run.stderr
    # cheems eval scores with load_scorer + score_records (default dtype: bf16 autocast only where the
    # CPU has bf16 units); the same calls here give the scores behind its report
    tol = 1e-5 if compute_dtype("cpu", "auto") is None else 3e-2
    records = read_records(bench).records
    theirs = score_records(records, load_scorer(str(out)), progress=False)
    ours = score_in_memory(result.model, RewardEncoder(locate_model(str(out)), 512), records)
    assert theirs.keys() == ours.keys()
    for key in ours:
        assert math.isclose(ours[key], theirs[key], abs_tol=tol), (key, ours[key], theirs[key])
    # evaluation during training (in memory) = cheems eval on the saved folder
    final = json.loads((out / "metrics.json").read_text())["final_eval"]
    report = json.loads((tmp_path / "e.json").read_text())
    assert final["step"] == result.global_step
    assert report["overall"] == pytest.approx(evaluate_scores(load_bench([bench]), theirs).overall, abs=1e-12)
    if tol == 1e-5:
        assert final["overall"] == pytest.approx(report["overall"], abs=1e-9)
        for name, sub in report["subsets"].items():
            for key in ("accuracy", "exact_match", "n_prompts", "n_pairs", "categories"):
                assert final["subsets"][name][key] == sub[key]


def test_resume_from_mid_run_checkpoint_gives_the_same_weights(tiny_bert, data, tmp_path):
    # dropout is on (tiny BERT: 0.1), two micro-batches per step: RNG and position must be restored
    # 7 batches of 4 per epoch: windows of 2, 2, 2, 1 micro-batches; checkpoints at steps 3 and 6
    data = write_records(tmp_path / "train.jsonl", 9)
    kw = {"epochs": 2, "batch_size": 4, "grad_accum": 2, "save_every": 3, "keep_checkpoints": 0}
    full = train_reward_model(config(tiny_bert, data, tmp_path / "a", **kw))
    assert full.global_step == 8
    checkpoints = sorted((tmp_path / "a" / "checkpoints").iterdir())
    states = [json.loads((c / "trainer_state.json").read_text()) for c in checkpoints]
    assert [{k: v for k, v in s.items() if k != "data"} for s in states] == [
        {"global_step": 3, "epoch": 0, "micro": 6},
        {"global_step": 6, "epoch": 1, "micro": 4},
    ]
    chosen = checkpoints[0]  # mid-epoch, and the resumed run crosses an epoch boundary
    (tmp_path / "b.partial" / "checkpoints").mkdir(parents=True)  # as a run cut short after step 3 leaves it
    shutil.copytree(chosen, tmp_path / "b.partial" / "checkpoints" / chosen.name)
    resumed = train_reward_model(config(tiny_bert, data, tmp_path / "b", **kw, resume=True))
    assert resumed.global_step == full.global_step
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6, rtol=0), name
    step = json.loads((chosen / "trainer_state.json").read_text())["global_step"]
    assert [r for r in log_rows(tmp_path / "a") if int(r["step"]) > step] == log_rows(tmp_path / "b")


def test_checkpoints_of_an_earlier_run_are_not_overwritten_without_resume(tiny_bert, data, tmp_path):
    from cheems.errors import InputError

    old = tmp_path / "rm.partial" / "checkpoints" / "step-0000003"
    old.mkdir(parents=True)
    (old / "trainer_state.json").write_text('{"global_step": 3, "epoch": 0, "micro": 3}')
    with pytest.raises(InputError, match="--resume"):
        train_reward_model(config(tiny_bert, data, tmp_path / "rm"))
    assert (old / "trainer_state.json").exists()


def test_causal_lm_path_trains_and_scores_as_the_scorer(tiny_qwen, data, tmp_path):
    from cheems.models import load_scorer

    result = train_reward_model(config(tiny_qwen, data, tmp_path / "rm", max_length=128))
    assert result.model.pooling == "last" and result.global_step > 0
    saved = json.loads((tmp_path / "rm" / "config.json").read_text())
    assert saved["architectures"] == ["Qwen2ForSequenceClassification"] and saved["pad_token_id"] is not None
    records = read_records(data).records
    ours = score_in_memory(result.model, RewardEncoder(locate_model(str(tmp_path / "rm")), 128), records)
    scorer = load_scorer(str(tmp_path / "rm"), max_length=128, dtype="fp32", device="cpu")
    keys = list(ours)
    theirs = scorer.score(
        [
            (next(r for r in records if r.id == p).input, next(r for r in records if r.id == p).response(rid).content)
            for p, rid in keys
        ]
    )
    for key, value in zip(keys, theirs):
        assert math.isclose(ours[key], value, abs_tol=1e-5), (key, ours[key], value)


def test_cheems_train_trains_a_released_reward_model_on_from_its_head(
    data, tmp_path, qwen2_tokenizer_dir, monkeypatch, capsys
):
    from cheems.models import load_scorer

    released = tiny_models.build_tiny_qwen2(tmp_path / "released", qwen2_tokenizer_dir, head=tiny_models.RELEASED_HEAD)
    out = tmp_path / "rm"
    args = train_args(released, data, out, "--lr", "1e-7", "--max-length", "128")  # steps too small to move far
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert f"keeping the trained reward head of {released} (score.weight)" in proc.stderr
    assert "new reward head" not in proc.stderr
    # five Adam steps from the saved head: it moved, by about lr per step (a new head would be far off)
    moved = (weights(out)["score.weight"] - tiny_models.RELEASED_HEAD).abs().max()
    assert 0 < moved < 1e-5
    # and the rewards are (nearly) the released model's, at its scale (a new head's are near 0)
    items = [(r.input, x.content) for r in read_records(data).records for x in r.responses]
    before, after = (
        load_scorer(str(m), max_length=128, dtype="fp32", device="cpu").score(items) for m in (released, out)
    )
    assert max(map(abs, before)) > 0.5 and after == pytest.approx(before, abs=0.1)


def test_cheems_train_refuses_a_classifier_head_in_one_line(data, tmp_path, qwen2_tokenizer_dir, monkeypatch, capsys):
    head = torch.cat([tiny_models.RELEASED_HEAD, -tiny_models.RELEASED_HEAD])
    two = tiny_models.build_tiny_qwen2(tmp_path / "two-labels", qwen2_tokenizer_dir, head=head)
    proc = run_main(*train_args(two, data, tmp_path / "rm"), monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"model '{two}' has num_labels=2; a reward model gives one score", "num_labels=1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two-labels"]


# ---------------------------------------------------------------- the output folder: never half-written, never lost


def train_args(model: Path, data: Path, output: Path, *more: object) -> tuple[object, ...]:
    """``cheems train`` with the settings of :func:`config`."""
    fixed = ("--epochs", "1", "--batch-size", "6", "--lr", "1e-3", "--no-bf16", "--cpu", "--no-progress")
    return ("train", "--model", model, "--data", data, "-o", output, *fixed, *more)


def test_a_finished_model_is_replaced_only_with_overwrite_and_all_at_once(tiny_bert, data, tmp_path):
    from cheems.errors import InputError

    out = tmp_path / "rm"
    train_reward_model(config(tiny_bert, data, out))
    first = weights(out)
    with pytest.raises(InputError, match="holds a finished model.*--overwrite"):
        train_reward_model(config(tiny_bert, data, out, lr=1e-2))
    assert all(torch.equal(first[k], v) for k, v in weights(out).items())
    train_reward_model(config(tiny_bert, data, out, lr=1e-2, overwrite=True))
    assert any(not torch.equal(first[k], v) for k, v in weights(out).items())
    assert [p.name for p in tmp_path.iterdir()] == ["rm"]  # no work folder, no old model left beside it
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "a.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="holds no model"):
        train_reward_model(config(tiny_bert, data, mine, overwrite=True))
    assert [p.name for p in mine.iterdir()] == ["a.txt"]


def test_sigkill_mid_run_leaves_no_output_and_resume_finishes_it(tiny_bert, data, tmp_path, cheems_cli):
    out = tmp_path / "rm"
    args = [*train_args(tiny_bert, data, out, "--save-every", "2"), "--epochs", "8"]  # the last --epochs counts
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "cheems", *map(str, args)], env=env, stderr=subprocess.PIPE)
    marker = tmp_path / "rm.partial" / "checkpoints" / "step-0000002" / "trainer_state.json"
    while not marker.exists() and proc.poll() is None:  # wait for the first complete checkpoint, then crash
        time.sleep(0.05)
    proc.kill()
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()  # nothing named --output until the model is whole
    done = cheems_cli(*args, "--resume")  # the crash was a real process; the resume needs none
    assert done.returncode == 0, done.stderr
    assert "resumed from" in done.stderr and (out / "model.safetensors").is_file()
    assert not (tmp_path / "rm.partial").exists()


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs: room for a run's config and logs, none for the tiny model (5.8 MB) or a checkpoint."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.parametrize(("save_every", "what"), [("0", "the model"), ("1", "the checkpoint at step 1")])
def test_a_full_disk_while_saving_is_one_line_and_nothing_looks_finished(
    tiny_bert, data, small_disk, monkeypatch, capsys, save_every, what
):
    proc = run_main(
        *train_args(tiny_bert, data, small_disk / "rm", "--save-every", save_every),
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    line = assert_user_error(proc, f"cannot save {what}: no space left on the device", "--resume")
    assert proc.stderr.strip().endswith(line)  # the run's progress lines, then the one error line
    assert not (small_disk / "rm").exists()  # only the work folder, named as unfinished
    assert [p.name for p in small_disk.iterdir()] == ["rm.partial"]
    assert not list((small_disk / "rm.partial").glob("checkpoints/step-*"))  # a cut checkpoint is removed


@pytest.fixture(scope="module")
def checkpoint(tiny_bert, data, tmp_path_factory) -> Path:
    """The step-1 checkpoint of a finished run with :func:`config`'s settings."""
    out = tmp_path_factory.mktemp("run") / "rm"
    train_reward_model(config(tiny_bert, data, out, save_every=1, keep_checkpoints=0))
    return sorted((out / "checkpoints").iterdir())[0]


def cut_short(checkpoint: Path, output: Path) -> Path:
    """``output``'s work folder holding a copy of ``checkpoint``, as a run killed after that step leaves it."""
    copy = output.with_name(output.name + ".partial") / "checkpoints" / checkpoint.name
    shutil.copytree(checkpoint, copy)
    return copy


@pytest.mark.parametrize("damage", ["model file missing", "optimizer cut in half", "trainer state cut"])
def test_resume_from_a_damaged_checkpoint_is_one_line(
    tiny_bert, data, checkpoint, tmp_path, monkeypatch, capsys, damage
):
    copy = cut_short(checkpoint, tmp_path / "rm")
    if damage == "model file missing":
        (copy / "model.safetensors").unlink()
    elif damage == "optimizer cut in half":
        state = copy / "optimizer.bin"
        state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    else:
        (copy / "trainer_state.json").write_text('{"global_step": 1, "ep', encoding="utf-8")
    proc = run_main(*train_args(tiny_bert, data, tmp_path / "rm", "--resume"), monkeypatch=monkeypatch, capsys=capsys)
    line = assert_user_error(proc, str(copy), "delete")
    assert ("is damaged" if damage == "trainer state cut" else "cannot be loaded") in line
    assert proc.stderr.strip().endswith(line)
    assert not (tmp_path / "rm").exists() and copy.is_dir()  # nothing finished, the checkpoint left for the user


@pytest.mark.parametrize("other", ["data file", "data content", "model"])
def test_resume_with_other_data_or_model_needs_force(tiny_bert, data, checkpoint, tmp_path, other):
    from cheems.errors import InputError

    copy = cut_short(checkpoint, tmp_path / "rm")
    model, train = tiny_bert, data
    if other == "model":
        model = tmp_path / "copy-of-bert"
        shutil.copytree(tiny_bert, model)
    else:
        train = write_records(tmp_path / "other.jsonl", 10, seed=1)
    if other == "data content":  # the checkpoint's own path, other records in it
        saved = yaml.safe_load((copy / "train_config.yaml").read_text(encoding="utf-8"))
        (copy / "train_config.yaml").write_text(yaml.safe_dump({**saved, "data": [str(train)]}), encoding="utf-8")
    with pytest.raises(InputError, match=f"other --{'model' if other == 'model' else 'data'}.*--force"):
        train_reward_model(config(model, train, tmp_path / "rm", resume=True))
    assert not (tmp_path / "rm").exists()
    result = train_reward_model(config(model, train, tmp_path / "rm", resume=True, force=True))
    assert result.global_step > 1 and (tmp_path / "rm" / "model.safetensors").is_file()


# ---------------------------------------------------------------- command line and multi-process


def cli_module() -> list[str]:
    """``-m cheems train`` once the command is registered, else the module's own entry point."""
    from cheems.cli.main import app

    names = {c.name or (c.callback.__name__ if c.callback else None) for c in app.registered_commands}
    return ["-m", "cheems", "train"] if "train" in names else ["-m", "cheems.cli.train"]


def test_cli_trains_the_packaged_backbone_and_reports_bad_yaml(tmp_path, cheems_cli):
    data = write_records(tmp_path / "train.jsonl", 4)
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 1\nlearnig_rate: 0.1\n", encoding="utf-8")
    run = cheems_cli("train", "--config", bad, "--data", data)
    assert run.returncode == 2
    assert "learnig_rate" in run.stderr and str(bad) in run.stderr and "Traceback" not in run.stderr
    # default model: the packaged m3e-small with its small preset
    out = tmp_path / "rm"
    small = ("--epochs", "1", "--max-length", "64", "--batch-size", "12", "--no-progress")
    run = cheems_cli("train", "--data", data, "--output", out, *small)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "pairs covered" in run.stderr
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    saved = yaml.safe_load((out / "train_config.yaml").read_text())
    assert saved["model"] == "m3e-small" and saved["lr"] == 5e-5 and saved["max_length"] == 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_cpu_run_matches_one_process_with_accumulation(tiny_bert, tmp_path):
    """2 processes x 1 batch per step = 1 process x 2 accumulated batches: the same windows of batches,
    so (without dropout) the same weights. 7 batches: the second process runs a zero-weight batch at the end."""
    accelerate = Path(sys.executable).parent / "accelerate"
    if not accelerate.exists():
        pytest.skip("the accelerate launcher is not installed next to this Python")
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    model = tmp_path / "bert-no-dropout"
    cfg = AutoConfig.from_pretrained(tiny_bert, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    AutoModelForSequenceClassification.from_pretrained(tiny_bert, config=cfg).save_pretrained(model)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(model)
    data = write_records(tmp_path / "train.jsonl", 9)  # 7 batches of 4
    out = tmp_path / "rm"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        str(accelerate),
        "launch",
        "--config_file",
        str(REPO / "configs" / "accelerate_ddp.yaml"),
        "--num_processes",
        "2",
        "--main_process_port",
        str(free_port()),
        *cli_module(),
        "--data",
        str(data),
        "--model",
        str(model),
        "--output",
        str(out),
        "--epochs",
        "1",
        "--batch-size",
        "4",
        "--lr",
        "1e-3",
        "--no-progress",
        "--no-bf16",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-4000:])
    metrics = json.loads((out / "metrics.json").read_text())
    plan = metrics["epoch_plans"][0]
    assert plan["batches"] == 7 and metrics["global_step"] == 4
    # both processes' batches are in the pooled log: every response forwarded once
    assert sum(int(r["responses"]) for r in log_rows(out)) == plan["forward_passes"]
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]

    single = train_reward_model(config(model, data, tmp_path / "one", batch_size=4, grad_accum=2))
    assert single.global_step == 4
    a, b = weights(out), weights(tmp_path / "one")
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-5, rtol=1e-4), name


# ---------------------------------------------------------------- chunked forward
def test_chunked_forward_gives_the_same_rewards_and_gradients(tiny_bert):
    from cheems.train.forward import chunk_budget, forward_rewards
    from cheems.train.model import load_reward_model

    source = locate_model(str(tiny_bert))
    encoder = RewardEncoder(source, 512)
    model, tokenizer = load_reward_model(source.location, pooling="cls", tokenizer=encoder.tokenizer)
    model.eval()  # no dropout: both paths must agree exactly
    texts = [("问题" * n, "回答" * (3 * n + 1)) for n in (1, 9, 2, 30, 5, 14)]
    rows = [e.features for e in encoder.encode(texts)]
    results = []
    for budget in (0, 40, 10_000):
        model.zero_grad()
        rewards = forward_rewards(model, rows, tokenizer.pad_token_id, "cpu", budget)
        (rewards * torch.arange(1.0, len(rows) + 1)).sum().backward()  # order-sensitive
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((rewards.detach(), grads))
    for rewards, grads in results[1:]:
        torch.testing.assert_close(rewards, results[0][0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grads, results[0][1], rtol=1e-4, atol=1e-5)
    assert chunk_budget(-1, torch.device("cpu"), 1) > 0  # auto: chunks on one CPU process
    assert chunk_budget(-1, torch.device("cpu"), 2) == 0  # one pass under DDP
    assert chunk_budget(-1, torch.device("cuda"), 1) == 0
    assert chunk_budget(256, torch.device("cuda"), 4) == 256


def test_two_process_run_ends_cleanly_when_its_last_step_was_evaluated(tiny_bert, tmp_path):
    """Only the main process keeps the evaluations: all processes must agree that the end needs no other one
    (rank 1 used to wait at one barrier more and fail once rank 0 had finished)."""
    accelerate = Path(sys.executable).parent / "accelerate"
    if not accelerate.exists():
        pytest.skip("the accelerate launcher is not installed next to this Python")
    data = write_records(tmp_path / "train.jsonl", 9)  # 7 batches of 4: 4 steps on 2 processes
    bench = write_records(tmp_path / "open.jsonl", 4, seed=1)
    out = tmp_path / "rm"
    launch = [str(accelerate), "launch", "--config_file", str(REPO / "configs" / "accelerate_ddp.yaml")]
    options = ["--data", str(data), "--model", str(tiny_bert), "--output", str(out), "--epochs", "1"]
    options += [
        "--batch-size",
        "4",
        "--eval-bench",
        str(bench),
        "--allow-overlap",
        "--eval-every",
        "2",
        "--no-progress",
        "--no-bf16",
    ]
    cmd = [*launch, "--num_processes", "2", "--main_process_port", str(free_port()), *cli_module(), *options]
    run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-4000:])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["global_step"] == 4 and [e["step"] for e in metrics["evals"]] == [2, 4]


def test_one_process_trains_in_bf16_then_in_fp32(tiny_bert, data, tmp_path):
    """A notebook that trains twice with another precision: accelerate's per-process state would refuse the
    second run ("AcceleratorState has already been initialized"); each run starts afresh."""
    for bf16 in (True, False):
        result = train_reward_model(config(tiny_bert, data, tmp_path / f"rm-{bf16}", bf16=bf16))
        assert (result.output_dir / "config.json").is_file()
