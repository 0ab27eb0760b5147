"""Tiny random-weight reward models saved as Hugging Face folders, for fast offline tests.

Shapes are real (the Qwen2 and m3e tokenizers, Qwen2's padded 151,936-row vocabulary), sizes are
not (2 layers, hidden 64), so loading and scoring take well under a second.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2ForSequenceClassification,
)

from cheems.models import resolve_backbone

TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}


def build_tiny_qwen2(dir: str | Path, tokenizer_dir: str | Path, seed: int = 0, *, causal_lm: bool = False) -> Path:
    """A random Qwen2ForSequenceClassification (num_labels=1) with the shared Qwen2 tokenizer, saved in ``dir``;
    with ``causal_lm``, a random Qwen2ForCausalLM (its own LM head) for generation."""
    dir = Path(dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = Qwen2Config(
        vocab_size=151936,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_labels=1,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **TINY,
    )
    torch.manual_seed(seed)
    (Qwen2ForCausalLM if causal_lm else Qwen2ForSequenceClassification)(config).save_pretrained(dir)
    tokenizer.save_pretrained(dir)
    return dir


def build_tiny_bert(dir: str | Path, seed: int = 0) -> Path:
    """A random BertForSequenceClassification (num_labels=1) with m3e-small's Chinese tokenizer, saved in ``dir``."""
    dir = Path(dir)
    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("m3e-small"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        num_attention_heads=2,
        max_position_embeddings=512,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
        **TINY,
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(dir)
    tokenizer.save_pretrained(dir)
    return dir
