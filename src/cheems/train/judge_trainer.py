"""``cheems train-judge``: supervised fine-tuning of a causal chat model on judge rows, the loss on the reply only.

The data are the rows ``cheems export judge-sft`` writes; :mod:`~cheems.train.judge_data` turns them into token
ids and labels (the mask rule, truncation) and micro-batches (padded or packed). The run around the forward pass
is the reward-model trainer's: the work folder ``OUTPUT.partial`` and the output checks, the accelerator
(DDP, DeepSpeed, bf16 by :mod:`cheems.runtime`'s rule), AdamW with warm-up and cosine decay, SIGINT/SIGTERM
stopping with a checkpoint (:mod:`~cheems.train.run_setup`), the micro-step schedule
(:mod:`~cheems.train.schedule`), checkpoints and resume (:mod:`~cheems.train.checkpoint`) and the CSV/TensorBoard
log (:mod:`~cheems.train.logs`).

The folder it saves is a plain chat model (``AutoModelForCausalLM`` weights, LoRA adapters merged; the tokenizer
with its chat template; a generation config that stops at the replies' end-of-turn token), with
``train_config.yaml``, ``metrics.json``, ``train_log.csv`` and a model card: ``cheems eval --judge-model DIR
--backend hf`` evaluates it as a judge.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cheems.errors import InputError
from cheems.models.prefix import full_attention_only
from cheems.outputs import follow_umask
from cheems.runtime import ProgressBar
from cheems.train.checkpoint import Position, resume
from cheems.train.judge_config import JudgeTrainConfig
from cheems.train.judge_data import (
    EncodedRow,
    JudgeDataSummary,
    encode_rows,
    judge_digest,
    packed_batch,
    padded_batch,
    plan_judge_epoch,
    read_judge_rows,
    token_loss,
    trained_positions,
)
from cheems.train.logs import TrainLogger
from cheems.train.model import add_lora, unwrap_peft
from cheems.train.model_card import CARD_MARK, write_model_card
from cheems.train.packing import pack_budget
from cheems.train.run_setup import (
    RunResult,
    TrainingRun,
    checkpoint_when_due,
    configure_deepspeed,
    is_deepspeed,
    log_step,
    make_accelerator,
    make_optimizer,
    optimizer_step,
    save_run,
    signals_noted,
    start_work_folder,
    work_folder_for,
)
from cheems.train.schedule import micro_steps, optimizer_steps

JUDGE_LOG_FIELDS = ["step", "epoch", "loss", "rows", "tokens", "targets", "lr", "grad_norm", "seconds"]
"""The columns of a judge run's ``train_log.csv``: ``loss`` is the mean over the step's trained tokens,
``tokens`` the tokens forwarded (no padding), ``targets`` the tokens the loss is on."""


@dataclass
class JudgeTrainResult(RunResult):
    """What :func:`train_judge_model` produced (:class:`~cheems.train.run_setup.RunResult`). ``model``/``tokenizer``
    are set on the main process."""

    data: JudgeDataSummary


_JudgeRun = TrainingRun[JudgeTrainConfig, JudgeTrainResult]
"""What the loop's helpers share (:class:`~cheems.train.run_setup.TrainingRun`)."""


def train_judge(config: JudgeTrainConfig | str | Path | None = None, /, **settings: Any) -> Path:
    """Fine-tune a causal chat model as a judge on ``cheems export judge-sft`` rows; returns the folder it saved
    (``output``), a chat model ``cheems eval --judge-model DIR --backend hf`` evaluates.

    ``config``: a :class:`~cheems.train.judge_config.JudgeTrainConfig`, or a YAML config file as
    ``cheems train-judge --config`` reads it; ``settings``: its fields (``data``, ``model``, ``output``, ``epochs``,
    ``lora``, ...) over the file's, as the command's options are. ``cheems.train_judge(data=["judge.jsonl"],
    model="Qwen/Qwen2.5-0.5B-Instruct", output="judge")`` is ``cheems train-judge --data judge.jsonl --model ...
    --output judge``. The loss is on the assistant's reply only (through its end-of-turn token). A bad setting or
    row raises ``InputError``, and so does an ``output`` that is, holds or lies inside the model, a data file, the
    chat template or the config file, even with ``overwrite=True``, and a model whose tokenizer has no chat
    template (unless ``chat_template`` gives one).
    """
    from cheems.train.judge_config import check_judge_run, load_judge_config
    from cheems.yamlfile import validate_config

    config_path = None if isinstance(config, JudgeTrainConfig) else config
    if isinstance(config, JudgeTrainConfig):
        config = validate_config({**config.to_dict(), **settings}, JudgeTrainConfig)
    else:
        config = load_judge_config(config, settings)
    check_judge_run(config, config_path)  # before any training work
    return train_judge_model(config).output_dir


