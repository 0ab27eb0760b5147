"""The reward model (value head, pooling, saving) and the training config (YAML, presets, overrides)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import yaml

from cheems.errors import InputError
from cheems.train.config import LoraSettings, TrainConfig, load_config
from cheems.train.model import load_reward_model, save_reward_model

tiny_models = pytest.importorskip("tiny_models")


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    return tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return tiny_models.build_tiny_bert(tmp_path_factory.mktemp("bert"))


TEXTS = ["你好，世界", "一个更长一些的句子，用来测试左右两种填充方式是否给出同样的奖励"]


# ---------------------------------------------------------------- model


def test_causal_reward_reads_last_real_token_left_and_right_padding_alike(tiny_qwen):
    model, tok = load_reward_model(tiny_qwen)
    assert model.pooling == "last" and not model.encoder
    model.eval()
    rewards = {}
    for side in ("left", "right"):
        tok.padding_side = side
        batch = tok(TEXTS, return_tensors="pt", padding=True)
        with torch.no_grad():
            rewards[side] = model(batch["input_ids"], batch["attention_mask"])
    assert rewards["left"].shape == (2,)
    torch.testing.assert_close(rewards["left"], rewards["right"], atol=1e-5, rtol=1e-5)
    # each row alone (no padding at all) gives the same reward: the head reads the last real token
    for i, text in enumerate(TEXTS):
        one = tok([text], return_tensors="pt")
        with torch.no_grad():
            alone = model(one["input_ids"], one["attention_mask"])
        torch.testing.assert_close(alone[0], rewards["right"][i], atol=1e-5, rtol=1e-5)
        # ... and the standard Qwen2ForSequenceClassification forward agrees
        with torch.no_grad():
            standard = model.hf(**one).logits[0, 0]
        torch.testing.assert_close(alone[0], standard, atol=1e-5, rtol=1e-5)


def test_encoder_cls_pooling_is_the_standard_forward(tiny_bert):
    model, tok = load_reward_model(tiny_bert)
    assert model.encoder and model.pooling == "cls"
    model.eval()
    batch = tok(["问题"] * 2, TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        ours = model(**batch)
        standard = model.hf(**batch).logits[:, 0]
    torch.testing.assert_close(ours, standard)


def test_mean_pooling_is_recorded_and_honoured_on_reload(tiny_bert, tmp_path):
    model, tok = load_reward_model(tiny_bert, pooling="mean")
    model.eval()
    batch = tok(["问题"] * 2, TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        before = model(**batch)
        cls = model.hf(**batch).logits[:, 0]
    assert not torch.allclose(before, cls)
    save_reward_model(model, tok, tmp_path / "rm")
    assert json.loads((tmp_path / "rm" / "config.json").read_text())["cheems_pooling"] == "mean"
    again, _ = load_reward_model(tmp_path / "rm")
    assert again.pooling == "mean"
    again.eval()
    with torch.no_grad():
        torch.testing.assert_close(again(**batch), before)


def test_pooling_that_cannot_work_is_an_input_error(tiny_qwen):
    with pytest.raises(InputError, match="encoders"):
        load_reward_model(tiny_qwen, pooling="mean")


def test_saved_folder_is_a_standard_one_label_checkpoint(tmp_path):
    # a raw BertModel folder (like m3e-small) becomes BertForSequenceClassification with num_labels=1
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertModel

    from cheems.models import resolve_backbone

    tok = AutoTokenizer.from_pretrained(resolve_backbone("m3e-small"))
    torch.manual_seed(0)
    BertModel(
        BertConfig(
            vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
        )
    ).save_pretrained(tmp_path / "backbone")
    tok.save_pretrained(tmp_path / "backbone")
    model, tok = load_reward_model(tmp_path / "backbone")
    out = save_reward_model(model, tok, tmp_path / "rm")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert len(config["id2label"]) == 1 and "cheems_pooling" not in config
    assert (out / "model.safetensors").is_file() and (out / "tokenizer_config.json").is_file()
    plain = AutoModelForSequenceClassification.from_pretrained(out).eval()
    model.eval()
    batch = tok(["问题"], ["回答"], return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(plain(**batch).logits[:, 0], model(**batch))


HEAD = tiny_models.RELEASED_HEAD


@pytest.fixture(scope="module")
def released_rm(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    """Skywork-Reward-V2's layout in small: Qwen2ForSequenceClassification, one label, a trained score.weight."""
    return tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("released"), qwen2_tokenizer_dir, head=HEAD)


