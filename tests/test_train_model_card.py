"""Checkpoints that load anywhere (issue 33): every kind of model ``cheems train`` writes, read by plain
``transformers`` exactly as the model card it writes says, gives cheems' own scores (fp32, 1e-5).

One small training per kind (tiny models, a few records), shared by the tests through a module-scoped fixture.
The snippet run here is the one parsed out of the card (:func:`cheems.train.model_card.card_snippet`).
"""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

import cheems
from cheems.errors import InputError
from cheems.train.config import load_config
from cheems.train.model import load_reward_model, save_reward_model
from cheems.train.model_card import CARD_FILE, MEAN_NOT_PORTABLE, card_snippet
from cheems.train.trainer import train_reward_model
from test_train_trainer import cut_short, write_records

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)

tiny_models = pytest.importorskip("tiny_models")

# Short inputs: nothing is truncated, so the test reads the format and the token, not the truncation rule.
TEXT_ITEMS = [
    ("第1个问题：请回答。", "这个回答准确清楚，很好。"),
    ("第1个问题：请回答。", "答非所问，很差。"),
    ("北京是哪个国家的首都？", "北京是中国的首都。"),
    ("Hello world", "The answer needs a short and clear reply."),
]
DIALOGUE = [
    {"role": "system", "content": "你是一个乐于助人的助手。"},
    {"role": "user", "content": "北京是哪个国家的首都？"},
    {"role": "assistant", "content": "中国。"},
    {"role": "user", "content": "那上海呢？"},
]
CHAT_ITEMS = [*TEXT_ITEMS, (DIALOGUE, "上海不是首都，是中国最大的城市之一。")]

# kind -> (the model it starts from, the run's settings beyond the shared ones)
KINDS = {
    "encoder-cls": ("bert", {"packing": "none"}),
    "encoder-length-head": ("bert", {"length_head": True, "packing": "none"}),
    "causal-last": ("qwen", {"packing": "none"}),
    "causal-packed": ("qwen", {"packing": "auto"}),
    "causal-lora-merged": ("qwen", {"packing": "none", "lora": {"enabled": True, "r": 4, "alpha": 8}}),
    "released-rm-trained-further": ("released", {"packing": "auto"}),
    "causal-eos-ends-the-turn": ("eos-ends", {"packing": "none"}),
    "causal-lm-weight": ("causal-lm", {"packing": "auto", "lm_weight": 0.1, "keep_lm_head": True}),
}


@dataclass
class Trained:
    folder: Path
    said: str
    """What the run printed."""
    steps: int

    @property
    def card(self) -> str:
        return (self.folder / CARD_FILE).read_text(encoding="utf-8")

    @property
    def config(self) -> dict:
        return json.loads((self.folder / "config.json").read_text(encoding="utf-8"))