def train_judge_model(config: JudgeTrainConfig, *, console: Any = None) -> JudgeTrainResult:
    """Train as ``config`` says (checked by :func:`~cheems.train.judge_config.check_judge_run` first when called
    directly); save the chat model to ``config.output``. Runs as one process or as one of many under
    ``accelerate launch`` / ``torchrun``."""
    from accelerate.utils import set_seed
    from rich.console import Console

    config.validate()
    work = work_folder_for(config)
    rows = read_judge_rows(config.data)  # a bad row fails before the model loads
    accelerator, _ = make_accelerator(config)
    run = _JudgeRun(config, accelerator, work, console or Console(stderr=True), is_deepspeed(accelerator))
    if run.deepspeed:
        configure_deepspeed(accelerator, config)
    set_seed(config.seed)
    model, tokenizer = load_chat_model(config)
    encoded, summary = encode_rows(tokenizer, rows, config.max_length, config.truncation)
    run.say(summary.describe())
    run.digest = judge_digest(rows)

    world, rank = accelerator.num_processes, accelerator.process_index
    plans = [plan_judge_epoch(len(encoded), config.batch_size, config.seed, e) for e in range(config.epochs)]
    total_steps = optimizer_steps(plans, world, config.grad_accum)
    optimizer, scheduler = make_optimizer(model, config, total_steps, run.deepspeed)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    resumed = resume(accelerator, work, config, run.digest, run.say) if config.resume else None
    pos = resumed or Position()
    _start_outputs(run, summary, pos, fresh=resumed is None)
    attention = _packed_attention(run, accelerator.unwrap_model(model))
    keep = keeps_logits(accelerator.unwrap_model(model))

    bar = ProgressBar(
        total_steps, "training", enabled=run.main and config.progress, completed=pos.global_step, console=run.console
    )
    start = (pos.epoch, pos.micro)
    accum = config.grad_accum
    steps = micro_steps(plans, world=world, rank=rank, grad_accum=accum, deepspeed=run.deepspeed, start=start)
    model.train()
    started = time.time()
    window: list[dict[str, float]] = []
    with bar, signals_noted() as caught:
        for step in steps:
            if run.deepspeed:  # DeepSpeed steps where accelerate says the window ends
                accelerator.sync_gradients = step.sync
            batch = [encoded[i] for i, _ in step.items]
            with nullcontext() if step.sync or run.deepspeed else accelerator.no_sync(model):
                loss, targets = batch_loss(model, batch, tokenizer.pad_token_id, accelerator, attention, config, keep)
                accelerator.backward(loss * step.weight)
            if step.real:
                tokens = sum(len(r.ids) for r in batch)
                window.append({"loss": loss.item(), "targets": targets, "rows": len(batch), "tokens": tokens})
            if step.sync:
                row = optimizer_step(run, model, optimizer, scheduler, window, step.progress, started, judge_step_row)
                window = []
                log_step(run, row, step, bar, f"loss {row['loss']:.4f}")
                checkpoint_when_due(run, step, caught)
    _save_model(run, model, tokenizer, summary)
    return run.result


