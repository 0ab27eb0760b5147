"""``cheems train-judge`` (issue 34, item 2) on a tiny random Qwen2 chat model and the Qwen2-style tokenizer built in
the tests: the reply-only mask token by token, truncation, packed = padded, learning, resume, the one-line errors,
and the trained folder judging a bench through ``cheems eval --judge-model DIR --backend hf``."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cheems.errors import InputError
from cheems.prompts.judge_sft import JudgeSftSettings, export_judge_sft
from cheems.train.judge_config import load_judge_config
from cheems.train.judge_data import (
    IGNORE,
    encode_row,
    encode_rows,
    packed_batch,
    padded_batch,
    read_judge_rows,
    trained_positions,
)
from cheems.train.judge_data import token_loss as judge_token_loss
from cheems.train.judge_trainer import train_judge_model
from helpers import assert_user_error, run_main, write_jsonl

tiny_models = pytest.importorskip("tiny_models")

# a short judge prompt (the export's and the evaluation's): the tiny model trains on a few hundred tokens a row
TEMPLATE = """\
name: tiny-judge-test
system: 你是评审。
user: "问题：{question}\\n回答A：{answer_a}\\n回答B：{answer_b}\\n哪个更好？"
"""
TOPICS = ["长城", "故宫", "颐和园", "奖励模型", "深度学习", "人工智能"]


def ranked(i: int) -> dict:
    topic = TOPICS[i % len(TOPICS)]
    responses = [{"id": "good", "content": f"{topic}很有意思。"}, {"id": "bad", "content": "不知道。"}]
    return {
        "id": f"p{i}",
        "input": f"{topic}是什么？",
        "category": ["知识"],
        "responses": responses,
        "rank": {"good": 1, "bad": 2},
    }


# tiny models: one torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("judge-train")


@pytest.fixture(scope="module")
def chat_lm(root, qwen2_tokenizer_dir) -> Path:
    """A random Qwen2ForCausalLM (hidden 64, 2 layers) with Qwen's chat template."""
    return tiny_models.build_tiny_qwen2(root / "chat-lm", qwen2_tokenizer_dir, causal_lm=True)


@pytest.fixture(scope="module")
def template(root) -> Path:
    path = root / "template.yaml"
    path.write_text(TEMPLATE, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def judge_rows(root, template) -> Path:
    """8 rows from ``cheems export judge-sft --eval-prompt --template``: 4 pairs, both orders, as many A as B."""
    source = write_jsonl(root / "ranked.jsonl", [ranked(i) for i in range(4)])
    export_judge_sft([source], root / "judge.jsonl", JudgeSftSettings(eval_prompt=True, template=template))
    return root / "judge.jsonl"


def settings(model: Path, data: Path, output: Path, **kw: object) -> dict:
    base = {"model": str(model), "data": [str(data)], "output": str(output), "batch_size": 4, "lr": 1e-2}
    return {**base, "warmup_ratio": 0.0, "progress": False, "bf16": False, "cpu": True, **kw}


RUN = {"epochs": 30, "save_every": 20, "keep_checkpoints": 0}  # 60 steps; checkpoints at steps 20, 40, 60


@pytest.fixture(scope="module")
def trained(root, chat_lm, judge_rows):
    """One judge trained for 60 steps, shared by the tests that read a trained folder."""
    return train_judge_model(load_judge_config(None, settings(chat_lm, judge_rows, root / "judge", **RUN)))


def log_rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "train_log.csv").open(encoding="utf-8") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