@pytest.mark.parametrize("lora", [False, True])
def test_a_released_reward_model_keeps_its_trained_head(released_rm, lora):
    if lora:
        pytest.importorskip("peft")
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    model, tok = load_reward_model(released_rm, lora=LoraSettings(enabled=lora, r=4, alpha=8))
    assert not model.new_head and model.head_weights() == ["score.weight"]
    saved = load_file(str(released_rm / "model.safetensors"))["score.weight"]
    assert torch.equal(saved, HEAD)
    head = model._head()
    assert torch.equal(getattr(head, "modules_to_save", {"default": head})["default"].weight, HEAD)
    # the rewards it starts from are the saved model's own, at its scale (a new head would give about 0)
    model.eval()
    standard = AutoModelForSequenceClassification.from_pretrained(released_rm).eval()
    for text in TEXTS:
        one = tok([text], return_tensors="pt")
        with torch.no_grad():
            ours, theirs = model(one["input_ids"], one["attention_mask"]), standard(**one).logits[:, 0]
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
        assert abs(float(theirs)) > 0.5


def test_a_base_lm_gets_a_new_head(tmp_path, qwen2_tokenizer_dir):
    lm = tiny_models.build_tiny_qwen2(tmp_path / "lm", qwen2_tokenizer_dir, causal_lm=True)
    model, _ = load_reward_model(lm)
    assert model.new_head and model.head_weights() == ["score.weight"]


def test_a_head_of_two_labels_is_one_input_error(tmp_path, qwen2_tokenizer_dir):
    two = tiny_models.build_tiny_qwen2(tmp_path / "two", qwen2_tokenizer_dir, head=torch.cat([HEAD, -HEAD]))
    with pytest.raises(InputError, match="num_labels=2; a reward model gives one score"):
        load_reward_model(two)


