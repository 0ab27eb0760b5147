"""Reward-model training: listwise Bradley–Terry, greedy prompt-grouped batches, Gaussian prior.

One epoch = :func:`cheems.train.batching.plan_epoch` batches (every response forwarded once,
all responses of a prompt in one batch when they fit), sharded whole over the processes,
each batch forwarded in one padded pass and trained with
:func:`cheems.train.loss.listwise_bt_loss`. AdamW, linear warm-up then cosine decay,
gradient accumulation and clipping, bf16 autocast, checkpoints that resume to the same
final weights, periodic CheemsBench evaluation, CSV/TensorBoard logs.

Multi-process runs (``accelerate launch`` / ``torchrun``; DDP or DeepSpeed ZeRO-3): every
process computes the same plan and takes batches ``rank, rank + world, ...``; the order,
the loss weights and the sync points are :func:`cheems.train.schedule.micro_steps`.

This module holds the loop (:func:`train`) and its setup; the rooms around it:
:mod:`~cheems.train.data` (records -> encoded prompt groups), :mod:`~cheems.train.schedule`
(micro-steps), :mod:`~cheems.train.forward` (rewards of a batch, scoring in memory),
:mod:`~cheems.train.checkpoint` and :mod:`~cheems.train.logs`.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models.encoding import Features, RewardEncoder
from cheems.runtime import ProgressBar
from cheems.train.batching import EpochPlan, Item, plan_epoch
from cheems.train.checkpoint import (
    METRICS_FILE,
    Position,
    resume,
)
from cheems.train.config import TrainConfig
from cheems.train.data import (
    DataSummary,
    TrainingSet,
    build_training_set,
    check_training_set,
    describe_merge,
    read_training_records,
    training_digest,
)
from cheems.train.forward import chunk_budget, forward_rewards, forward_rewards_lm, score_in_memory
from cheems.train.length_head import disentangled_loss, quality_model, response_lengths, with_length_head
from cheems.train.lm_objective import LM_FOLDER, LmTargets, joint_loss, lm_targets, load_lm_head, save_causal_lm
from cheems.train.logs import TrainLogger, describe_eval, step_row
from cheems.train.loss import listwise_bt_loss
from cheems.train.model import RewardModel, load_reward_model, save_reward_model
from cheems.train.model_card import MEAN_NOT_PORTABLE, training_facts
from cheems.train.packing import pack_budget, packed_rewards, packed_rewards_lm, packing_active, use_flex_attention
from cheems.train.run_setup import (
    RunResult,
    TrainingRun,
    checkpoint_when_due,
    log_step,
    optimizer_step,
    save_run,
    start_work_folder,
)

# the setup every trainer shares, under the names this loop has always called it by
from cheems.train.run_setup import configure_deepspeed as _configure_deepspeed
from cheems.train.run_setup import is_deepspeed as _is_deepspeed
from cheems.train.run_setup import make_accelerator as _accelerator
from cheems.train.run_setup import make_optimizer as _optimizer
from cheems.train.run_setup import signals_noted as _signals_noted
from cheems.train.run_setup import work_folder_for as _work_folder
from cheems.train.schedule import MicroStep, micro_steps, optimizer_steps


@dataclass
class TrainResult(RunResult):
    """What :func:`train` produced (:class:`~cheems.train.run_setup.RunResult`), with the epochs' plans and the
    evaluations. ``model``/``tokenizer`` are set on the main process."""

    data: DataSummary
    evals: list[dict[str, Any]] = field(default_factory=list)
    epoch_plans: list[dict[str, int]] = field(default_factory=list)
    model: RewardModel | None = None

    def metrics(self) -> dict[str, Any]:
        shared = super().metrics()
        final_loss = shared.pop("final_loss")  # after the plans, as metrics.json has always had it
        return {
            **shared,
            "epoch_plans": self.epoch_plans,
            "final_loss": final_loss,
            "evals": self.evals,
            "final_eval": self.evals[-1] if self.evals else None,
        }


_Run = TrainingRun[TrainConfig, TrainResult]
"""What the loop's helpers share (:class:`~cheems.train.run_setup.TrainingRun`)."""