# ---------------------------------------------------------------- the mask
def test_the_loss_is_on_the_reply_and_its_end_of_turn_token_only(qwen2_tokenizer_dir):
    """Token by token: every prompt token (system, user, the generation prompt) is -100; the reply's tokens and
    Qwen's <|im_end|> after it carry their own ids; the template's newline after <|im_end|> is not in the row."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen2_tokenizer_dir)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for messages in (
        [{"role": "system", "content": "你是评审。"}, {"role": "user", "content": "哪个更好？"}],
        [{"role": "user", "content": "长城很有意思。哪个更好？"}],  # no system turn: the template's default one
    ):
        for reply in ("[[A]]", "回答A更准确，回答B答非所问。[[A]]"):
            row = encode_row(tokenizer, [*messages, {"role": "assistant", "content": reply}], 4096, "drop")
            assert row is not None
            prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
            assert row.ids == prompt_ids + reply_ids + [end]
            for i, (token, label) in enumerate(zip(row.ids, row.labels)):
                assert label == (IGNORE if i < len(prompt_ids) else token), (i, tokenizer.decode([token]))
            trained = [t for t, label in zip(row.ids, row.labels) if label != IGNORE]
            assert tokenizer.decode(trained) == reply + "<|im_end|>"
            assert row.targets == len(reply_ids) + 1


def test_too_long_rows_are_cut_at_the_prompts_start_or_dropped_never_at_the_verdict(qwen2_tokenizer_dir):
    from transformers import AutoTokenizer

    from cheems.train.judge_data import JudgeRow

    tokenizer = AutoTokenizer.from_pretrained(qwen2_tokenizer_dir)
    long_reply = "回答A更好。" * 20 + "[[A]]"
    rows = [
        JudgeRow([{"role": "user", "content": "问题" * n}, {"role": "assistant", "content": reply}], "d.jsonl", n)
        for n, reply in ((1, "[[A]]"), (40, "[[B]]"), (2, long_reply))
    ]
    full = [encode_row(tokenizer, r.messages, 10_000, "drop") for r in rows]
    limit = len(full[0].ids) + 5  # the first fits, the second's prompt does not, the third's reply alone is over
    assert full[1] is not None and len(full[1].ids) > limit and full[2].targets > limit

    kept, summary = encode_rows(tokenizer, rows, limit, "left_prompt")
    assert (summary.rows, summary.kept, summary.truncated, summary.dropped) == (3, 2, 1, 1)
    cut = kept[1]
    assert len(cut.ids) == limit and cut.cut
    assert cut.ids == full[1].ids[-limit:] and cut.labels == full[1].labels[-limit:]  # the prompt's start went
    assert cut.targets == full[1].targets  # the verdict stays whole

    kept, summary = encode_rows(tokenizer, rows, limit, "drop")
    assert (summary.kept, summary.truncated, summary.dropped) == (1, 0, 2)
    assert "2 over --max-length left out" in summary.describe()
    with pytest.raises(InputError, match="all 3 rows are over --max-length 3"):
        encode_rows(tokenizer, rows, 3, "drop")


# ---------------------------------------------------------------- packing
def test_packed_rows_give_the_padded_rows_loss(chat_lm, judge_rows):
    """Packed (several rows a sequence, each attending to itself, positions restarting) and padded batches give the
    same loss in fp32, directly and at step 1 of a run."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chat_lm)
    model = AutoModelForCausalLM.from_pretrained(chat_lm, dtype=torch.float32).eval()
    rows, _ = encode_rows(tokenizer, read_judge_rows([str(judge_rows)]), 4096, "drop")
    padded = padded_batch(rows, tokenizer.pad_token_id, "cpu")
    budget = sum(len(r.ids) for r in rows) // 2 + 1  # two packed sequences for eight rows
    packed = packed_batch(rows, tokenizer.pad_token_id, "cpu", budget, "sdpa")
    assert packed["input_ids"].shape[0] == 2 and padded["input_ids"].shape[0] == 8
    losses = []
    with torch.no_grad():
        for batch in (padded, packed):
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            full = judge_token_loss(model(**inputs).logits, batch["labels"])
            # the trainer's way: the vocabulary's logits only where the loss reads them
            at = trained_positions(batch["labels"])
            kept = judge_token_loss(model(**inputs, logits_to_keep=at).logits, batch["labels"], at)
            assert kept[1] == full[1] and float(kept[0]) == pytest.approx(float(full[0]), abs=1e-6)
            assert len(at) < batch["input_ids"].shape[1] / 4
            losses.append(full)
    (loss_padded, n_padded), (loss_packed, n_packed) = losses
    assert n_padded == n_packed == sum(r.targets for r in rows)
    assert float(loss_packed) == pytest.approx(float(loss_padded), abs=1e-5)