def test_lora_without_peft_says_how_to_install(tiny_bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # import peft -> ImportError
    with pytest.raises(InputError, match="pip install peft"):
        load_reward_model(tiny_bert, lora=LoraSettings(enabled=True))


def test_lora_trains_adapters_and_saves_a_merged_standard_model(tiny_bert, tmp_path):
    pytest.importorskip("peft")
    from transformers import AutoModelForSequenceClassification

    model, tok = load_reward_model(tiny_bert, lora=LoraSettings(enabled=True, r=4, alpha=8))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert any("lora_" in n for n in trainable) and any("classifier" in n for n in trainable)
    assert not any("word_embeddings" in n for n in trainable)
    with torch.no_grad():  # make the adapters matter
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    model.eval()
    batch = tok(["问题"], ["回答"], return_tensors="pt")
    with torch.no_grad():
        before = model(**batch)
    save_reward_model(model, tok, tmp_path / "rm")
    plain = AutoModelForSequenceClassification.from_pretrained(tmp_path / "rm").eval()
    with torch.no_grad():
        torch.testing.assert_close(plain(**batch).logits[:, 0], before, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- config


def write_yaml(path: Path, obj: dict) -> Path:
    path.write_text(yaml.safe_dump(obj, allow_unicode=True), encoding="utf-8")
    return path


def test_unknown_yaml_key_names_key_and_file(tmp_path):
    path = write_yaml(tmp_path / "c.yaml", {"epochs": 1, "learning_rate": 1e-5})
    with pytest.raises(InputError) as e:
        load_config(path)
    assert "learning_rate" in str(e.value) and f"{path}:" in str(e.value)
    path = write_yaml(tmp_path / "d.yaml", {"lora": {"enabled": True, "rank": 8}})
    with pytest.raises(InputError, match=r"lora\.rank") as e:
        load_config(path)
    assert f"{path}:" in str(e.value)
    path.write_text("epochs: 1\nseed: 3\nepochs: 2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"d\.yaml:3: field 'epochs': key 'epochs' given twice \(first on line 1\)"):
        load_config(path)


def test_bad_values_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="epochs"):
        load_config(write_yaml(tmp_path / "a.yaml", {"epochs": "two"}))
    with pytest.raises(InputError, match="truncation"):
        load_config(None, {"truncation": "right"})
    with pytest.raises(InputError, match="must be a YAML mapping"):
        load_config(write_yaml(tmp_path / "b.yaml", ["epochs", 1]))
    with pytest.raises(InputError, match="no such config file"):
        load_config(tmp_path / "missing.yaml")


def test_precedence_defaults_preset_yaml_cli(tmp_path, tiny_bert, tiny_qwen):
    # paper defaults for causal LMs, the small preset for encoders
    assert TrainConfig.for_backbone(str(tiny_qwen)).lr == 5e-6
    small = TrainConfig.for_backbone(str(tiny_bert))
    assert (small.lr, small.max_length) == (5e-5, 512)
    assert TrainConfig.for_backbone("m3e-small").lr == 5e-5
    path = write_yaml(
        tmp_path / "c.yaml",
        {"model": str(tiny_bert), "lr": "3e-5", "epochs": 3, "data": "a.jsonl", "lora": {"enabled": True, "r": 4}},
    )
    cfg = load_config(path, {"epochs": 1, "batch_size": None})
    assert cfg.lr == 3e-5  # YAML 1.1 reads 3e-5 as a string: coerced
    assert cfg.epochs == 1  # the command line wins
    assert cfg.batch_size == small.batch_size and cfg.max_length == 512  # preset where neither says
    assert cfg.data == ["a.jsonl"] and cfg.lora == LoraSettings(enabled=True, r=4)


def test_saved_config_loads_back_identical(tmp_path, tiny_bert):
    cfg = load_config(
        None,
        {
            "model": str(tiny_bert),
            "data": ["x.jsonl"],
            "eval_bench": ["b.jsonl"],
            "bf16": False,
            "logging": ["csv", "tensorboard"],
        },
    )
    cfg.save_yaml(tmp_path / "train_config.yaml")
    assert load_config(tmp_path / "train_config.yaml") == cfg
    # what one run was told to do with its folders is not part of the model's settings
    cfg.model_copy(update={"resume": True, "force": True, "overwrite": True}).save_yaml(tmp_path / "again.yaml")
    assert load_config(tmp_path / "again.yaml") == cfg


def test_schedule_is_transformers_cosine_with_warmup():
    from transformers import get_cosine_schedule_with_warmup

    from cheems.train.run_setup import cosine_schedule_with_warmup

    def lrs(make):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        sched = make(opt, 3, 17)
        out = []
        for _ in range(17):
            out.append(sched.get_last_lr()[0])
            opt.step()
            sched.step()
        return out

    assert lrs(cosine_schedule_with_warmup) == pytest.approx(lrs(get_cosine_schedule_with_warmup), abs=1e-12)


def test_shipped_configs_load():
    from accelerate.commands.config.config_args import ClusterConfig

    repo = Path(__file__).resolve().parents[1] / "configs"
    cfg = load_config(repo / "train_m3e_cpu.yaml", {"data": ["train.jsonl"]})
    assert cfg.model == "m3e-small" and cfg.lr == 5e-5 and cfg.max_length == 512
    ddp = ClusterConfig.from_yaml_file(repo / "accelerate_ddp.yaml")
    zero3 = ClusterConfig.from_yaml_file(repo / "accelerate_zero3.yaml")
    assert str(ddp.distributed_type).endswith("MULTI_GPU") and str(zero3.distributed_type).endswith("DEEPSPEED")
    ds_file = repo.parent / zero3.deepspeed_config["deepspeed_config_file"]
    ds = json.loads(ds_file.read_text())
    assert ds["zero_optimization"]["stage"] == 3 and ds["bf16"]["enabled"] == "auto"
    assert zero3.mixed_precision is None  # with a DeepSpeed file, precision comes from it (accelerate refuses both)