# ---------------------------------------------------------------------- train
def train(config: TrainConfig | str | Path | None = None, /, **settings: Any) -> Path:
    """Train a reward model; returns the Hugging Face folder it was saved to (``output``).

    ``config``: a :class:`TrainConfig`, or a YAML config file as ``cheems train --config`` reads it;
    ``settings``: :class:`TrainConfig` fields (``data``, ``output``, ``model``, ``epochs``, ...), over the
    file's, as ``cheems train``'s options are. ``cheems.train(data=["train.jsonl"], output="rm")`` is
    ``cheems train --data train.jsonl --output rm``. A bad setting raises ``InputError``, and so does an
    ``output`` that is, holds or lies inside the model, a data file, an eval bench or the config file — even
    with ``overwrite=True`` (:func:`~cheems.train.config.check_run`, what ``cheems train`` checks).
    """
    from cheems.train.config import check_run, load_config
    from cheems.yamlfile import validate_config

    config_path = None if isinstance(config, TrainConfig) else config
    if isinstance(config, TrainConfig):
        config = validate_config({**config.to_dict(), **settings}, TrainConfig)
    else:
        config = load_config(config, settings)
    check_run(config, config_path, model_given="model" in settings)  # before any training work
    return train_reward_model(config).output_dir


def train_reward_model(config: TrainConfig, *, console: Any = None) -> TrainResult:
    """Train a reward model as ``config`` says; save it to ``config.output`` as a Hugging Face folder.

    The run is built in ``OUTPUT.partial`` (logs, checkpoints, the model) and takes the name
    ``config.output`` whole at the end. Runs as one process or as one of many under
    ``accelerate launch`` / ``torchrun``.
    """
    from accelerate.utils import set_seed
    from rich.console import Console

    config.validate()
    work = _work_folder(config)
    accelerator, ddp = _accelerator(config)
    run = _Run(config, accelerator, work, console or Console(stderr=True), _is_deepspeed(accelerator))
    if run.deepspeed:
        _configure_deepspeed(accelerator, config)
    set_seed(config.seed)
    inputs = _load_inputs(run, ddp)
    run.digest = inputs.digest

    # ---- the whole run's plan (every process computes the same batches), optimizer, resume
    plans = [plan_epoch(inputs.data.groups, config.batch_size, config.seed, e) for e in range(config.epochs)]
    total_steps = optimizer_steps(plans, accelerator.num_processes, config.grad_accum)
    optimizer, scheduler = _optimizer(inputs.model, config, total_steps, run.deepspeed)
    model, optimizer, scheduler = accelerator.prepare(inputs.model, optimizer, scheduler)
    resumed = resume(accelerator, work, config, run.digest, run.say) if config.resume else None
    pos = resumed or Position()
    _start_outputs(run, inputs.data.summary, plans, pos, fresh=resumed is None)

    # ---- the loop: one forward/backward per micro-step, the optimizer on each sync step
    bar = ProgressBar(
        total_steps, "training", enabled=run.main and config.progress, completed=pos.global_step, console=run.console
    )
    start = (pos.epoch, pos.micro)
    world, rank = accelerator.num_processes, accelerator.process_index
    steps = micro_steps(
        plans, world=world, rank=rank, grad_accum=config.grad_accum, deepspeed=run.deepspeed, start=start
    )
    forward = _forward_pass(run, model, inputs)
    model.train()
    started = time.time()
    window: list[dict[str, float]] = []
    with bar, _signals_noted() as caught:
        for step in steps:
            if step.first:
                run.say(_describe_epoch(plans[step.epoch], step.epoch, config.epochs))
            if run.deepspeed:  # DeepSpeed steps where accelerate says the window ends (no accelerate dataloader)
                accelerator.sync_gradients = step.sync
            with nullcontext() if step.sync or run.deepspeed else accelerator.no_sync(model):
                loss, stats, rows = forward.loss(step)
                accelerator.backward(loss * step.weight)
            if step.real:
                window.append({"loss": loss.item(), "n": len(rows), "tokens": sum(len(i) for i, _ in rows), **stats})
            if not step.sync:
                continue
            row = optimizer_step(run, model, optimizer, scheduler, window, step.progress, started, step_row)
            window = []
            _after_optimizer_step(run, inputs, model, row, step, bar, caught)
    if inputs.bench is not None and config.eval_every and _last_step_unevaluated(run):
        _evaluate(run, model, inputs.encoder, inputs.bench, float(config.epochs))
    _save_model(run, model, inputs.tokenizer, inputs.encoder, inputs.lm_head)
    return run.result