# ---------------------------------------------------------------------- the model
def load_chat_model(config: JudgeTrainConfig) -> tuple[Any, Any]:
    """The causal LM (fp32 weights; autocast gives bf16) with LoRA adapters when asked, and its tokenizer with a chat
    template (``--chat-template`` replaces the tokenizer's) and a pad token; a tokenizer with no chat template is an
    InputError: a base model does not know where a reply starts and ends."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cheems.models.backbones import locate_model
    from cheems.models.quiet import load_pretrained, missing_weights_text, quiet_libraries

    source = locate_model(config.model)
    try:
        with quiet_libraries():
            tokenizer = AutoTokenizer.from_pretrained(source.location, revision=source.revision)
        if config.chat_template:
            tokenizer.chat_template = _read_template(config.chat_template)
        if not getattr(tokenizer, "chat_template", None):
            raise InputError(
                "the model's tokenizer has no chat template (a base model, not a chat model)",
                path="--model",
                hint="give a chat model, or --chat-template FILE (a Jinja chat template)",
            )
        if tokenizer.pad_token_id is None:  # padding is masked; any token will do
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        model, head, rest = load_pretrained(
            AutoModelForCausalLM, source.location, revision=source.revision, dtype=torch.float32
        )
    except (OSError, ValueError) as e:
        raise InputError(
            f"cannot load '{config.model}' as a causal LM: {(str(e).splitlines() or [type(e).__name__])[0]}",
            path="--model",
            hint="give a chat model folder or hub id (AutoModelForCausalLM)",
        ) from None
    if head or rest:  # e.g. a reward model's folder: no lm_head, so the judge would start from a random one
        raise InputError(
            f"'{config.model}' is not a complete causal LM: {missing_weights_text(config.model, head + rest)}",
            path="--model",
            hint="give a chat model (…ForCausalLM); a reward model trained with --keep-lm-head has one in OUTPUT/lm",
        )
    if config.gradient_checkpointing:
        # non-reentrant: works with DDP and with frozen (LoRA) inputs
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if config.lora.enabled:
        model = add_lora(model, config.lora, "CAUSAL_LM")  # the LM head stays as it is
    return model, tokenizer


def _read_template(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the chat template: {e}", path=path, hint="give a Jinja template file") from None


def packing_supported(model: Any) -> bool:
    """Whether packed rows (a 4-D mask, positions restarting per row) give ``model`` the logits its padded rows get:
    a decoder whose layers all attend fully (a sliding window would need its window in the mask) through an
    attention that takes an explicit mask."""
    config = model.config
    return (
        full_attention_only(config)
        and not getattr(config, "is_encoder_decoder", False)
        and getattr(config, "_attn_implementation", None) in ("sdpa", "eager")
    )


def keeps_logits(model: Any) -> bool:
    """Whether the causal LM (inside PEFT when LoRA is on) computes logits at chosen positions (``logits_to_keep``,
    transformers >= 4.50 for most models)."""
    import inspect

    return "logits_to_keep" in inspect.signature(unwrap_peft(model).forward).parameters


def _packed_attention(run: _JudgeRun, model: Any) -> str | None:
    """The attention implementation packed batches run with, or None when batches are padded (``--packing``)."""
    if run.config.packing != "auto" or not packing_supported(model):
        if run.config.packing == "auto":
            run.say("packing: not for this model (sliding-window or other attention); padded batches")
        return None
    attention = str(model.config._attn_implementation)
    budget = pack_budget(run.config.pack_tokens, run.accelerator.device)
    run.say(f"packing: rows side by side in sequences of {budget} tokens, each attending to itself ({attention})")
    return attention


def batch_loss(
    model: Any,
    rows: list[EncodedRow],
    pad_id: int,
    accelerator: Any,
    attention: str | None,
    config: JudgeTrainConfig,
    keeps_logits: bool = True,
) -> tuple[torch.Tensor, int]:
    """The mean next-token loss over a micro-batch's trained tokens, and their count: padded rows when ``attention``
    is None, else packed (:func:`~cheems.train.judge_data.packed_batch`); with ``keeps_logits`` (the model takes
    ``logits_to_keep``) the vocabulary's logits only where the loss reads them
    (:func:`~cheems.train.judge_data.trained_positions`)."""
    device = accelerator.device
    if attention is None:
        inputs = padded_batch(rows, pad_id, device)
    else:
        inputs = packed_batch(rows, pad_id, device, pack_budget(config.pack_tokens, device), attention)
    labels = inputs.pop("labels")
    positions = trained_positions(labels) if keeps_logits else None
    kept = {} if positions is None else {"logits_to_keep": positions}
    with accelerator.autocast():
        logits = model(**inputs, use_cache=False, **kept).logits
    return token_loss(logits, labels, positions)


# ---------------------------------------------------------------------- the loop's steps
def _start_outputs(run: _JudgeRun, summary: JudgeDataSummary, pos: Position, fresh: bool) -> None:
    """The work folder with the resolved config, the logger and the result; a ``fresh`` run starts from an empty
    work folder (what an earlier run left there without a checkpoint goes)."""
    config, work = run.config, run.work
    start_work_folder(run, fresh)
    run.logger = TrainLogger(work, config.logging, run.main, run.console, pos.global_step, fields=JUDGE_LOG_FIELDS)
    run.result = JudgeTrainResult(Path(config.output), pos.global_step, config.epochs, summary)


def judge_step_row(
    window: list[dict[str, float]], accelerator: Any, step: int, epoch: float, lr: float, grad_norm: Any, seconds: float
) -> dict[str, Any]:
    """One log row: the step's micro-batches (all processes) pooled, the loss weighted by trained tokens."""
    sums = torch.tensor(
        [
            sum(w["loss"] * w["targets"] for w in window),
            sum(w["targets"] for w in window),
            sum(w["rows"] for w in window),
            sum(w["tokens"] for w in window),
        ],
        dtype=torch.float64,
    )
    if accelerator.num_processes > 1:
        sums = accelerator.reduce(sums.to(accelerator.device), reduction="sum").cpu()
    loss, targets, rows, tokens = sums.tolist()
    return {
        "step": step,
        "epoch": round(epoch, 4),
        "loss": loss / targets if targets else float("nan"),
        "rows": int(rows),
        "tokens": int(tokens),
        "targets": int(targets),
        "lr": lr,
        "grad_norm": None if grad_norm is None else float(grad_norm),
        "seconds": round(seconds, 2),
    }


