"""``cheems train --lm-weight W``: a next-token loss beside the Bradley–Terry loss on the same backbone (GRM,
CLoud), on a random tiny Qwen2 causal LM. W = 0 is today's run exactly; W > 0 labels exactly the best-ranked
responses' tokens (or the critiques), packed and padded agree with a plain causal LM's loss, the joint loss is
logged and falls, and the saved folder is the usual reward model (``--keep-lm-head``: a causal LM beside it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models.backbones import locate_model
from cheems.models.encoding import RewardEncoder, collate
from cheems.train.config import load_config
from cheems.train.data import build_training_set
from cheems.train.forward import forward_rewards_lm
from cheems.train.lm_objective import LM_FOLDER, best_responses, lm_targets, load_lm_head
from cheems.train.logs import step_row
from cheems.train.model import load_reward_model
from cheems.train.packing import packed_rewards_lm
from cheems.train.trainer import train_reward_model
from helpers import assert_user_error, run_main, write_jsonl

tiny_models = pytest.importorskip("tiny_models")


@pytest.fixture(scope="module")
def causal_lm(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    """A tiny random Qwen2ForCausalLM (its own, untied LM head)."""
    return tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("lm"), qwen2_tokenizer_dir, causal_lm=True)


def records(critiques: bool = False) -> list[Record]:
    """A tie at the top (a, b), a multi-turn prompt, a long prompt (cut by :func:`encoder`), comparisons only."""
    rows = [
        {
            "id": "tie",
            "sys_prompt": "你是一个乐于助人的助手。",
            "input": "请解释一下光合作用。",
            "responses": [
                {"id": "a", "content": "光合作用是植物利用光能制造糖的过程。", "critique": "准确，简洁。"},
                {"id": "b", "content": "植物用阳光把水和二氧化碳变成养分。"},
                {"id": "c", "content": "不知道。", "critique": "没有回答问题。"},
            ],
            "rank": {"a": 1, "b": 1, "c": 2},
        },
        {
            "id": "turns",
            "input": [
                {"role": "user", "content": "北京是哪个国家的首都？"},
                {"role": "assistant", "content": "中国。"},
                {"role": "user", "content": "那上海呢？"},
            ],
            "responses": [{"id": "x", "content": "上海是中国最大的城市之一。"}, {"id": "y", "content": "日本。"}],
            "rank": {"x": 1, "y": 2},
        },
        {
            "id": "long",
            "input": "这是一个很长的问题，" * 30 + "请简短回答。",
            "responses": [{"id": "p", "content": "好的，简短回答。"}, {"id": "q", "content": "不行。"}],
            "rank": {"p": 1, "q": 2},
        },
        {
            "id": "compared",
            "input": "1+1=?",
            "responses": [{"id": "u", "content": "2"}, {"id": "v", "content": "3"}, {"id": "w", "content": "二"}],
            "comparisons": [{"a": "u", "b": "v", "label": "a"}, {"a": "w", "b": "v", "label": "b"}],
        },
    ]
    if not critiques:
        for row in rows:
            for response in row["responses"]:
                response.pop("critique", None)
    return [Record.model_validate(r) for r in rows]


def encoder(model: Path) -> RewardEncoder:
    """The model's encoder at a limit that cuts the long prompt's rows only."""
    source = locate_model(str(model))
    lengths = [e.full_length for e in RewardEncoder(source, 10**6).encode([(r.prompt, "") for r in records()])]
    return RewardEncoder(source, max(lengths[:2] + lengths[3:]) + 30)


def write_records(path: Path, critiques: bool = False, copies: int = 2) -> Path:
    """The records ``copies`` times, each copy's prompts their own (ids and text)."""
    rows = []
    for n in range(copies):
        for r in records(critiques):
            row = r.model_dump(exclude_none=True)
            row |= {"id": f"{r.id}-{n}", "input": f"{r.input}（{n}）" if isinstance(r.input, str) else row["input"]}
            rows.append(row)
    return write_jsonl(path, rows)


def settings(model: Path, data: Path, out: Path, **more: object) -> dict:
    base = {"model": str(model), "data": [str(data)], "output": str(out), "epochs": 3, "batch_size": 5, "lr": 2e-3}
    return base | {"max_length": 512, "progress": False, "bf16": False, "cpu": True, "seed": 7} | more


