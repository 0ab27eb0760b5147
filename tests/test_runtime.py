"""cheems.runtime: the one device choice, precision rule, progress bar, content hash and folder identity."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from cheems.runtime import ProgressBar, bf16_wanted, compute_dtype, content_hash, folder_files, pick_device

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@given(JSON)
def test_content_hash_keeps_the_spellings_every_existing_cache_is_keyed_by(value):
    # items (score cache, judge messages): compact JSON in order; identities: sorted keys, default separators
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    keyed = json.dumps(value, sort_keys=True, ensure_ascii=False)
    assert content_hash(value) == hashlib.sha256(compact.encode("utf-8")).hexdigest()
    assert content_hash(value, keyed=True) == hashlib.sha256(keyed.encode("utf-8")).hexdigest()


def test_content_hash_pinned_values():
    # a change here invalidates every user's score and judge cache: bump SCORING_VERSION/TEMPLATE_VERSION instead
    messages = [{"role": "user", "content": "你好"}]
    assert content_hash(messages) == "9ecd66c1413f1fea691de76277ee0567498b052cb88d986bf691db18b7a5556a"
    assert content_hash(["问", "答"]) == hashlib.sha256('["问","答"]'.encode()).hexdigest()
    assert content_hash({"b": 1, "a": [1, 2]}, keyed=True) == hashlib.sha256(b'{"a": [1, 2], "b": 1}').hexdigest()
    assert content_hash({"b": 1, "a": 2}, keyed=True) == content_hash({"a": 2, "b": 1}, keyed=True)
    assert content_hash({"b": 1, "a": 2}) != content_hash({"a": 2, "b": 1})  # messages keep their order


def test_dtype_rule():
    assert compute_dtype("cpu", "fp32") is None
    assert compute_dtype("cpu", "bf16") is torch.bfloat16
    assert compute_dtype("cpu", "fp16") is torch.float16
    native = open("/proc/cpuinfo").read()
    # torch's own probes count too (issue 31): bf16 autocast is ~2x faster than fp32 where either says yes
    found = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    found = found or any(f in native.split() for f in ("avx512_bf16", "amx_bf16", "bf16"))
    expected = torch.bfloat16 if found else None
    assert compute_dtype("cpu", "auto") is expected
    assert bf16_wanted("auto", "cpu") is (expected is torch.bfloat16)
    assert bf16_wanted(True, "cpu") is True and bf16_wanted(False, "cuda") is False


def test_device_choice():
    assert pick_device("cuda:1") == "cuda:1"
    assert pick_device(None, cpu=True) == "cpu"
    assert pick_device(None) == ("cuda" if torch.cuda.is_available() else "cpu")


def test_folder_files_ignore_readme_and_hidden_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "README.md").write_text("card")
    (tmp_path / ".lock").write_text("")
    (tmp_path / "sub").mkdir()
    before = folder_files(tmp_path)
    assert list(before) == ["config.json"]
    (tmp_path / "README.md").write_text("a longer model card")
    assert folder_files(tmp_path) == before
    (tmp_path / "config.json").write_text('{"x": 1}')
    assert folder_files(tmp_path) != before


def _console() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=100)


def test_progress_bar_counts_and_shows_stats():
    console = _console()
    with ProgressBar(4, "training", console=console, completed=1) as bar:
        bar.advance(2, stats="loss 0.5000")
        assert bar.done == 3
    out = console.file.getvalue()
    assert "training" in out and "3/4" in out and "loss 0.5000" in out


@pytest.mark.parametrize(
    "kwargs",
    [{"enabled": False}, {"after_s": 3600.0}, {"terminal_only": True}],
    ids=["disabled", "not-yet-due", "not-a-terminal"],
)
def test_progress_bar_stays_quiet(kwargs, capsys):
    console = Console(file=io.StringIO(), force_terminal=False)
    with ProgressBar(5, "scoring", console=console, **kwargs) as bar:
        bar.advance(5)
    assert bar.bar is None and console.file.getvalue() == "" and capsys.readouterr().err == ""