def eos_ends_the_turn(tokenizer_dir: Path, folder: Path) -> Path:
    """Llama 3's layout in small: no pad token, and the chat template closes the assistant turn with eos."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.pad_token = None
    tokenizer.chat_template = tiny_models.CHAT_TEMPLATE.replace("'<|im_end|>' + '\n'", "'<|im_end|>'")
    assert tokenizer.chat_template != tiny_models.CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def bases(tmp_path_factory, qwen2_tokenizer_dir) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bases")
    eos_tokenizer = eos_ends_the_turn(qwen2_tokenizer_dir, root / "eos-tokenizer")
    return {
        "eos-ends": tiny_models.build_tiny_qwen2(root / "eos-ends", eos_tokenizer),
        "bert": tiny_models.build_tiny_bert(root / "bert"),
        "qwen": tiny_models.build_tiny_qwen2(root / "qwen", qwen2_tokenizer_dir),
        "causal-lm": tiny_models.build_tiny_qwen2(root / "causal-lm", qwen2_tokenizer_dir, causal_lm=True),
        "released": tiny_models.build_tiny_qwen2(
            root / "released", qwen2_tokenizer_dir, head=tiny_models.RELEASED_HEAD
        ),
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_records(tmp_path_factory.mktemp("data") / "train.jsonl", 6)


def train(base: Path, data: Path, output: Path, **settings) -> Trained:
    """One small fp32 CPU run with its console captured."""
    from rich.console import Console

    shared = {"epochs": 1, "batch_size": 6, "lr": 1e-3, "max_length": 128, "progress": False, "bf16": False}
    config = load_config(
        None, {"model": str(base), "data": [str(data)], "output": str(output), "cpu": True, **shared, **settings}
    )
    buffer = io.StringIO()
    result = train_reward_model(config, console=Console(file=buffer, width=1000))
    return Trained(output, buffer.getvalue(), result.global_step)


@pytest.fixture(scope="module", params=sorted(KINDS))
def trained(request, bases, data, tmp_path_factory) -> Trained:
    base, settings = KINDS[request.param]
    if "lora" in settings:
        pytest.importorskip("peft")
    return train(bases[base], data, tmp_path_factory.mktemp(request.param) / "rm", **settings)


def card_reward(card: str):
    """``reward(prompt, response)`` as the card's own snippet defines it (run as a user pastes it)."""
    namespace: dict = {}
    exec(compile(card_snippet(card), CARD_FILE, "exec"), namespace)
    return namespace["reward"]


def test_plain_transformers_fed_as_the_card_says_gives_cheems_scores(trained, capsys):
    assert trained.steps >= 1
    items = CHAT_ITEMS if trained.config["cheems_format"] == "chat" else TEXT_ITEMS
    reward = card_reward(trained.card)
    capsys.readouterr()  # the snippet's example line
    theirs = [reward(prompt, response) for prompt, response in items]
    ours = cheems.load_scorer(str(trained.folder), dtype="fp32").score(items)
    assert theirs == pytest.approx(ours, abs=1e-5)
    assert max(theirs) - min(theirs) > 1e-4  # the items score apart, far beyond the tolerance


def test_what_leaves_cheems_is_what_other_tools_need(trained):
    from transformers import AutoTokenizer

    config = trained.config
    assert config.get("num_labels", 1) == 1 and len(config["id2label"]) == 1  # transformers 5 keeps id2label only
    assert config["architectures"][0].endswith("ForSequenceClassification")
    assert isinstance(config["pad_token_id"], int)  # HF's causal classes find the last token through it
    tokenizer = AutoTokenizer.from_pretrained(trained.folder)
    assert tokenizer.pad_token_id == config["pad_token_id"]
    if config["cheems_format"] == "chat":
        assert tokenizer.chat_template  # saved with the tokenizer: the card's input format needs it
        assert "chat template" in trained.card and "no special tokens added" in trained.card
    else:
        assert "`tokenizer(prompt, response)`" in trained.card
    assert MEAN_NOT_PORTABLE not in trained.said


def test_the_card_is_a_hugging_face_model_card(trained, data):
    card = trained.card
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["library_name"] == "transformers" and front["pipeline_tag"] == "text-classification"
    assert {"reward-model", "cheems"} <= set(front["tags"])
    assert "base_model" not in front  # a local folder, not a Hub repo id
    chat = trained.config["cheems_format"] == "chat"
    assert "raw logit" in card and "**128 tokens**" in card
    assert ("from its start" if chat else "from the prompt's start") in card
    assert ("**last token**" if chat else "**first token** (`[CLS]`)") in card
    assert f"`{data.name}` ({data.stat().st_size:,} bytes)" in card
    assert f"{trained.steps:,} optimizer steps" in card