@dataclass
class _Inputs:
    """What the run trains on and with: the encoded data, the model before ``accelerator.prepare``, the bench."""

    digest: str
    encoder: RewardEncoder
    tokenizer: Any
    model: torch.nn.Module
    data: TrainingSet
    bench: Any
    lengths: dict[Item, int]
    """Each response's length in characters, for ``--length-head``; empty without it."""
    lm: LmTargets | None = None
    """The tokens of the LM loss (``--lm-weight`` > 0); None without it."""
    lm_head: torch.Tensor | None = None
    """``--keep-lm-head`` with ``--lm-weight 0``: the checkpoint's LM head, saved untouched (None: tied)."""


def _load_inputs(run: _Run, ddp: Any) -> _Inputs:
    """The data first (a bad file fails before the model loads), then the model, the training set and the bench."""
    config = run.config
    records, merged = read_training_records(config.data)
    if config.eval_bench and not config.allow_overlap:
        _refuse_overlap(records, config.eval_bench)
    digest = training_digest(records)
    if note := describe_merge(merged):
        run.say(note)
    encoder, reward_model, tokenizer, lm_head = _load_model(run)
    ddp.find_unused_parameters = reward_model.pooling == "mean"  # mean pooling leaves the pooler unused
    model: torch.nn.Module = with_length_head(reward_model, run.deepspeed) if config.length_head else reward_model
    data = build_training_set(records, encoder, config.truncation)
    check_training_set(data, config.data)
    run.say(data.summary.describe())
    bench = _load_bench(config.eval_bench)
    lengths = response_lengths(records, list(data.features)) if config.length_head else {}
    if config.length_head:
        run.say("length head (ODIN) trained beside the reward head; the saved model keeps the reward head only")
    lm = None
    if config.lm_weight:
        lm = lm_targets(records, data.groups, data.features, encoder, config.lm_target)
        run.say(_describe_lm(config, lm))
    return _Inputs(digest, encoder, tokenizer, model, data, bench, lengths, lm, lm_head)


@dataclass
class _ForwardPass:
    """One micro-step's rewards and loss: padded or packed (``--packing``), Bradley–Terry or ``--length-head``."""

    run: _Run
    model: Any
    inputs: _Inputs
    chunk_tokens: int
    attention: str | None
    """The packed batches' attention implementation; None: padded batches."""
    budget: int
    causal: bool

    def loss(self, step: MicroStep) -> tuple[torch.Tensor, dict[str, float], list[Features]]:
        """The step's loss, its statistics and the rows it forwarded."""
        if self.inputs.lm is not None:
            return self._joint_loss(step, self.inputs.lm)
        run, config, device = self.run, self.run.config, self.run.accelerator.device
        rows = [self.inputs.data.features[item] for item in step.items]
        pad = self.inputs.tokenizer.pad_token_id
        with run.accelerator.autocast():
            if self.attention is None:
                rewards = forward_rewards(self.model, rows, pad, device, self.chunk_tokens)
            else:
                keys = [prompt for prompt, _ in step.items]
                rewards = packed_rewards(self.model, rows, keys, pad, device, self.budget, self.attention, self.causal)
        pairs = torch.tensor(step.pairs, dtype=torch.long, device=device).reshape(-1, 2)
        if config.length_head:
            lengths = [self.inputs.lengths[i] for i in step.items]
            loss, stats = _disentangled_loss(run, self.model, rewards, pairs, lengths)
        else:
            loss, stats = listwise_bt_loss(rewards, pairs, config.reg_coef)
        return loss, stats, rows

    def _joint_loss(self, step: MicroStep, lm: LmTargets) -> tuple[torch.Tensor, dict[str, float], list[Features]]:
        """``--lm-weight``: the Bradley–Terry loss and the LM loss of one forward (with the step's critique rows,
        whose rewards are not used), combined by :func:`~cheems.train.lm_objective.joint_loss`."""
        run, config, device = self.run, self.run.config, self.run.accelerator.device
        rows = [self.inputs.data.features[item] for item in step.items]
        forwarded, starts = lm.step_rows(step.items, rows)
        pad = self.inputs.tokenizer.pad_token_id
        with run.accelerator.autocast():
            if self.attention is None:
                out = forward_rewards_lm(self.model, forwarded, starts, pad, device, self.chunk_tokens)
            else:
                keys = lm.step_keys(step.items)
                out = packed_rewards_lm(self.model, forwarded, keys, starts, pad, device, self.budget, self.attention)
        rewards, nll, tokens = out
        pairs = torch.tensor(step.pairs, dtype=torch.long, device=device).reshape(-1, 2)
        bt, stats = listwise_bt_loss(rewards[: len(rows)], pairs, config.reg_coef)
        loss, stats = joint_loss(bt, stats, nll, tokens, config.lm_weight)
        return loss, stats, rows


