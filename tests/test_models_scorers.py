"""Scorers: tiny random Hugging Face RMs with Qwen2-style and m3e tokenizers, the length and similarity baselines."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError
from tokenizers import processors
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertModel

from cheems.data.schema import Message
from cheems.errors import InputError
from cheems.models import LengthScorer, hf, load_scorer, resolve_backbone
from tiny_models import TINY, build_tiny_bert, build_tiny_qwen2

SHORT = ("你好", "你好！")
MEDIUM = ("请用一句话解释什么是奖励模型。", "奖励模型给回答打分，分数越高说明回答越符合人类偏好。")
LONG = ("请详细介绍一下长城的历史。" * 10, "长城始建于春秋战国时期，" * 30)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    return build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir)


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("bert"))


@pytest.fixture
def big_batches(monkeypatch):
    """Put all test items in one padded batch (the CPU default keeps batches small)."""
    monkeypatch.setattr(hf, "CPU_BATCH_TOKENS", 10**6)


def variant(src: Path, dst: Path, **tokenizer_config) -> Path:
    """A copy of a model folder with some tokenizer_config.json keys changed."""
    shutil.copytree(src, dst)
    path = dst / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config.update(tokenizer_config)
    path.write_text(json.dumps(config))
    return dst


def last_token_reward(model_dir: Path, ids: list[int]) -> float:
    """Reference: the model's score head on the last token of one unpadded sequence."""
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.inference_mode():
        hidden = model.base_model(input_ids=torch.tensor([ids])).last_hidden_state
        return model.score(hidden[0, -1]).item()


# ---------------------------------------------------------------- causal LM (Qwen2) reward models


@pytest.mark.parametrize("side", ["left", "right"])
def test_causal_score_does_not_depend_on_padding(qwen, tmp_path, side, big_batches):
    folder = variant(qwen, tmp_path / side, padding_side=side)
    scorer = load_scorer(str(folder), batch_size=64, dtype="fp32")
    batch = scorer.score([LONG, MEDIUM, SHORT, LONG[::-1]])
    alone = [scorer.score([item])[0] for item in (LONG, MEDIUM, SHORT)]
    assert batch[:3] == pytest.approx(alone, abs=1e-5)
    # and it is the model's own reading: the score head at the last token, as HF does unpadded
    ids = scorer.encode([MEDIUM])[0][0]
    reference = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.inference_mode():
        assert reference(input_ids=torch.tensor([ids])).logits[0, 0].item() == pytest.approx(alone[1], abs=1e-5)


def test_causal_score_is_right_when_pad_is_eos(qwen, tmp_path, big_batches):
    # pad == eos and every text ends in eos: guessing the last token from pad ids would be wrong.
    folder = variant(qwen, tmp_path / "pad-eos", pad_token="<|im_end|>")
    template = (folder / "chat_template.jinja").read_text()
    assert "'<|im_end|>' + '\n'" in template
    (folder / "chat_template.jinja").write_text(template.replace("'<|im_end|>' + '\n'", "'<|im_end|>'"))
    scorer = load_scorer(str(folder), batch_size=64, dtype="fp32")
    ids = scorer.encode([MEDIUM])[0][0]
    assert ids[-1] == scorer.tokenizer.pad_token_id == scorer.tokenizer.eos_token_id
    batch = scorer.score([LONG, MEDIUM, SHORT])
    assert batch[1] == pytest.approx(last_token_reward(folder, ids), abs=1e-5)


def test_bf16_autocast_is_close_to_fp32(qwen):
    items = [MEDIUM, SHORT]  # short: bf16 is emulated (slow) on CPUs without bf16 units
    fp32 = load_scorer(str(qwen), dtype="fp32").score(items)
    bf16 = load_scorer(str(qwen), dtype="bf16").score(items)
    assert bf16 == pytest.approx(fp32, abs=5e-3)


def test_chat_template_applied_once(qwen):
    scorer = load_scorer(str(qwen))
    prompt = [
        Message(role="user", content="1+1等于几？"),
        Message(role="assistant", content="2"),
        Message(role="user", content="再加1呢？"),
    ]
    ids = scorer.encode([(prompt, "等于3。")])[0][0]
    text = scorer.tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\n")
    assert text.count("<|im_start|>") == 5  # system + 3 prompt turns + the response, nothing doubled
    assert "<|im_start|>user\n1+1等于几？<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n" in text
    assert text.endswith("<|im_start|>user\n再加1呢？<|im_end|>\n<|im_start|>assistant\n等于3。<|im_end|>\n")