# ---------------------------------------------------------------------- saving
def _save_model(run: _JudgeRun, model: Any, tokenizer: Any, summary: JudgeDataSummary) -> None:
    """Write the chat model (LoRA merged), its tokenizer and generation config, the config, metrics and card into the
    work folder, then move it onto ``config.output`` (an old model there goes only now); end the run."""
    accelerator = run.accelerator
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    state_dict = accelerator.get_state_dict(model) if run.deepspeed else None  # ZeRO-3: every rank gathers

    def write(work: Path) -> Any:
        merge = getattr(unwrapped, "merge_and_unload", None)
        hf = merge() if callable(merge) else unwrapped
        _stop_at_end_of_turn(hf, tokenizer, summary.end_of_turn)
        from cheems.models.quiet import quiet_libraries

        with quiet_libraries():
            hf.save_pretrained(work, state_dict=state_dict)
            tokenizer.save_pretrained(work)
        follow_umask(work.glob("*.safetensors"))
        write_model_card(work, judge_card(run.config, run.result))
        return hf

    save_run(run, "the judge model", tokenizer, write)


def _stop_at_end_of_turn(model: Any, tokenizer: Any, end_of_turn: list[int]) -> None:
    """The generation config stops at the end-of-turn tokens the replies were trained to end with (and the eos);
    padding is the tokenizer's pad token."""
    generation = model.generation_config
    eos = generation.eos_token_id
    stops = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    stops.update(end_of_turn)
    if tokenizer.eos_token_id is not None:
        stops.add(tokenizer.eos_token_id)
    generation.eos_token_id = sorted(stops)
    generation.pad_token_id = tokenizer.pad_token_id
    model.config.pad_token_id = tokenizer.pad_token_id


def judge_card(config: JudgeTrainConfig, result: JudgeTrainResult) -> str:
    """The model card of a trained judge: what it answers, how it was trained, how to evaluate it."""
    data = result.data
    lora = f"; LoRA (r={config.lora.r}, alpha={config.lora.alpha}) merged into the weights" * config.lora.enabled
    return "\n".join(
        [
            "---",
            "library_name: transformers",
            "pipeline_tag: text-generation",
            "tags:",
            "- llm-as-a-judge",
            "- cheems",
            "---",
            CARD_MARK,
            "",
            f"# {Path(config.output).name or config.output}",
            "",
            "A generative judge trained with `cheems train-judge` (the cheems package): given the judge prompt of "
            "`cheems judge` or `cheems eval --judge-model` (a question, two answers shown as A and B) it replies "
            "with a verdict, `[[A]]`, `[[B]]` (or `[[C]]` for a tie when trained with ties).",
            "",
            "## Training",
            "",
            f"- Base model: `{config.model}`",
            f"- Data: {data.kept:,} judge rows of {data.rows:,} ({data.dropped:,} over {config.max_length} tokens "
            f"left out, {data.truncated:,} cut at the prompt's start); the loss on the reply tokens only",
            f"- {result.global_step:,} optimizer steps, {config.epochs} epoch{'s' if config.epochs != 1 else ''}{lora}",
            "",
            "## Use it",
            "",
            "```bash",
            f"cheems eval --bench BENCH.jsonl --judge-model {config.output} --backend hf",
            "```",
            "",
        ]
    )