def _forward_pass(run: _Run, model: Any, inputs: _Inputs) -> _ForwardPass:
    """How the prepared ``model`` forwards each micro-step on this device (says so when packing)."""
    device, world = run.accelerator.device, run.accelerator.num_processes
    chunk_tokens = chunk_budget(run.config.chunk_tokens, device, world)
    run_model = quality_model(run.accelerator.unwrap_model(model))  # the length head wraps no .pooling or .config
    attention = _packed_attention(run, run_model, device)
    budget, causal = pack_budget(run.config.pack_tokens, device), run_model.pooling == "last"  # of packed batches
    return _ForwardPass(run, model, inputs, chunk_tokens, attention, budget, causal)


def _after_optimizer_step(
    run: _Run, inputs: _Inputs, model: Any, row: dict[str, Any], step: MicroStep, bar: ProgressBar, caught: list[int]
) -> None:
    """Log the step, evaluate when due, checkpoint when due or when a signal asked the run to stop (and stop)."""
    stats = f"loss {row['loss']:.4f} acc {row['accuracy']:.3f}" if row["pairs"] else ""
    log_step(run, row, step, bar, stats)
    if inputs.bench is not None and _eval_due(run.config.eval_every, run.result.global_step, step.epoch_end):
        _evaluate(run, model, inputs.encoder, inputs.bench, step.progress)
    checkpoint_when_due(run, step, caught)


# ---------------------------------------------------------------------- setup
def _load_model(run: _Run) -> tuple[RewardEncoder, RewardModel, Any, torch.Tensor | None]:
    """The encoder (the scorer's encoding, so training and ``cheems eval`` see the same input), model, tokenizer,
    and the LM head that ``--keep-lm-head`` saves untouched (with ``--lm-weight`` > 0 the model holds it)."""
    from cheems.models.backbones import locate_model

    config = run.config
    source = locate_model(config.model)
    encoder = RewardEncoder(source, config.max_length)
    model, tokenizer = load_reward_model(
        source.location,
        revision=source.revision,
        pooling=config.pooling,
        lora=config.lora,
        gradient_checkpointing=config.gradient_checkpointing,
        tokenizer=encoder.tokenizer,
    )
    if model.pooling == "mean":  # said before any training: the folder will not read right outside cheems
        run.say(MEAN_NOT_PORTABLE)
    if model.new_head:
        run.say(f"new reward head initialised on {config.model}")
    else:  # a released reward model trains on from its own head, reward scale and all
        run.say(f"keeping the trained reward head of {config.model} ({', '.join(model.head_weights())})")
    lm_head = None
    if config.lm_weight or config.keep_lm_head:
        option = "--lm-weight" if config.lm_weight else "--keep-lm-head"
        if run.deepspeed:
            raise InputError(
                f"{option} with DeepSpeed ZeRO-3 is not supported", field=option[2:].replace("-", "_"),
                hint="use the DDP config (configs/accelerate_ddp.yaml)",
            )  # fmt: skip
        lm_head = load_lm_head(source.location, source.revision, model, config.model, option)
        if config.lm_weight:  # the LM head trains with the backbone (frozen beside LoRA adapters)
            model.attach_lm_head(lm_head, trainable=not config.lora.enabled)
            lm_head = None
    return encoder, model, tokenizer, lm_head