# ---------------------------------------------------------------- which tokens the LM loss reads
def test_chosen_labels_exactly_the_best_ranked_responses_tokens(causal_lm):
    enc = encoder(causal_lm)
    recs = records()
    data = build_training_set(recs, enc, "left_prompt")
    assert data.summary.truncated == 2  # the long prompt's rows are cut at their front
    targets = lm_targets(recs, data.groups, data.features, enc, "chosen")
    assert sorted((recs[p].id, rid) for p, rid in targets.starts) == [
        ("compared", "u"),
        ("long", "p"),
        ("tie", "a"),
        ("tie", "b"),
        ("turns", "x"),
    ]
    assert [best_responses(g) for g in data.groups if recs[g.prompt].id == "compared"] == [["u"]]
    decode = enc.tokenizer.decode
    for (p, rid), start in targets.starts.items():
        ids = data.features[p, rid][0]
        assert decode(ids[start:]) == recs[p].response(rid).content + "<|im_end|>\n"  # answer and end of turn
        assert decode(ids[:start]).endswith("<|im_start|>assistant\n")


def test_critique_rows_label_the_critique_after_the_response(causal_lm):
    enc = encoder(causal_lm)
    recs = records(critiques=True)
    data = build_training_set(recs, enc, "left_prompt")
    targets = lm_targets(recs, data.groups, data.features, enc, "critique")
    assert sorted(rid for _, rid in targets.critiques) == ["a", "c"]
    for item, ((ids, _), start) in targets.critiques.items():
        assert ids[:start] == data.features[item][0]  # the row the reward reads, then the critique
        critique = recs[item[0]].response(item[1]).model_extra["critique"]
        assert enc.tokenizer.decode(ids[start:]) == critique + enc.tokenizer.eos_token
    with pytest.raises(InputError, match="no response in the training data has a 'critique'"):
        lm_targets(records(), data.groups, data.features, enc, "critique")


# ---------------------------------------------------------------- the loss of one forward
def reference_nll(model_dir: Path, rows, starts) -> tuple[float, int]:
    """The summed next-token loss of the labelled tokens, row by row, by the plain causal LM."""
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for (ids, _), start in zip(rows, starts):
            if start is None:
                continue
            logits = lm(torch.tensor([ids])).logits[0].float()
            target = torch.tensor(ids[start:])
            total += torch.nn.functional.cross_entropy(logits[start - 1 : -1], target, reduction="sum").item()
            tokens += len(target)
    return total, tokens


@pytest.mark.parametrize("target", ["chosen", "critique"])
def test_packed_and_padded_give_the_causal_lms_own_loss(causal_lm, target):
    enc = encoder(causal_lm)
    recs = records(critiques=True)
    data = build_training_set(recs, enc, "left_prompt")
    targets = lm_targets(recs, data.groups, data.features, enc, target)
    model, tokenizer = load_reward_model(causal_lm, tokenizer=enc.tokenizer)
    model.attach_lm_head(load_lm_head(str(causal_lm), None, model, str(causal_lm), "--lm-weight"))
    model.eval()
    items = [(g.prompt, rid) for g in data.groups for rid in g.responses]
    rows, starts = targets.step_rows(items, [data.features[i] for i in items])
    keys = targets.step_keys(items)
    pad = tokenizer.pad_token_id
    with torch.no_grad():
        padded = forward_rewards_lm(model, rows, starts, pad, "cpu", 0)
        chunked = forward_rewards_lm(model, rows, starts, pad, "cpu", 200)
        packed = packed_rewards_lm(model, rows, keys, starts, pad, "cpu", 1024, "sdpa")
        plain = model(**collate(rows, pad, "cpu"))
    total, tokens = reference_nll(causal_lm, rows, starts)
    assert tokens > 20
    for rewards, nll, n in (padded, chunked, packed):
        assert n == tokens
        assert nll.item() == pytest.approx(total, rel=1e-4)
        assert torch.allclose(rewards, plain, atol=1e-5)  # the rewards of the same forward are the plain ones


def test_an_encoder_or_a_head_less_checkpoint_is_one_line(tmp_path, qwen2_tokenizer_dir):
    bert = tiny_models.build_tiny_bert(tmp_path / "bert")
    model, _ = load_reward_model(bert)
    with pytest.raises(InputError, match="--lm-weight needs a causal language model.*encoder"):
        load_lm_head(str(bert), None, model, "bert", "--lm-weight")
    seq_cls = tiny_models.build_tiny_qwen2(tmp_path / "rm", qwen2_tokenizer_dir)
    model, _ = load_reward_model(seq_cls)
    with pytest.raises(InputError, match="has none \\(no lm_head.weight"):
        load_lm_head(str(seq_cls), None, model, "rm", "--keep-lm-head")