def test_mean_pooling_is_said_at_the_start_and_the_card_reads_it(bases, data, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    run = train(bases["bert"], data, tmp_path / "rm", pooling="mean", packing="none")
    lines = run.said.splitlines()
    assert lines.count(MEAN_NOT_PORTABLE) == 1
    assert lines.index(MEAN_NOT_PORTABLE) < next(i for i, line in enumerate(lines) if line.startswith("epoch 1/"))
    assert "**Not portable**" in run.card and "TRL, OpenRLHF, vLLM and verl" in run.card
    reward = card_reward(run.card)
    capsys.readouterr()
    model, tokenizer = load_reward_model(run.folder)  # honours cheems_pooling, as training did
    model.eval()
    plain = AutoModelForSequenceClassification.from_pretrained(run.folder).eval()
    plain_tokenizer = AutoTokenizer.from_pretrained(run.folder)
    for prompt, response in TEXT_ITEMS:
        batch = tokenizer(prompt, response, return_tensors="pt")
        with torch.no_grad():
            trained_reward = float(model(**batch))
            standard = float(plain(**plain_tokenizer(prompt, response, return_tensors="pt")).logits[0, 0])
        assert reward(prompt, response) == pytest.approx(trained_reward, abs=1e-5)  # the card's recipe
        assert abs(standard - trained_reward) > 1e-3  # what every standard loader reads instead


def test_a_readme_cheems_did_not_write_is_never_replaced(bases, tmp_path):
    model, tokenizer = load_reward_model(bases["bert"])
    folder = tmp_path / "rm"
    folder.mkdir()
    (folder / CARD_FILE).write_text("# my notes\n", encoding="utf-8")
    with pytest.raises(InputError, match="is not a model card cheems wrote"):
        save_reward_model(model, tokenizer, folder)
    assert sorted(p.name for p in folder.iterdir()) == [CARD_FILE]  # nothing written
    assert (folder / CARD_FILE).read_text(encoding="utf-8") == "# my notes\n"
    save_reward_model(model, tokenizer, tmp_path / "again")
    save_reward_model(model, tokenizer, tmp_path / "again")  # its own card it rewrites
    assert "## How the reward is read" in (tmp_path / "again" / CARD_FILE).read_text(encoding="utf-8")


def test_a_resumed_run_rewrites_its_own_card_only(bases, tmp_path):
    small = write_records(tmp_path / "train.jsonl", 4)
    done = train(bases["bert"], small, tmp_path / "done", packing="none", batch_size=4, save_every=1).folder
    checkpoint = sorted((done / "checkpoints").iterdir())[0]
    out = tmp_path / "rm"
    work = cut_short(checkpoint, out).parent.parent
    (work / CARD_FILE).write_text("# my notes\n", encoding="utf-8")
    with pytest.raises(InputError, match="is not a model card cheems wrote"):
        train(bases["bert"], small, out, packing="none", batch_size=4, resume=True)
    assert (work / CARD_FILE).read_text(encoding="utf-8") == "# my notes\n" and not out.exists()
    shutil.copy(done / CARD_FILE, work / CARD_FILE)  # a card of its own (the run died after writing it)
    train(bases["bert"], small, out, packing="none", batch_size=4, resume=True)
    card = (out / CARD_FILE).read_text(encoding="utf-8")
    assert f"folder = {str(out)!r}" in card and str(done) not in card  # rewritten for this run


def test_the_base_model_is_card_metadata_only_when_it_is_a_hub_repo_id(tmp_path, monkeypatch):
    from transformers import BertConfig

    from cheems.train.model_card import TrainingFacts, model_card

    def front(base_model: str) -> dict:
        facts = TrainingFacts(base_model=base_model, output="rm", data=[("train.jsonl", 1234)], records=3, pairs=5)
        card = model_card(BertConfig(), chat=False, pooling="cls", max_length=512, folder="rm", training=facts)
        assert f"Base model: `{base_model}`" in card and "`train.jsonl` (1,234 bytes): 3 records, 5" in card
        return yaml.safe_load(card.split("---\n")[1])

    assert front("Skywork/Skywork-Reward-V2-Qwen3-0.6B")["base_model"] == "Skywork/Skywork-Reward-V2-Qwen3-0.6B"
    assert "base_model" not in front("m3e-small")  # a cheems alias
    (tmp_path / "org" / "name").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert "base_model" not in front("org/name")  # a local folder of that shape