def _packed_attention(run: _Run, model: RewardModel, device: torch.device) -> str | None:
    """The attention implementation packed batches run with, or None when ``--packing`` leaves them padded.

    On a GPU the model switches to flex attention where it can (masked blocks skipped); elsewhere,
    or when it cannot, it keeps its own (SDPA) with an explicit mask.
    """
    if not packing_active(run.config.packing, model):
        return None
    if device.type == "cuda":  # pragma: no cover - GPU
        use_flex_attention(model)
    attention = str(model.config._attn_implementation)
    what = "each prompt forwarded once per batch" if model.pooling == "last" else "whole sequences, no padding"
    run.say(f"packing: {what}, rows of {pack_budget(run.config.pack_tokens, device)} tokens ({attention})")
    return attention


def _refuse_overlap(records: list[Record], bench: list[str]) -> None:
    """Training prompts that overlap an eval-bench prompt make its numbers meaningless: one error naming the first."""
    from cheems.prompts.decontaminate import bench_overlaps

    found = bench_overlaps(records, bench)
    if found:
        first = found[0]
        raise InputError(
            f"{len(found)} training prompts overlap the eval bench (first: '{first['id']}' ~ bench prompt "
            f"'{first['bench_id']}', {first['overlap']})",
            path="--eval-bench",
            hint="drop them with cheems decontaminate --bench, or pass --allow-overlap",
        )


def _load_bench(paths: list[str]) -> Any:
    """The bench to evaluate on during training, or None."""
    if not paths:
        return None
    from cheems.evaluate import load_bench

    return load_bench(paths)


def _start_outputs(run: _Run, summary: DataSummary, plans: list[EpochPlan], pos: Position, fresh: bool) -> None:
    """The work folder with the resolved config, the logger, and the result (a resumed run keeps its evals).

    A ``fresh`` run starts from an empty work folder: what an earlier run left there without a
    checkpoint (logs, a half-saved model) goes.
    """
    import json

    config, output = run.config, run.work
    start_work_folder(run, fresh)
    run.logger = TrainLogger(output, config.logging, run.main, run.console, pos.global_step)
    run.result = TrainResult(
        output_dir=Path(config.output),
        global_step=pos.global_step,
        epochs=config.epochs,
        data=summary,
        epoch_plans=[
            {
                "epoch": e + 1,
                "batches": len(p.batches),
                "pairs_covered": p.pairs_covered,
                "pairs_total": p.pairs_total,
                "forward_passes": p.forward_passes,
            }
            for e, p in enumerate(plans)
        ],
    )
    if run.main and config.resume and (output / METRICS_FILE).exists():
        old = json.loads((output / METRICS_FILE).read_text())
        run.result.evals = [e for e in old.get("evals", []) if e["step"] <= pos.global_step]


# ---------------------------------------------------------------------- the loop's steps
def _describe_epoch(plan: EpochPlan, epoch: int, epochs: int) -> str:
    return (
        f"epoch {epoch + 1}/{epochs}: {len(plan.batches)} batches, pairs covered "
        f"{plan.pairs_covered}/{plan.pairs_total} ({plan.coverage:.1%}), forward passes {plan.forward_passes}"
    )


