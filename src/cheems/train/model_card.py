"""The model card (``README.md``) ``cheems train`` writes beside the model it saves.

The card says what a tool outside cheems needs to read the reward as cheems does: the raw logit of the one
label, the token it is read at, the input format (the chat template, or a text pair), the max length and the
truncation side, plus the base model and the training data. Its Python snippet (:func:`reward_snippet`) is
plain ``transformers``; the portability test runs the snippet parsed out of the card, so the card and the
test cannot drift apart.

Mean pooling (``cheems_pooling: mean`` in config.json) is cheems' own: every standard loader reads the
``[CLS]`` token through the pooler instead (:data:`MEAN_NOT_PORTABLE`, said when training starts).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cheems.data.io import write_text
from cheems.errors import InputError

CARD_FILE = "README.md"
CARD_MARK = "<!-- cheems-model-card: written by cheems train, rewritten when it trains into this folder again -->"
"""The line that tells the card cheems wrote from a README.md of someone else's (never overwritten)."""

MEAN_NOT_PORTABLE = (
    "warning: mean pooling is cheems' own (cheems_pooling: mean in config.json): plain transformers, TRL, "
    "OpenRLHF, vLLM and verl read this model's [CLS] token through its pooler instead and give other rewards; "
    "train with --pooling cls for a model that loads anywhere"
)
"""The one line ``cheems train`` says at the start of a mean-pooled run."""

EXAMPLE = ("北京是哪个国家的首都？", "北京是中国的首都。")


@dataclass
class TrainingFacts:
    """What the card says about the run: the base model, the data and how long it trained."""

    base_model: str
    """``--model`` as given."""
    output: str
    """``--output`` as given: the folder the snippet loads."""
    data: list[tuple[str, int]] = field(default_factory=list)
    """Each training file's name and size in bytes."""
    records: int = 0
    pairs: int = 0
    steps: int = 0
    epochs: int = 0
    notes: list[str] = field(default_factory=list)
    """How the run differs from a plain one that matters to a reader (LoRA merged, length head dropped)."""


def training_facts(config: Any, summary: Any, steps: int) -> TrainingFacts:
    """The card's :class:`TrainingFacts` of a run: its ``TrainConfig``, ``DataSummary`` and optimizer steps."""
    notes = []
    if config.lora.enabled:
        notes.append(f"LoRA (r={config.lora.r}, alpha={config.lora.alpha}), merged into the saved weights")
    if config.length_head:
        notes.append("length head (ODIN) trained beside the reward head and left out of the saved model")
    if config.lm_weight:
        target = "each prompt's best-ranked responses" if config.lm_target == "chosen" else "supplied critiques"
        notes.append(
            f"joint objective (1 − {config.lm_weight:g})·Bradley–Terry + {config.lm_weight:g}·next-token loss on "
            f"{target}, on the same backbone"
        )
    if config.keep_lm_head:
        notes.append("the backbone with its language-model head is saved as a causal LM in `lm/`")
    return TrainingFacts(
        base_model=config.model,
        output=config.output,
        data=[(Path(p).name, os.path.getsize(p)) for p in config.data],
        records=summary.records,
        pairs=summary.pairs,
        steps=steps,
        epochs=config.epochs,
        notes=notes,
    )


def reward_snippet(folder: str, *, chat: bool, pooling: str, max_length: int) -> str:
    """Plain ``transformers`` code that defines ``reward(prompt, response) -> float`` as cheems scores it.

    ``chat``: the chat template with the response as the assistant turn, no special tokens added; else a text
    pair. A long input loses tokens from its start (the prompt's), so the response's end stays. ``pooling`` mean
    reads the masked mean of the last hidden states (cheems' own); otherwise the model's own forward.
    """
    if chat:
        prompt_doc = "the user's text, or the dialogue so far as chat messages"
        encode = (
            '    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)\n'
            '    messages.append({"role": "assistant", "content": response})\n'
            "    text = tokenizer.apply_chat_template(messages, tokenize=False)\n"
            f"    inputs = tokenizer(text, add_special_tokens=False, truncation=True, max_length={max_length}, "
            'return_tensors="pt")\n'
        )
    else:
        prompt_doc = "text"
        encode = (
            f'    inputs = tokenizer(prompt, response, truncation="only_first", max_length={max_length}, '
            'return_tensors="pt")\n'
        )
    if pooling == "mean":
        read = (
            "        hidden = model.base_model(**inputs).last_hidden_state  # mean pooling: not the model's forward\n"
            '        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)\n'
            "        return model.classifier((hidden * mask).sum(1) / mask.sum(1))[0, 0].item()\n"
        )
    else:
        read = "        return model(**inputs).logits[0, 0].item()  # the raw logit: no sigmoid\n"
    return (
        "import torch\n"
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n\n"
        f"folder = {folder!r}  # this folder, or its Hub repo id once uploaded\n"
        "tokenizer = AutoTokenizer.from_pretrained(folder)\n"
        'tokenizer.truncation_side = "left"  # a long input loses its start: the end of the response stays\n'
        "model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()\n\n\n"
        "def reward(prompt, response):\n"
        f'    """The reward of ``response`` to ``prompt`` ({prompt_doc})."""\n'
        f"{encode}"
        "    with torch.no_grad():\n"
        f"{read}\n\n"
        f"print(reward({EXAMPLE[0]!r}, {EXAMPLE[1]!r}))\n"
    )


