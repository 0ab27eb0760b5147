"""``cheems train`` when the run is cut short (issue 31): a file-size limit or a full disk is one line and leaves no
folder that looks finished; Ctrl-C or SIGTERM saves a resumable checkpoint and says how to go on; the saved files
follow the umask (safetensors writes its files 0600)."""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import cheems
from cheems.train.checkpoint import latest_checkpoint, read_position
from helpers import assert_user_error, run_main

tiny_models = pytest.importorskip("tiny_models")
from test_train_trainer import config, write_records  # noqa: E402 - the trainer tests' data and settings

SRC = Path(cheems.__file__).resolve().parents[1]  # the children run the cheems these tests import


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return tiny_models.build_tiny_bert(tmp_path_factory.mktemp("bert") / "model")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_records(tmp_path_factory.mktemp("data") / "train.jsonl", 10)


def train_args(model: Path, data: Path, output: Path, *extra: object) -> list[str]:
    """``python -m cheems train`` on one CPU thread, no progress bar."""
    args = ["train", "-d", data, "-o", output, "-m", model, "--cpu", "--no-progress", "--batch-size", 4, *extra]
    return [sys.executable, "-m", "cheems", *map(str, args)]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200", "OMP_NUM_THREADS": "1"}


def file_size_limit(limit: int):
    """A preexec_fn: ``ulimit -f`` of ``limit`` bytes, and a write past it fails with EFBIG (not SIGXFSZ's kill)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.parametrize("save_every", [0, 1], ids=["model", "checkpoint"])
def test_a_file_size_limit_is_one_line_and_nothing_looks_finished(tiny_bert, data, tmp_path, save_every):
    output = tmp_path / "rm"
    proc = subprocess.run(
        train_args(tiny_bert, data, output, "--save-every", save_every),
        capture_output=True,
        text=True,
        env=child_env(),
        preexec_fn=file_size_limit(2 * 2**20),  # the tiny model's weights are 5.8 MB
        timeout=300,
    )
    what = "the checkpoint at step 1" if save_every else "the model"
    assert_user_error(proc, f"cannot save {what}", "file-size limit")
    assert not output.exists()  # nothing named --output: the run is in rm.partial
    partial = tmp_path / "rm.partial"
    assert not (partial / "config.json").exists() and latest_checkpoint(partial) is None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_saves_a_resumable_checkpoint_and_says_how_to_resume(tiny_bert, data, tmp_path, signum, cheems_cli):
    output = tmp_path / "rm"
    args = train_args(tiny_bert, data, output, "--epochs", 2)
    child = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=child_env())
    assert child.stderr is not None
    seen = []
    for line in child.stderr:  # "epoch 1/2: ..." comes right before the first step: the signal lands in step 1
        seen.append(line)
        if line.startswith("epoch 1/2"):
            child.send_signal(signum)
            break
    rest = child.stderr.read()
    assert child.wait(timeout=300) == 128 + signum, "".join(seen) + rest
    assert "Traceback" not in rest
    checkpoint = tmp_path / "rm.partial" / "checkpoints" / "step-0000001"
    (line,) = [ln for ln in rest.splitlines() if ln.startswith("interrupted")]
    assert f"saved a resumable checkpoint at step 1 in {checkpoint}" in line and "--resume" in line
    assert latest_checkpoint(tmp_path / "rm.partial") == checkpoint and read_position(checkpoint).global_step == 1
    assert not output.exists()

    resumed = cheems_cli(*args[3:], "--resume")  # the signal went to a real process; the resume needs none
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from {checkpoint} (step 1" in " ".join(resumed.stderr.split())
    assert (output / "model.safetensors").is_file()


def test_saved_files_follow_the_umask(tiny_bert, data, tmp_path):
    from cheems.train.trainer import train_reward_model

    before = os.umask(0o027)
    try:
        train_reward_model(config(tiny_bert, data, tmp_path / "rm", save_every=1, keep_checkpoints=0))
    finally:
        os.umask(before)
    files = [p for p in (tmp_path / "rm").rglob("*") if p.is_file()]
    assert any(p.name == "model.safetensors" for p in files) and latest_checkpoint(tmp_path / "rm") is not None
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert {mode for mode in modes.values()} == {oct(0o640)}, modes


def test_cheems_eval_of_the_saved_model_gives_the_training_runs_number(tiny_bert, data, tmp_path, monkeypatch, capsys):
    from cheems.models.backbones import FORMAT_KEY, MAX_LENGTH_KEY
    from cheems.train.trainer import train_reward_model

    bench = write_records(tmp_path / "open.jsonl", 8, seed=1)  # ~20 tokens a response: cut at 12, whole at 512
    output = tmp_path / "rm"
    settings = {"eval_bench": [str(bench)], "allow_overlap": True, "max_length": 12, "lr": 5e-3}
    train_reward_model(config(tiny_bert, data, output, **settings))
    saved = json.loads((output / "config.json").read_text(encoding="utf-8"))
    assert saved[MAX_LENGTH_KEY] == 12 and saved[FORMAT_KEY] == "pair"
    final = json.loads((output / "metrics.json").read_text(encoding="utf-8"))["final_eval"]

    def evaluated(*extra: object) -> tuple[dict, str]:
        report = tmp_path / "e.json"
        args = ["eval", "--bench", bench, "-m", output, "--no-cache", "--dtype", "fp32", "--output-json", report]
        proc = run_main(*args, *extra, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        return json.loads(report.read_text(encoding="utf-8")), proc.stderr

    report, said = evaluated()
    assert "trained at" not in said
    assert report["overall"] == pytest.approx(final["overall"], abs=1e-9)
    for name, sub in report["subsets"].items():
        assert sub["accuracy"] == final["subsets"][name]["accuracy"]
    _, said = evaluated("--max-length", 512)  # an explicit option wins, and says so in one line
    (line,) = [ln for ln in said.splitlines() if "trained at 12 tokens" in ln]
    assert line.startswith("warning:") and "--max-length 512" in line
