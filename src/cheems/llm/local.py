"""A local Hugging Face causal LM (chat template, left-padded batches, seeded sampling) and the judge on it.

The judge: the same prompt and strict parser as the API judge. Prompts are sorted by length before
batching (little padding); each batch's outcomes go to the cache as soon as it is done. A reply
without a verdict is re-asked by sampling at ``retry_temperature`` (greedy decoding would repeat
it), then recorded as failed. torch and transformers are imported only when a model is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from cheems.errors import InputError
from cheems.llm.endpoint import EndpointSettings, RequestBudget
from cheems.runtime import autocast, compute_dtype, folder_files, pick_device


def model_identity(spec: str, field: str = "judge_model") -> dict[str, Any]:
    """What identifies the model's files, cheaply: a folder's config and file sizes/mtimes, or the hub id."""
    path = Path(spec).expanduser()
    if not path.is_dir():
        if path.exists() or spec.startswith((".", "/", "~")):
            raise InputError(
                f"model folder '{spec}' does not exist" if not path.exists() else f"'{spec}' is a file",
                path=str(path),
                field=field,
                hint="point to a Hugging Face model folder",
            )
        return {"hub": spec}
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(
            f"cannot read the model's config.json: {e}",
            path=str(path),
            field=field,
            hint="point to a folder saved with save_pretrained",
        ) from None
    return {"path": str(path.resolve()), "config": config, "files": folder_files(path)}


def _plain_prompt(messages: list[dict[str, str]]) -> str:
    """For a tokenizer without a chat template: the turns as text, ending where the answer goes."""
    return "\n\n".join(m["content"] for m in messages) + "\n\n答案："


def _seeded_sampling(temperature: float, generators: list[Any]) -> Any:
    """A logits processor that turns greedy decoding into sampling at ``temperature``, row ``i`` drawing
    its randomness from ``generators[i]`` only (the Gumbel-max trick: argmax(logits / T + Gumbel noise)
    is a draw from softmax(logits / T)).

    ``generate(do_sample=True)`` draws every row from one global generator, so a row's text would
    depend on which other rows share its batch; here it depends on its own seed alone, so a resumed
    run samples exactly what an uninterrupted one would have.
    """
    import torch
    from transformers import LogitsProcessor

    class SeededSampling(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            tiny = torch.finfo(torch.float32).tiny
            noise = torch.stack(
                [torch.rand(scores.shape[1], generator=g, device=scores.device) for g in generators]
            ).clamp_(tiny, 1 - 1e-7)
            return scores.float() / temperature - torch.log(-torch.log(noise))

    return SeededSampling()


class LocalLM:
    """A causal LM on this machine, answering chat messages in left-padded batches.

    ``settings.model_name`` names the folder or hub id; ``max_tokens``, ``batch_size`` and
    ``device`` come from the settings too. The subclasses say what is asked: :class:`LocalJudge`
    (verdicts) and :class:`cheems.llm.sampling.LocalGenerator` (free text).
    """

    def __init__(self, settings: EndpointSettings, budget: RequestBudget) -> None:
        self.settings = settings
        self.budget = budget
        self._identity: dict[str, Any] = {
            "backend": "hf",
            "model": model_identity(settings.model_name, settings.MODEL_FIELD),
            "max_new_tokens": settings.max_tokens,
        }
        self.model: Any = None
        self.tokenizer: Any = None
        self.device = "cpu"
        self._amp: Any = None  # autocast dtype, chosen with the device when the model loads

    @property
    def identity(self) -> dict[str, Any]:
        """What makes this model's replies this model's (part of the cache key)."""
        return self._identity

    def load(self) -> None:
        """Load tokenizer and model (once)."""
        if self.model is not None:
            return
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        spec = self.settings.model_name
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
                f"cannot load {self.settings.ROLE} model '{spec}': {str(e).splitlines()[0]}",
                field=self.settings.MODEL_FIELD,
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
        """The model's input text for one chat."""
        if getattr(self.tokenizer, "chat_template", None):
            return cast("str", self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        return _plain_prompt(messages)

    def generate(self, texts: list[str], temperature: float, seeds: list[int]) -> list[tuple[str, int, int]]:
        """(reply, prompt tokens, completion tokens) for each text: one left-padded batch.

        ``temperature`` 0 decodes greedily; otherwise row ``i`` is sampled from a generator seeded
        with ``seeds[i]`` (the same text and seed give the same reply in any batch).
        """
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        eos = self._eos_ids()
        config = GenerationConfig(
            max_new_tokens=self.settings.max_tokens,
            do_sample=False,  # sampling, when asked, is the seeded processor's
            temperature=None,
            top_p=None,
            top_k=None,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=eos,
        )
        processors = LogitsProcessorList()
        if temperature > 0:
            generators = [torch.Generator(device=self.device).manual_seed(seed) for seed in seeds]
            processors.append(_seeded_sampling(temperature, generators))
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        with torch.inference_mode(), autocast(self.device, self._amp):
            out = self.model.generate(**enc, generation_config=config, logits_processor=processors)
        new = out[:, enc["input_ids"].shape[1] :].tolist()
        prompt_tokens = enc["attention_mask"].sum(dim=1).tolist()
        results = []
        for row, pt in zip(new, prompt_tokens):
            end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))  # through the first stop token
            results.append((self.tokenizer.decode(row[:end], skip_special_tokens=True), int(pt), end))
        return results