# ---------------------------------------------------------------- training
def test_lm_weight_zero_is_todays_run_to_the_bit(causal_lm, tmp_path, monkeypatch):
    data = write_records(tmp_path / "train.jsonl")
    plain = train_reward_model(load_config(None, settings(causal_lm, data, tmp_path / "plain")))

    def never(*args, **kwargs):
        raise AssertionError("the LM path ran with --lm-weight 0")

    monkeypatch.setattr("cheems.train.trainer.forward_rewards_lm", never)  # W = 0 must not even reach it
    monkeypatch.setattr("cheems.train.trainer.packed_rewards_lm", never)
    zero = train_reward_model(load_config(None, settings(causal_lm, data, tmp_path / "zero", lm_weight=0.0)))
    assert [r["loss"] for r in zero.history] == [r["loss"] for r in plain.history]
    assert all(r["lm_loss"] is None for r in zero.history)
    weights = [(tmp_path / run / "model.safetensors").read_bytes() for run in ("plain", "zero")]
    assert weights[0] == weights[1]


def test_joint_training_logs_the_lm_loss_and_it_falls_packed_as_padded(causal_lm, tmp_path):
    from transformers import AutoModelForSequenceClassification

    data = write_records(tmp_path / "train.jsonl", copies=3)
    out = tmp_path / "rm"
    padded = train_reward_model(
        load_config(None, settings(causal_lm, data, tmp_path / "padded", lm_weight=0.3, packing="none", epochs=4))
    )
    result = train_reward_model(load_config(None, settings(causal_lm, data, out, lm_weight=0.3, epochs=4)))
    for key in ("loss", "lm_loss", "bt_loss"):
        assert [r[key] for r in result.history] == pytest.approx([r[key] for r in padded.history], abs=1e-4)
    lm = [r["lm_loss"] for r in result.history if r["lm_loss"] is not None]
    assert len(lm) >= 4 and lm[-1] < lm[0] - 0.5  # random tokens to fewer: it learns the chosen answers
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    assert "lm_loss" in (out / "train_log.csv").read_text().splitlines()[0]
    assert "lm_weight: 0.3" in (out / "train_config.yaml").read_text()
    assert "0.3·next-token loss on each prompt's best-ranked responses" in (out / "README.md").read_text()
    # the usual sequence-classification folder: no LM head in it, loads cleanly, scores as the trained model did
    hf, info = AutoModelForSequenceClassification.from_pretrained(out, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    enc = encoder(causal_lm)
    rows = enc.features([(r.prompt, resp.content) for r in records() for resp in r.responses])
    with torch.no_grad():
        expected = result.model(**collate(rows, hf.config.pad_token_id, "cpu"))
        for i, row in enumerate(rows):  # the standard class, row by row (it finds the last token by pad_token_id)
            assert hf(torch.tensor([row[0]])).logits[0, 0].item() == pytest.approx(expected[i].item(), abs=1e-4)
    assert not (out / LM_FOLDER).exists()


@pytest.mark.parametrize("lm_weight", [0.2, 0.0])
def test_keep_lm_head_saves_a_causal_lm_beside_the_reward_model(causal_lm, tmp_path, lm_weight):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    data = write_records(tmp_path / "train.jsonl", critiques=True, copies=1)
    out = tmp_path / "rm"
    target = "critique" if lm_weight else "chosen"
    more = {"lm_weight": lm_weight, "lm_target": target, "keep_lm_head": True, "epochs": 1}
    result = train_reward_model(load_config(None, settings(causal_lm, data, out, **more)))
    folder = out / LM_FOLDER
    lm, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    _, info = AutoModelForSequenceClassification.from_pretrained(out, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))  # the RM: no LM head
    assert AutoTokenizer.from_pretrained(folder).chat_template
    ids = torch.tensor([encoder(causal_lm).features([("你好", "你好")])[0][0]])
    rm = result.model
    with torch.no_grad():
        rm_hidden = rm.hf.model(input_ids=ids)[0]
        out_lm = lm(input_ids=ids, output_hidden_states=True)
        assert torch.allclose(out_lm.hidden_states[-1], rm_hidden, atol=1e-5)  # the trained backbone
        if lm_weight:  # the trained head
            assert torch.allclose(
                out_lm.logits, torch.nn.functional.linear(rm_hidden, rm.lm_weight_matrix()), atol=1e-4
            )
        else:  # the checkpoint's head, untouched
            original = AutoModelForCausalLM.from_pretrained(causal_lm)
            assert torch.equal(lm.lm_head.weight, original.lm_head.weight)
    assert "causal LM in `lm/`" in (out / "README.md").read_text()