def test_a_padded_run_starts_at_the_packed_runs_loss(root, chat_lm, judge_rows, trained, tmp_path):
    padded = train_judge_model(
        load_judge_config(None, settings(chat_lm, judge_rows, tmp_path / "padded", epochs=1, packing="none"))
    )
    assert padded.history[0]["loss"] == pytest.approx(trained.history[0]["loss"], abs=1e-5)
    assert padded.history[0]["tokens"] == trained.history[0]["tokens"]


# ---------------------------------------------------------------- learning, the folder, resume
def test_the_loss_falls_and_the_folder_is_a_chat_model(root, trained):
    losses = [row["loss"] for row in trained.history]
    assert len(losses) == 60 and losses[0] > 3 and losses[-1] < losses[0] / 10
    folder = root / "judge"
    assert trained.output_dir == folder and not (root / "judge.partial").exists()
    for name in ("config.json", "model.safetensors", "generation_config.json", "train_config.yaml", "README.md"):
        assert (folder / name).is_file(), name
    generation = json.loads((folder / "generation_config.json").read_text())
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.chat_template and tokenizer.convert_tokens_to_ids("<|im_end|>") in generation["eos_token_id"]
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["Qwen2ForCausalLM"]
    rows = log_rows(folder)
    assert list(rows[0]) == ["step", "epoch", "loss", "rows", "tokens", "targets", "lr", "grad_norm"]
    assert {r["targets"] for r in rows} == {str(trained.data.targets // 2)}  # 4 rows a step, the loss on 24 tokens
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["global_step"] == 60 and metrics["data"]["kept"] == 8
    # the config fed back trains the same run (the run flags are not in it)
    saved = load_judge_config(folder / "train_config.yaml")
    assert saved.to_dict() == {**trained_config(root).to_dict(), "resume": False, "overwrite": False}


def trained_config(root: Path):
    return load_judge_config(None, settings(root / "chat-lm", root / "judge.jsonl", root / "judge", **RUN))


def test_resume_from_a_checkpoint_gives_the_same_weights(root, chat_lm, judge_rows, trained, tmp_path):
    checkpoint = root / "judge" / "checkpoints" / "step-0000020"
    (tmp_path / "b.partial" / "checkpoints").mkdir(parents=True)  # as a run cut short after step 20 leaves it
    shutil.copytree(checkpoint, tmp_path / "b.partial" / "checkpoints" / checkpoint.name)
    resumed = train_judge_model(
        load_judge_config(None, settings(chat_lm, judge_rows, tmp_path / "b", **RUN, resume=True))
    )
    assert resumed.global_step == 60
    a, b = load_file(str(root / "judge" / "model.safetensors")), load_file(str(tmp_path / "b" / "model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6, rtol=0), name
    assert [r for r in log_rows(root / "judge") if int(r["step"]) > 20] == log_rows(tmp_path / "b")


def test_lora_adapters_are_merged_into_a_plain_chat_model(chat_lm, judge_rows, tmp_path, monkeypatch, capsys):
    out = tmp_path / "lora"
    proc = run_main(
        *train_args(chat_lm, judge_rows, out, "--lora", "--lr", "1e-2", "--warmup-ratio", "0", "--batch-size", "4"),
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    base, merged = load_file(str(chat_lm / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert merged.keys() == base.keys()  # no adapter weights: a plain Qwen2ForCausalLM
    changed = {k for k in base if not torch.equal(base[k], merged[k])}
    assert "model.layers.0.self_attn.q_proj.weight" in changed and "model.embed_tokens.weight" not in changed
    assert "lm_head.weight" not in changed  # all-linear leaves the output layer alone


# ---------------------------------------------------------------- judging with it
def test_the_trained_folder_judges_a_bench_through_cheems_eval(root, trained, template, tmp_path, monkeypatch, capsys):
    """``cheems eval --judge-model DIR --backend hf``: the local judge loads the folder (its chat template, its stop
    token) and evaluates a bench it never saw, both orders seeded; the report is written."""
    bench = write_jsonl(tmp_path / "bench.jsonl", [{**ranked(i), "id": f"b{i}"} for i in (4, 5)])
    out = tmp_path / "eval.json"
    proc = run_main(
        "eval", "--bench", bench, "--judge-model", root / "judge", "--backend", "hf", "--device", "cpu",
        "--template", template, "--max-tokens", "8", "--max-retries", "0", "--cache", tmp_path / "judge.sqlite",
        "--output-json", out, "--no-progress", monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    judge = report["judge"]
    assert judge["judge_model"] == str(root / "judge") and judge["template"].startswith("tiny-judge-test")
    assert judge["questions"] == 2 and judge["requests"] == 2
    # it learned the verdict's shape: every reply is a tag the strict parser reads
    assert judge["parse_failures"] == 0 and sum(judge["verdicts"].values()) == 2


# ---------------------------------------------------------------- the command and its errors
def train_args(model: Path, data: Path, output: Path, *more: object) -> list[object]:
    return ["train-judge", "--data", data, "--model", model, "--output", output, "--epochs", "1", "--cpu",
            "--no-progress", "--no-bf16", *more]  # fmt: skip


REPLY = {"role": "assistant", "content": "[[A]]"}
BAD_ROWS = [
    ({"prompt_id": "p"}, "judge.jsonl:2: field 'messages': a row needs a 'messages' list"),
    ({"messages": [{"role": "user", "content": "问题"}]}, "the last message must be the assistant's reply"),
    (
        {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, REPLY]},
        "roles user, user, assistant are not the export's shape",
    ),
    ({"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "[[A]]"}]}, "a text 'content'"),
]  # fmt: skip


@pytest.mark.parametrize(("row", "words"), BAD_ROWS, ids=["no-messages", "no-reply", "shape", "content"])
def test_a_row_not_in_the_exports_shape_is_one_line_at_its_line(
    chat_lm, judge_rows, tmp_path, monkeypatch, capsys, row, words
):
    good = json.loads(judge_rows.read_text(encoding="utf-8").splitlines()[0])
    data = write_jsonl(tmp_path / "judge.jsonl", [good, row])
    proc = run_main(*train_args(chat_lm, data, tmp_path / "out"), monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judge.jsonl"]  # nothing written


def test_a_base_model_needs_a_chat_template(chat_lm, judge_rows, tmp_path, monkeypatch, capsys):
    base = tmp_path / "base"
    shutil.copytree(chat_lm, base)
    (base / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((base / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (base / "tokenizer_config.json").write_text(json.dumps(config))
    proc = run_main(*train_args(base, judge_rows, tmp_path / "out"), monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "--model: the model's tokenizer has no chat template", "--chat-template FILE")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()

    # given one, it trains, and the folder keeps it
    template = tmp_path / "chat.jinja"
    template.write_text(tiny_models.CHAT_TEMPLATE, encoding="utf-8")
    more = ("--chat-template", template, "--packing", "none")
    proc = run_main(*train_args(base, judge_rows, tmp_path / "out", *more), monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert "saved the judge model to" in proc.stderr and "judge data: 8 of 8 rows" in proc.stderr
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(tmp_path / "out").chat_template == tiny_models.CHAT_TEMPLATE


def test_a_reward_models_folder_is_not_a_chat_model(judge_rows, qwen2_tokenizer_dir, tmp_path, monkeypatch, capsys):
    """A *ForSequenceClassification folder (tokenizer, chat template and all) has no LM head: training it as a judge
    would start from a random one, so it is refused before anything is written."""
    rm = tiny_models.build_tiny_qwen2(tmp_path / "rm", qwen2_tokenizer_dir)
    proc = run_main(*train_args(rm, judge_rows, tmp_path / "out"), monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "is not a complete causal LM", "lm_head.weight", "--keep-lm-head")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


def _model_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen2"}\n', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", ["output-is-the-model", "data-inside-the-output", "config-inside-the-output"])
def test_the_output_never_replaces_an_input_even_with_overwrite(judge_rows, tmp_path, where):
    import cheems

    model = _model_folder(tmp_path / "lm")
    data = tmp_path / "d" / "judge.jsonl"
    data.parent.mkdir()
    shutil.copy(judge_rows, data)
    given: dict = {"model": str(model), "data": [str(data)], "output": str(tmp_path / "out"), "overwrite": True}
    config = None
    if where == "output-is-the-model":
        given["output"] = str(model)
    elif where == "data-inside-the-output":
        given["output"] = str(data.parent)
    else:
        config = tmp_path / "out" / "judge.yaml"
        config.parent.mkdir()
        config.write_text("epochs: 1\n", encoding="utf-8")
    before = _snapshot(tmp_path)
    with pytest.raises(InputError, match="input"):
        cheems.train_judge(config, **given)
    assert _snapshot(tmp_path) == before


def test_a_finished_model_or_an_unfinished_run_is_kept(chat_lm, judge_rows, tmp_path, monkeypatch, capsys):
    out = _model_folder(tmp_path / "out")
    proc = run_main(*train_args(chat_lm, judge_rows, out), monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "holds a finished model", "--overwrite")
    old = tmp_path / "run.partial" / "checkpoints" / "step-0000003"
    old.mkdir(parents=True)
    (old / "trainer_state.json").write_text('{"global_step": 3, "epoch": 0, "micro": 3}')
    proc = run_main(*train_args(chat_lm, judge_rows, tmp_path / "run"), monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "holds checkpoints of an unfinished run", "--resume")
    assert (out / "model.safetensors").read_bytes() == b"weights" and (old / "trainer_state.json").exists()


def test_the_command_needs_data_and_a_model(tmp_path, judge_rows, monkeypatch, capsys):
    proc = run_main(
        "train-judge", "--data", judge_rows, "--output", tmp_path / "o", monkeypatch=monkeypatch, capsys=capsys
    )
    assert_user_error(proc, "needs a causal chat model", "--model")
    proc = run_main(
        "train-judge", "--model", tmp_path, "--output", tmp_path / "o", monkeypatch=monkeypatch, capsys=capsys
    )
    assert_user_error(proc, "needs training data", "export judge-sft")
    proc = run_main(
        "train-judge",
        "--data",
        judge_rows,
        "--model",
        tmp_path,
        "--truncation",
        "middle",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert_user_error(proc, "--truncation: field 'truncation': unknown policy 'middle'")


def test_the_config_file_holds_the_options(chat_lm, judge_rows, tmp_path, monkeypatch, capsys):
    """``--config`` takes the same settings (a bad key at its line); options override it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 1\nlearnig_rate: 0.1\n", encoding="utf-8")
    args = ["train-judge", "--config", bad, "--data", judge_rows, "--model", chat_lm, "--output", tmp_path / "o"]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{bad}:2", "learnig_rate")
    good = tmp_path / "good.yaml"
    good.write_text(f"data: [{judge_rows}]\nmodel: {chat_lm}\nepochs: 3\nlora: {{r: 4}}\n", encoding="utf-8")
    config = load_judge_config(good, {"epochs": 1, "lora": {"enabled": True}})
    assert config.epochs == 1 and config.lora.r == 4 and config.lora.enabled and config.data == [str(judge_rows)]
