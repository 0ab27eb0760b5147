"""Training logs: one pooled row per optimizer step (all processes' batches), written to CSV
(``train_log.csv``, ``eval_log.csv``) and, when asked and installed, TensorBoard; main process only.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

LOG_FILE = "train_log.csv"
EVAL_FILE = "eval_log.csv"
LOG_FIELDS = [
    "step",
    "epoch",
    "loss",
    "bt_loss",
    "prior",
    "lm_loss",
    "accuracy",
    "pairs",
    "responses",
    "tokens",
    "lr",
    "grad_norm",
    "seconds",
]


class TrainLogger:
    """CSV rows (and TensorBoard scalars when asked and installed); main process only."""

    def __init__(
        self,
        output: Path,
        kinds: list[str],
        active: bool,
        console: Any,
        resume_step: int,
        fields: Sequence[str] = LOG_FIELDS,
    ) -> None:
        self.active = active
        self.fields = list(fields)  # the columns of train_log.csv: another trainer's step rows have their own
        self.csv_path = output / LOG_FILE
        self.eval_path = output / EVAL_FILE
        self.use_csv = "csv" in kinds
        self.tb = None
        if not active:
            return
        if self.use_csv:
            for path in (self.csv_path, self.eval_path):
                self._truncate(path, resume_step)
        if "tensorboard" in kinds:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(
                    str(output / "tensorboard"), purge_step=resume_step + 1 if resume_step else None
                )
            except ImportError:
                from rich.text import Text  # a style for our words, never markup in a string

                console.print(
                    Text.assemble(
                        ("warning ", "yellow"),
                        "tensorboard is not installed (pip install tensorboard); logging to CSV only",
                    ),
                    soft_wrap=True,
                )

    @staticmethod
    def _truncate(path: Path, resume_step: int) -> None:
        """Keep only rows up to ``resume_step`` (all rows are from a run being resumed or replaced)."""
        if not path.exists():
            return
        if resume_step == 0:
            path.unlink()
            return
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
            fields = list(rows[0].keys()) if rows else []
        with path.open("w", newline="", encoding="utf-8") as f:
            if fields:
                w = csv.DictWriter(f, fieldnames=fields)
                w.writeheader()
                w.writerows(r for r in rows if int(r["step"]) <= resume_step)

    def _append(self, path: Path, row: dict[str, Any], fields: list[str]) -> None:
        new = not path.exists()
        if not new and path == self.csv_path:  # a run resumed from before a column was added keeps its header
            with path.open(newline="", encoding="utf-8") as f:
                fields = next(csv.reader(f), fields)
        with path.open("a", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow(row)

    def step(self, row: dict[str, Any]) -> None:
        """Write one step row (:func:`step_row`)."""
        if not self.active:
            return
        if self.use_csv:
            self._append(self.csv_path, row, self.fields)
        if self.tb is not None:
            for key in ("loss", "bt_loss", "prior", "lm_loss", "accuracy", "lr", "grad_norm"):
                if row.get(key) is not None:
                    self.tb.add_scalar(f"train/{key}", row[key], row["step"])

    def eval(self, step: int, epoch: float, report: dict[str, Any]) -> None:
        """Write one evaluation: overall, and accuracy and exact match per subset."""
        if not self.active:
            return
        row: dict[str, Any] = {"step": step, "epoch": round(epoch, 4), "overall": report["overall"]}
        for name, sub in report["subsets"].items():
            row[f"{name}/accuracy"] = sub["accuracy"]
            row[f"{name}/exact_match"] = sub["exact_match"]
        if self.use_csv:
            self._append(self.eval_path, row, list(row))
        if self.tb is not None:
            for key, value in row.items():
                if key not in ("step", "epoch") and value is not None:
                    self.tb.add_scalar(f"eval/{key}", value, step)

    def close(self) -> None:
        """Flush and close TensorBoard (the CSV files are closed after every row)."""
        if self.tb is not None:
            self.tb.close()


def step_row(
    window: list[dict[str, float]], accelerator: Any, step: int, epoch: float, lr: float, grad_norm: Any, seconds: float
) -> dict[str, Any]:
    """One log row: the step's batches (all processes) pooled; pair-weighted BT loss and accuracy, token-weighted
    ``lm_loss`` (``--lm-weight``; None without it or when the step had no LM token)."""
    sums = torch.tensor(
        [
            sum(w["loss"] * w["n"] for w in window),
            sum(w["bt_loss"] * w["pairs"] for w in window),
            sum(w["prior"] * w["n"] for w in window),
            sum(w["accuracy"] * w["pairs"] for w in window),
            sum(w["pairs"] for w in window),
            sum(w["n"] for w in window),
            sum(w["tokens"] for w in window),
            sum(w.get("lm_loss", 0.0) * w.get("lm_tokens", 0) for w in window),
            sum(w.get("lm_tokens", 0) for w in window),
        ],
        dtype=torch.float64,
    )
    if accelerator.num_processes > 1:
        sums = accelerator.reduce(sums.to(accelerator.device), reduction="sum").cpu()
    loss, bt, prior, correct, pairs, n, tokens, lm, lm_tokens = sums.tolist()
    return {
        "step": step,
        "epoch": round(epoch, 4),
        "loss": loss / n if n else float("nan"),
        "bt_loss": bt / pairs if pairs else 0.0,
        "prior": prior / n if n else float("nan"),
        "lm_loss": lm / lm_tokens if lm_tokens else None,
        "accuracy": correct / pairs if pairs else 0.0,
        "pairs": int(pairs),
        "responses": int(n),
        "tokens": int(tokens),
        "lr": lr,
        "grad_norm": None if grad_norm is None else float(grad_norm),
        "seconds": round(seconds, 2),
    }


def describe_eval(step: int, report: dict[str, Any]) -> str:
    """The line the trainer prints after evaluating at ``step``."""
    subs = ", ".join(f"{n} acc {v['accuracy']:.3f} exact {v['exact_match']:.3f}" for n, v in report["subsets"].items())
    return f"eval @ step {step}: overall {report['overall']:.4f} ({subs})"