def _disentangled_loss(
    run: _Run, model: Any, rewards: torch.Tensor, pairs: torch.Tensor, lengths: list[int]
) -> tuple[torch.Tensor, dict[str, float]]:
    """:func:`~cheems.train.length_head.disentangled_loss` with the run's weights (``--length-head``)."""
    config = run.config
    return disentangled_loss(
        rewards,
        pairs,
        torch.tensor(lengths, dtype=torch.float32),
        run.accelerator.unwrap_model(model).head_cosine,
        reg_coef=config.reg_coef,
        length_corr_weight=config.length_corr_weight,
        quality_corr_weight=config.quality_corr_weight,
        orthogonal_weight=config.orthogonal_weight,
    )


def _describe_lm(config: TrainConfig, lm: LmTargets) -> str:
    """The line the trainer says about ``--lm-weight`` once the targets are known."""
    w = config.lm_weight
    if config.lm_target == "critique":
        what = f"the critiques of {len(lm.critiques)} responses"
    else:
        what = f"the {len(lm.starts)} best-ranked responses"
    return f"joint objective: (1-{w:g})*BT + {w:g}*LM, the next-token loss on {what}"


def _eval_due(every: int, step: int, epoch_end: bool) -> bool:
    """Evaluate after this optimizer step: every ``every`` steps, or (``every`` 0) at the end of each epoch."""
    return step % every == 0 if every else epoch_end


def _evaluate(run: _Run, model: Any, encoder: RewardEncoder, bench: Any, epoch: float) -> None:
    """Score the bench with the model in memory; the main process records, logs and prints the report."""
    from cheems.evaluate import evaluate_scores

    accelerator, step = run.accelerator, run.result.global_step
    if run.deepspeed or run.main:  # ZeRO-3 needs every rank in each forward; DDP scores on rank 0 only
        scores = score_in_memory(
            quality_model(accelerator.unwrap_model(model)),
            encoder,
            [r for recs in bench.values() for r in recs],
            batch_size=run.config.eval_batch_size,
            device=accelerator.device,
            autocast=accelerator.autocast,
        )
    if run.main:
        report = evaluate_scores(bench, scores, "training").to_dict()
        run.result.evals.append({"step": step, "epoch": round(epoch, 4), **report})
        run.logger.eval(step, epoch, report)
        run.say(describe_eval(step, report))
    accelerator.wait_for_everyone()


def _last_step_unevaluated(run: _Run) -> bool:
    """Whether the final step has no evaluation yet.

    Only the main process keeps the evaluations (a resumed run reads them back from
    metrics.json), so it decides and every process follows: they all take part in the next one.
    """
    evals = run.result.evals
    missing = [not evals or evals[-1]["step"] != run.result.global_step]
    if run.accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        broadcast_object_list(missing, from_process=0)
    return missing[0]


def _save_model(
    run: _Run, model: Any, tokenizer: Any, encoder: RewardEncoder, lm_head: torch.Tensor | None = None
) -> None:
    """Write the trained model as a Hugging Face folder with its config and metrics into the work folder,
    move that onto ``config.output`` (an old model there goes only now); end the run.

    The folder records the ``encoder``'s max length and input format, so ``cheems score``/``eval``/``bon`` read
    the model as the run's own evaluation did."""
    accelerator = run.accelerator
    accelerator.wait_for_everyone()
    unwrapped = quality_model(accelerator.unwrap_model(model))  # the length head is dropped here
    state_dict = None
    if run.deepspeed:
        full = accelerator.get_state_dict(model)  # gathers ZeRO-3 shards; every rank must call it
        state_dict = {k.removeprefix("model."): v for k, v in full.items()} if full is not None else None

    def write(work: Path) -> RewardModel:
        facts = training_facts(run.config, run.result.data, run.result.global_step)
        recorded = encoder.recorded()
        save_reward_model(unwrapped, tokenizer, work, state_dict=state_dict, recorded=recorded, training=facts)
        if run.config.keep_lm_head:  # the trained head (--lm-weight), else the checkpoint's untouched
            kept = unwrapped.own_lm_head() if run.config.lm_weight else lm_head
            save_causal_lm(unwrapped, kept, tokenizer, work / LM_FOLDER)
        return unwrapped

    save_run(run, "the reward model", tokenizer, write)