def test_resume_refuses_a_run_with_another_lm_weight(causal_lm, tmp_path):
    data = write_records(tmp_path / "train.jsonl", copies=1)
    first = tmp_path / "first"
    train_reward_model(load_config(None, settings(causal_lm, data, first, epochs=1, save_every=1)))
    out = tmp_path / "rm"
    checkpoint = sorted((first / "checkpoints").iterdir())[0]
    shutil.copytree(checkpoint, out.with_name("rm.partial") / "checkpoints" / checkpoint.name)
    with pytest.raises(InputError, match="trained without --lm-weight: its state does not fit"):
        train_reward_model(load_config(None, settings(causal_lm, data, out, epochs=1, lm_weight=0.1, resume=True)))


def test_step_row_pools_the_lm_loss_by_tokens():
    class One:
        num_processes = 1

    base = {"loss": 1.0, "n": 2, "bt_loss": 0.5, "prior": 0.1, "accuracy": 1.0, "pairs": 1, "tokens": 10}
    window = [base | {"lm_loss": 2.0, "lm_tokens": 1}, base | {"lm_loss": 5.0, "lm_tokens": 2}, base]
    assert step_row(window, One(), 1, 0.5, 1e-3, None, 1.0)["lm_loss"] == pytest.approx(4.0)
    assert step_row([base], One(), 1, 0.5, 1e-3, None, 1.0)["lm_loss"] is None


# ---------------------------------------------------------------- the command line
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--lm-weight", "1"], "must be in [0, 1), got 1.0"),
        (["--lm-target", "critique"], "needs lm_weight > 0"),
        (["--lm-weight", "0.1", "--lm-target", "answer"], "unknown LM target 'answer'"),
    ],
)
def test_bad_lm_settings_are_one_line_and_write_nothing(tmp_path, args, said, monkeypatch, capsys):
    data = write_records(tmp_path / "train.jsonl", copies=1)
    proc = run_main("train", "-d", data, "-o", tmp_path / "rm", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, said)
    assert not (tmp_path / "rm").exists() and not (tmp_path / "rm.partial").exists()


def test_cheems_train_lm_weight_end_to_end_and_on_an_encoder(causal_lm, tmp_path, monkeypatch, capsys):
    data = write_records(tmp_path / "train.jsonl", copies=1)
    common = ("--epochs", "1", "--cpu", "--no-bf16", "--no-progress", "--max-length", "512")
    out = tmp_path / "rm"
    args = ("train", "-d", data, "-o", out, "-m", causal_lm, "--lm-weight", "0.01", "--keep-lm-head", *common)
    done = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "joint objective: (1-0.01)*BT + 0.01*LM, the next-token loss on the 5 best-ranked responses" in done.stderr
    assert (out / "model.safetensors").is_file() and (out / LM_FOLDER / "model.safetensors").is_file()
    bert = tiny_models.build_tiny_bert(tmp_path / "bert")
    args = ("train", "-d", data, "-o", tmp_path / "rm2", "-m", bert, "--lm-weight", "0.01", *common)
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "--lm-weight needs a causal language model")
    assert not (tmp_path / "rm2").exists()


def test_a_run_resumed_from_before_the_lm_loss_column_keeps_its_csv_header(tmp_path):
    import csv

    from cheems.train.logs import LOG_FIELDS, TrainLogger

    old = [f for f in LOG_FIELDS if f != "lm_loss"]
    path = tmp_path / "train_log.csv"
    path.write_text(",".join(old) + "\n" + ",".join("1" for _ in old) + "\n", encoding="utf-8")
    logger = TrainLogger(tmp_path, ["csv"], True, None, resume_step=1)
    logger.step(dict.fromkeys(LOG_FIELDS, 2) | {"step": 2, "lm_loss": None})
    rows = list(csv.reader(path.open(encoding="utf-8")))
    assert rows[0] == old and [len(r) for r in rows] == [len(old)] * 3
