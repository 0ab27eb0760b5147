"""Judge with a local Hugging Face causal LM: chat template, left-padded batches, greedy decoding.

Same prompt and same strict parser as the API judge. Prompts are sorted by length before
batching (little padding); each batch's outcomes go to the cache as soon as it is done. A reply
without a verdict is re-asked by sampling at ``retry_temperature`` (greedy decoding would repeat
it), then recorded as failed. torch and transformers are imported only when a model is loaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cheems.annotate.settings import JudgeSettings, Outcome, RequestBudget
from cheems.annotate.verdict import parse_verdict
from cheems.errors import InputError
from cheems.runtime import autocast, compute_dtype, folder_files, pick_device

Job = tuple[str, list[dict[str, str]]]
OnDone = Callable[[str, Outcome], None]


def model_identity(spec: str) -> dict[str, Any]:
    """What identifies the model's files, cheaply: a folder's config and file sizes/mtimes, or the hub id."""
    path = Path(spec).expanduser()
    if not path.is_dir():
        if path.exists() or spec.startswith((".", "/", "~")):
            raise InputError(
                f"model folder '{spec}' does not exist" if not path.exists() else f"'{spec}' is a file",
                path=str(path),
                field="judge_model",
                hint="point to a Hugging Face model folder",
            )
        return {"hub": spec}
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(
            f"cannot read the model's config.json: {e}",
            path=str(path),
            field="judge_model",
            hint="point to a folder saved with save_pretrained",
        ) from None
    return {"path": str(path.resolve()), "config": config, "files": folder_files(path)}


def _plain_prompt(messages: list[dict[str, str]]) -> str:
    """For a tokenizer without a chat template: the turns as text, ending where the answer goes."""
    return "\n\n".join(m["content"] for m in messages) + "\n\n答案："


class LocalJudge:
    """A causal LM on this machine as the judge."""

    def __init__(self, settings: JudgeSettings, budget: RequestBudget) -> None:
        self.settings = settings
        self.budget = budget
        self._identity = {
            "backend": "hf",
            "model": model_identity(settings.judge_model),
            "max_new_tokens": settings.max_tokens,
            "decoding": "greedy",
        }
        self.model: Any = None
        self.tokenizer: Any = None
        self.device = "cpu"
        self._amp: Any = None  # autocast dtype, chosen with the device when the model loads

    @property
    def identity(self) -> dict[str, Any]:
        """What makes this judge's verdicts this judge's (part of the cache key)."""
        return self._identity

    def load(self) -> None:
        """Load tokenizer and model (once)."""
        if self.model is not None:
            return
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        spec = self.settings.judge_model
        try:
            tokenizer = AutoTokenizer.from_pretrained(spec)
            self.device = pick_device(self.settings.device)
            self._amp = compute_dtype(self.device)
            # the scorer's rule: on a GPU the weights in the compute precision, on a CPU fp32 weights
            # with bf16 autocast (only where the CPU computes bf16 natively)
            cuda = torch.device(self.device).type == "cuda"
            model = AutoModelForCausalLM.from_pretrained(spec, dtype=self._amp if cuda and self._amp else torch.float32)
        except (OSError, ValueError) as e:
            raise InputError(
                f"cannot load judge model '{spec}': {str(e).splitlines()[0]}",
                field="judge_model",
                hint="give a local causal LM folder or a hub id in the Hugging Face cache",
            ) from None
        tokenizer.padding_side = "left"  # generation continues from the right end of every row
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer, self.model = tokenizer, model.eval().to(self.device)

    def _eos_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        ids.update(configured if isinstance(configured, list) else [configured])
        return sorted(i for i in ids if i is not None)

    def render(self, messages: list[dict[str, str]]) -> str:
        """The model's input text for one judge prompt."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return _plain_prompt(messages)

    def generate(self, texts: list[str], sample: bool, seed: int) -> list[tuple[str, int, int]]:
        """(reply, prompt tokens, completion tokens) for each text: one left-padded batch."""
        import torch
        from transformers import GenerationConfig

        eos = self._eos_ids()
        config = GenerationConfig(
            max_new_tokens=self.settings.max_tokens,
            do_sample=sample,
            temperature=self.settings.retry_temperature if sample else None,
            top_p=None,
            top_k=None,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=eos,
        )
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        if sample:
            torch.manual_seed(seed)
        with torch.inference_mode(), autocast(self.device, self._amp):
            out = self.model.generate(**enc, generation_config=config)
        new = out[:, enc["input_ids"].shape[1] :].tolist()
        prompt_tokens = enc["attention_mask"].sum(dim=1).tolist()
        results = []
        for row, pt in zip(new, prompt_tokens):
            end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))  # through the first stop token
            results.append((self.tokenizer.decode(row[:end], skip_special_tokens=True), int(pt), end))
        return results

    def judge_many(self, jobs: Iterable[Job], on_done: OnDone) -> None:
        """Judge every job in batches, calling ``on_done(item, outcome)`` after each batch."""
        jobs = list(jobs)
        if not jobs:
            return
        self.load()
        s = self.settings
        pending = [(item, self.render(messages)) for item, messages in jobs]
        outcomes = {item: Outcome() for item, _ in pending}
        lengths = {item: len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) for item, text in pending}
        for ask in range(s.max_retries + 1):
            pending.sort(key=lambda job: -lengths[job[0]])  # similar lengths together: little padding
            retry: list[tuple[str, str]] = []
            for start in range(0, len(pending), s.batch_size):
                batch = []
                for item, text in pending[start : start + s.batch_size]:
                    if self.budget.take():
                        batch.append((item, text))
                    else:  # budget used up: never guessed, resumed by a rerun
                        o = outcomes[item]
                        o.not_attempted, o.failure, o.detail = True, "budget", "request budget used up"
                        on_done(item, o)
                if not batch:
                    continue
                replies = self.generate([t for _, t in batch], sample=ask > 0, seed=s.seed + ask)
                for (item, text), (reply, pt, ct) in zip(batch, replies):
                    o = outcomes[item]
                    verdict = parse_verdict(reply)
                    o.requests += 1
                    o.prompt_tokens += pt
                    o.completion_tokens += ct
                    o.raw, o.label, o.failure = reply, verdict.label, verdict.failure
                    if verdict.ok or ask == s.max_retries:
                        o.final, o.detail = True, "" if verdict.ok else f"after {ask + 1} ask(s)"
                        on_done(item, o)
                    else:
                        retry.append((item, text))
            pending = retry
            if not pending:
                break