def test_no_doubled_bos_when_tokenizer_and_template_both_add_it(qwen, tmp_path):
    # A Llama-3-like setup: the template writes BOS and the tokenizer adds BOS on encode too.
    tok = AutoTokenizer.from_pretrained(qwen)
    bos = "<|endoftext|>"
    bos_id = tok.convert_tokens_to_ids(bos)
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)]
    )
    tok.bos_token = bos
    tok.chat_template = "{{ bos_token }}" + tok.chat_template
    folder = tmp_path / "bos"
    shutil.copytree(qwen, folder)
    tok.save_pretrained(folder)
    scorer = load_scorer(str(folder))
    assert scorer.tokenizer("x")["input_ids"][0] == bos_id  # the trap is armed
    ids = scorer.encode([MEDIUM])[0][0]
    assert ids[0] == bos_id and ids[1] != bos_id
    assert ids[1] == scorer.tokenizer.convert_tokens_to_ids("<|im_start|>")


def test_causal_truncation_keeps_the_end(qwen):
    scorer = load_scorer(str(qwen), max_length=32)
    ids = scorer.encode([("很长的问题" * 100, "简短的回答。")])[0][0]
    assert len(ids) == 32
    assert scorer.tokenizer.decode(ids).endswith("<|im_start|>assistant\n简短的回答。<|im_end|>\n")


# ---------------------------------------------------------------- encoder (BERT) reward models


def test_encoder_text_pair(bert):
    scorer = load_scorer(str(bert))
    ids, types = scorer.encode([("中国的首都是哪里？", "北京。")])[0]
    tok = scorer.tokenizer
    assert tok.convert_ids_to_tokens(ids) == [
        "[CLS]",
        "中",
        "国",
        "的",
        "首",
        "都",
        "是",
        "哪",
        "里",
        "？",
        "[SEP]",
        "北",
        "京",
        "。",
        "[SEP]",
    ]
    assert types == [0] * 11 + [1] * 4


def test_encoder_truncation_cuts_the_prompt_and_keeps_the_response(bert):
    scorer = load_scorer(str(bert), max_length=4096)  # capped to the model's 512 positions
    response = "答案是四十二，因为这是宇宙的终极答案。"
    ids, types = scorer.encode([("问" * 2000, response)])[0]
    assert len(ids) == 512
    tok = scorer.tokenizer
    assert tok.decode([i for i, t in zip(ids, types) if t == 1], skip_special_tokens=True).replace(" ", "") == response
    # a response too long on its own is cut as well, never crashes
    ids, _ = scorer.encode([("问题", "答" * 2000)])[0]
    assert len(ids) == 512


def test_encoder_score_does_not_depend_on_padding(bert, big_batches):
    scorer = load_scorer(str(bert), batch_size=64, dtype="fp32")
    batch = scorer.score([LONG, MEDIUM, SHORT])
    alone = [scorer.score([item])[0] for item in (LONG, MEDIUM, SHORT)]
    assert batch == pytest.approx(alone, abs=1e-5)