def _front_matter(base_model: str | None) -> str:
    """Hugging Face's card metadata; ``base_model`` only when it is a Hub repo id (a local path means nothing there)."""
    lines = ["---", "library_name: transformers", "pipeline_tag: text-classification", "tags:"]
    lines += ["- reward-model", "- cheems"]
    if base_model and re.fullmatch(r"[\w.-]+/[\w.-]+", base_model) and not Path(base_model).exists():
        lines.append(f"base_model: {base_model}")
    return "\n".join([*lines, "---"])


def _token_read(pooling: str, config: Any) -> str:
    """Which hidden state the reward is read from, in words."""
    if pooling == "last":
        pad = getattr(config, "pad_token_id", None)
        return (
            "the **last token** of the input (the end of the assistant turn the chat template writes). "
            "`*ForSequenceClassification` finds it as the last token that is not the padding token "
            f"(`pad_token_id: {pad}` in config.json), so batches may be padded on either side"
        )
    if pooling == "cls":
        return (
            "the **first token** (`[CLS]`) through the model's pooler and classifier: the standard "
            f"`{_class_name(config)}` forward"
        )
    return (
        "the **mean of the last hidden states** over the real tokens, then the classifier. **Not portable**: "
        "this pooling is cheems' own (`cheems_pooling: mean` in config.json). `cheems score` reads it, but plain "
        "transformers, TRL, OpenRLHF, vLLM and verl read the `[CLS]` token through the pooler instead and give "
        "other rewards; use the snippet below, or train with `--pooling cls`"
    )


def _class_name(config: Any) -> str:
    """The model class config.json names (``BertForSequenceClassification``)."""
    return str((getattr(config, "architectures", None) or ["*ForSequenceClassification"])[0])


def _input_format(chat: bool, max_length: int) -> str:
    """The input format, max length and truncation, in words."""
    if chat:
        return (
            "the prompt and the response go through the tokenizer's **chat template** (saved with the tokenizer) "
            "with the response as the last, assistant turn, and are tokenized with **no special tokens added** "
            "(the template writes its own); a system prompt is the first message. At most "
            f"**{max_length} tokens**: a longer input loses tokens **from its start** (`truncation_side = "
            '"left"`), so the end of the response, where the reward is read, always stays.'
        )
    return (
        "a **text pair**, `tokenizer(prompt, response)` (`[CLS] prompt [SEP] response [SEP]`); a system prompt "
        "comes first as its own paragraph, a dialogue is one `role: content` line per turn. At most "
        f"**{max_length} tokens**: a longer input loses tokens **from the prompt's start** (`truncation_side = "
        '"left"`, `truncation="only_first"`), so the response stays whole.'
    )


def _training(facts: TrainingFacts | None) -> list[str]:
    """The card's lines about the base model and the data (none when the folder was saved outside a run)."""
    if facts is None:
        return []
    files = ", ".join(f"`{name}` ({size:,} bytes)" for name, size in facts.data) or "none"
    lines = [
        "## Training",
        "",
        f"- Base model: `{facts.base_model}`",
        f"- Data: {files}: {facts.records:,} records, {facts.pairs:,} preference pairs",
        f"- {facts.steps:,} optimizer steps, {facts.epochs} epoch{'s' if facts.epochs != 1 else ''} (listwise "
        "Bradley–Terry loss)",
    ]
    return [*lines, *(f"- {note}" for note in facts.notes), ""]


def model_card(
    config: Any, *, chat: bool, pooling: str, max_length: int, folder: str, training: TrainingFacts | None = None
) -> str:
    """The card's text for a saved model: ``config`` (its HF config), its input format (``chat``), ``pooling``
    (``last``/``cls``/``mean``), ``max_length``, the ``folder`` its snippet loads, and the run's facts."""
    snippet = reward_snippet(folder, chat=chat, pooling=pooling, max_length=max_length)
    name = Path(folder).name or folder
    lines = [
        _front_matter(training.base_model if training else None),
        CARD_MARK,
        "",
        f"# {name}",
        "",
        "A reward model trained with `cheems train` (the cheems package): it gives one scalar reward for a (prompt, "
        "response); a higher reward means a better response.",
        "",
        "## How the reward is read",
        "",
        "- The reward is the **raw logit** of the model's one label (`num_labels: 1`), read at "
        f"{_token_read(pooling, config)}.",
        '- No sigmoid: `pipeline("text-classification")` applies one to one-label models unless given '
        '`function_to_apply="none"`, and vLLM\'s classify API unless served with '
        "`--pooler-config '{\"use_activation\": false}'`.",
        f"- Input: {_input_format(chat, max_length)}",
        "",
        *_training(training),
        "## Use it with plain transformers",
        "",
        "```python",
        snippet.rstrip("\n"),
        "```",
        "",
    ]
    return "\n".join(lines)


def card_snippet(card: str) -> str:
    """The Python snippet of a card written by :func:`model_card` (what the portability test runs)."""
    found = re.search(r"```python\n(.*?)\n```", card, re.DOTALL)
    if found is None:
        raise ValueError("the card has no python snippet")
    return found.group(1) + "\n"


def check_card_free(directory: str | Path) -> None:
    """Refuse to go on when ``directory`` holds a README.md cheems did not write: the card never replaces it."""
    path = Path(directory) / CARD_FILE
    if not path.exists():
        return
    try:
        ours = CARD_MARK in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        ours = False
    if not ours:
        raise InputError(
            "is not a model card cheems wrote: saving the model would replace it",
            path=str(path),
            hint="move the file out of the folder, then rerun",
        )


def write_model_card(directory: str | Path, card: str) -> Path:
    """Write ``card`` as ``directory/README.md`` atomically; a README.md cheems did not write is refused."""
    check_card_free(directory)
    path = Path(directory) / CARD_FILE
    write_text(path, card)
    return path