def test_backbone_without_head_warns_once_and_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setattr(hf, "_warned_no_head", set())
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=21128, num_attention_heads=2, **TINY)).save_pretrained(tmp_path)
    shutil.copy(Path(resolve_backbone("m3e-small")) / "tokenizer.json", tmp_path)
    shutil.copy(Path(resolve_backbone("m3e-small")) / "tokenizer_config.json", tmp_path)
    with pytest.warns(UserWarning, match="random value head"):
        first = load_scorer(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = load_scorer(str(tmp_path))
    assert first.score([MEDIUM]) == second.score([MEDIUM])  # the random head is seeded: cacheable


def test_m3e_small_alias_resolves_without_loading(monkeypatch):
    monkeypatch.setattr(hf, "_warned_no_head", set())
    with pytest.warns(UserWarning, match="BertModel"):
        scorer = load_scorer("m3e-small")
    assert scorer.source.location == str(Path(resolve_backbone("m3e-small")).resolve())
    assert scorer._model is None


# ---------------------------------------------------------------- fingerprints


def test_fingerprint_reads_no_weights_and_tracks_settings_and_files(bert, tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(bert, folder)
    (folder / "model.safetensors").write_bytes(b"not weights")  # any attempt to load would fail
    scorer = load_scorer(str(folder))
    fp = scorer.fingerprint()
    assert fp == load_scorer(str(folder)).fingerprint()
    assert fp != load_scorer(str(folder), max_length=256).fingerprint()
    assert fp != load_scorer(str(folder), dtype="fp32").fingerprint()
    assert fp != load_scorer(str(bert)).fingerprint()  # different weight file
    assert fp != load_scorer(f"similarity:{folder}").fingerprint()
    with pytest.raises(SafetensorError):
        scorer.score([MEDIUM])


# ---------------------------------------------------------------- errors


def test_classifier_with_two_labels_is_refused(bert, tmp_path):
    folder = tmp_path / "two"
    shutil.copytree(bert, folder)
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"0": "bad", "1": "good"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="num_labels=2"):
        load_scorer(str(folder))


def test_missing_folder_and_bad_specs(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_scorer(str(tmp_path / "nope"))
    with pytest.raises(InputError, match="no config.json"):
        load_scorer(str(tmp_path))
    with pytest.raises(InputError, match="needs an encoder"):
        load_scorer("similarity:")
    with pytest.raises(InputError, match="unknown dtype"):
        load_scorer("length", dtype="int4")


def test_unknown_hub_id_offline_is_a_clear_error(monkeypatch, tmp_path):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import time
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(InputError, match="not in the Hugging Face cache.*offline") as e:
        load_scorer("cheems-test/no-such-reward-model")
    assert "local folder" in str(e.value)
    with pytest.raises(InputError, match="valid Hugging Face hub id"):
        load_scorer("not a model")


# ---------------------------------------------------------------- baselines


def test_length_batches_sort_and_cap():
    from cheems.models.base import length_batches

    assert length_batches([5, 300, 10, 290, 7], batch_size=2, max_tokens=1000) == [[1, 3], [2, 4], [0]]
    assert length_batches([5, 300, 10, 290, 7], batch_size=8, max_tokens=600) == [[1, 3], [2, 4, 0]]
    assert length_batches([900], batch_size=8, max_tokens=10) == [[0]]  # one item always fits


def test_length_scorer():
    scorer = load_scorer("length")
    assert isinstance(scorer, LengthScorer)
    assert scorer.score([("问题", "三个字"), ([Message(role="user", content="x")], "")]) == [3.0, 0.0]


def test_similarity_prefers_the_relevant_answer():
    scorer = load_scorer("similarity:m3e-small")
    prompt = "怎样用电饭锅煮米饭？"
    relevant = "先把大米淘洗干净，按一比一点二的比例加水，放进电饭锅按下煮饭键，跳闸后再焖十分钟即可。"
    irrelevant = "今天股市大盘上涨了百分之二，科技板块领涨，成交量明显放大。"
    rel, irr = scorer.score([(prompt, relevant), (prompt, irrelevant)])
    assert -1.0 <= irr < rel <= 1.0
    assert rel - irr > 0.1


def test_one_encoder_check_reads_config_json_and_transformers_configs():
    from transformers import Qwen2Config

    from cheems.models.backbones import is_encoder_config

    assert is_encoder_config({"model_type": "bert"}) and is_encoder_config(BertConfig())
    assert not is_encoder_config({"model_type": "bert", "is_decoder": True}) and not is_encoder_config(Qwen2Config())


def test_bench_scores_do_not_depend_on_batch_size(qwen, big_batches):
    """reward-bench #137: the same bench scored 1 and 16 responses at a time gives the same scores and metrics."""
    from cheems.evaluate import evaluate_scores, load_bench
    from cheems.models import score_records

    bench = load_bench([Path(__file__).parents[1] / "src/cheems/assets/demo/human.jsonl"])
    bench = {name: records[:12] for name, records in bench.items()}
    records = [r for rs in bench.values() for r in rs]
    one, sixteen = (
        score_records(records, load_scorer(str(qwen), batch_size=n, dtype="fp32"), progress=False) for n in (1, 16)
    )
    assert one.keys() == sixteen.keys() and len(one) > 16
    assert [sixteen[k] for k in one] == pytest.approx(list(one.values()), abs=1e-5)
    a, b = evaluate_scores(bench, one).to_dict(), evaluate_scores(bench, sixteen).to_dict()
    # every comparison comes out the same; ECE averages the margins, so it moves in the 9th digit
    assert a["subsets"]["human"].pop("ece") == pytest.approx(b["subsets"]["human"].pop("ece"), abs=1e-6)
    assert a == b
