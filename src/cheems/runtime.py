"""What every stage shares about the machine and the run: the device, the precision rule, the
progress bar, the content hash and a model folder's file identity. One place each, so scoring,
training and the local judge agree.

Below every package in the flow (like :mod:`cheems.errors`); torch and rich are imported inside
functions only, so a run whose scores all come from the cache never loads them.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import sys
import time
from contextlib import nullcontext
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


# ---------------------------------------------------------------- device and precision


def pick_device(device: str | None = None, *, cpu: bool = False) -> str:
    """``device`` as given; else ``cpu`` when asked for, else ``cuda`` when a GPU is visible, else ``cpu``.

    Under a launcher (torchrun, accelerate launch) a plain ``cuda`` means this process's own GPU,
    ``cuda:LOCAL_RANK``: one process per GPU, never all of them on the first.
    """
    if not device:
        import torch

        device = "cuda" if not cpu and torch.cuda.is_available() else "cpu"
    if device == "cuda" and process_rank()[1] > 1:
        return f"cuda:{local_rank()}"
    return device


@cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively: AVX512-BF16 or AMX as torch detects them, else Arm BF16 (or the
    x86 flags) in /proc/cpuinfo. Detected on each machine, never assumed: machines of one cluster differ.

    Without it torch emulates bf16 and matmuls get far slower than fp32 (an AVX2 machine
    measured 0.9 vs 110 GFLOP/s), so ``auto`` must not pick bf16 there.
    """
    import torch

    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):  # private, so looked up with care
        supported = getattr(torch.cpu, probe, None)
        if callable(supported) and supported():
            return True
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = {w for line in f if line.startswith(("flags", "Features")) for w in line.split()}
    except OSError:  # not Linux: stay on the safe side
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def cpu_bf16_report() -> str:
    """What this CPU offers for bf16, as torch and /proc/cpuinfo see it (for benchmarks and bug reports)."""
    import torch

    native = "native bf16 (AVX512-BF16/AMX)" if cpu_has_native_bf16() else "no native bf16"
    return f"{native}, torch CPU capability {torch.backends.cpu.get_cpu_capability()}"


def compute_dtype(device: str, setting: str = "auto") -> "torch.dtype | None":
    """The reduced precision to compute in on ``device`` for ``setting``; None = plain fp32.

    ``auto`` is the one rule of the project: bf16 where the hardware computes it natively (a GPU
    that supports it, a CPU with AVX512-BF16/AMX: :func:`cpu_has_native_bf16`), fp32 everywhere else,
    whichever is faster there. On a CPU with AVX512-BF16, bf16 autocast took 0.54-0.76x fp32's time to
    score and 0.44-0.51x to train m3e-small (BENCHMARKS.md, "Issue 31: bf16 or fp32 on a CPU",
    ``benchmarks/cpu_bf16.py``); on one without, bf16 is ~100x slower. ``fp32``, ``fp16`` and ``bf16``
    force a choice.
    """
    import torch

    if setting == "fp32":
        return None
    if setting == "fp16":
        return torch.float16
    if setting == "bf16":
        return torch.bfloat16
    kind = torch.device(device).type
    if kind == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    if kind == "cpu":
        return torch.bfloat16 if cpu_has_native_bf16() else None
    return None


def bf16_wanted(setting: bool | str, device: str) -> bool:
    """A ``bf16: true | false | auto`` setting as a yes or no on ``device`` (``auto``: :func:`compute_dtype`)."""
    if setting is True or setting is False:
        return setting
    import torch

    return compute_dtype(device, "auto") is torch.bfloat16


def inference_precision(device: str, setting: str = "auto") -> "tuple[torch.dtype, torch.dtype | None]":
    """(weights dtype, autocast dtype or None) to run a model for inference on ``device`` at ``setting``.

    The compute dtype is :func:`compute_dtype`'s. The weights are held in it where the hardware computes it
    natively: a GPU (under autocast, so softmax and norms stay fp32), and bf16 on a CPU with bf16 units, with no
    autocast on top: its casts cost 30% of m3e-small's scoring time there and gave the very same scores, which stay
    within 3e-3 of fp32's, well inside the ``batch_invariance`` tolerance (BENCHMARKS.md "Issue 33: scoring
    throughput"). Elsewhere fp32 weights (fp16 on a CPU runs under autocast), since reduced-precision weights on a
    CPU without its units crawl. Training keeps fp32 weights: this is for inference only.
    """
    import torch

    amp = compute_dtype(device, setting)
    kind = torch.device(device).type
    if amp is None:
        return torch.float32, None
    if kind == "cuda":
        return amp, amp
    if kind == "cpu" and amp == torch.bfloat16 and cpu_has_native_bf16():
        return amp, None
    return torch.float32, amp


def autocast(device: str, dtype: "torch.dtype | None") -> Any:
    """An autocast context for ``dtype`` on ``device`` (a no-op one for fp32)."""
    if dtype is None:
        return nullcontext()
    import torch

    return torch.autocast(torch.device(device).type, dtype=dtype)


# ---------------------------------------------------------------- several processes (torchrun, accelerate launch)

# How long a process waits in a collective for the others: long enough for the slowest process to
# finish its share of a large scoring run, short enough that a lost peer ends the run, not hangs it.
COLLECTIVE_TIMEOUT = timedelta(minutes=30)


def process_rank() -> tuple[int, int]:
    """(rank, world size) of this process, from the ``RANK`` and ``WORLD_SIZE`` a launcher sets; (0, 1) alone."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def local_rank() -> int:
    """This process's index on its machine (``LOCAL_RANK``): the GPU it owns."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_main_process() -> bool:
    """Whether this process is rank 0 (the only one that prints and writes files); True when not launched."""
    return process_rank()[0] == 0


def join_process_group() -> None:
    """Join the launcher's process group once (a group already set up, e.g. by accelerate, is reused).

    Objects travel over gloo (they live in CPU memory); tensors on GPUs over nccl where there are
    GPUs. Waits at most :data:`COLLECTIVE_TIMEOUT` for the other processes.
    """
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank())
        backend = "cpu:gloo,cuda:nccl"
    dist.init_process_group(backend, timeout=COLLECTIVE_TIMEOUT)
    atexit.register(_destroy_process_group)  # a run that fails: torchrun ends the others


def _destroy_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def leave_process_group() -> None:
    """At the end of a command that succeeded under a launcher: wait for every process (a barrier), then leave
    the group. Without the barrier the first process to finish tears its gloo connections down while another
    still closes its own, and that one aborts ('terminate called without an active exception', SIGABRT)."""
    if "torch.distributed" not in sys.modules:  # never joined: a command that did not touch torch
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


# ---------------------------------------------------------------- progress


class ProgressBar:
    """The one progress bar (rich, on stderr): a count out of ``total``, time left, and a stats text.

    - ``enabled``: False draws nothing (``--no-progress``); a process other than rank 0 never draws.
    - ``after_s``: appear only once the work has run this long (short runs stay quiet).
    - ``terminal_only``: draw only when the console is a terminal (no bar frames in a log file).
    - ``log_every_s``: off a terminal (with ``terminal_only``), write one plain line of progress at most this often
      instead, so a long run in a log or a pipe still shows it is alive.
    - ``transient``: remove the bar when done.
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        enabled: bool = True,
        after_s: float = 0.0,
        terminal_only: bool = False,
        transient: bool = False,
        completed: int = 0,
        console: Any = None,
        log_every_s: float | None = None,
    ) -> None:
        self.total, self.label = total, label
        self.done: float = completed  # a scorer on one of k processes advances by 1/k of its items
        self.enabled = enabled and total > 0 and is_main_process()
        self.after_s, self.transient, self.console = after_s, transient, console
        self.terminal_only, self.log_every_s = terminal_only, log_every_s
        self.logged: float | None = None  # when the last plain line was written (off a terminal with log_every_s)
        self.start = time.monotonic()
        self.stats = ""
        self.bar: Any = None
        self.task: Any = None
        self._show_if_due()

    def _show_if_due(self) -> None:
        if self.bar is not None or not self.enabled or time.monotonic() - self.start < self.after_s:
            return
        if self.logged is not None:
            self._log_if_due()
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from cheems.terminal import SafeConsole

        console = self.console or SafeConsole(stderr=True)
        if self.terminal_only and not (console.is_terminal and sys.stderr.isatty()):
            self.enabled = self.log_every_s is not None
            if self.enabled:  # plain lines instead, the first once log_every_s has passed
                self.console, self.logged = console, self.start
                self._log_if_due()
            return
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=console,
            transient=self.transient,
        )
        self.bar.start()
        self.task = self.bar.add_task(self.label, total=self.total, completed=self.done, stats=self.stats)

    def _log_if_due(self) -> None:
        """Off a terminal: one plain line (label, count, share, time, stats) if ``log_every_s`` has passed."""
        now = time.monotonic()
        if self.logged is None or self.log_every_s is None or now - self.logged < self.log_every_s:
            return
        self.logged = now
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        stats = f", {self.stats}" if self.stats else ""
        line = f"{self.label}: {self.done:g}/{self.total}{share}, {now - self.start:.0f} s{stats}"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def advance(self, n: float = 1, stats: str | None = None) -> None:
        """``n`` more done; ``stats`` (e.g. ``loss 0.41 acc 0.72``) replaces the text after the bar."""
        self.done += n
        if stats is not None:
            self.stats = stats
        self._show_if_due()
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, stats=self.stats)

    def close(self) -> None:
        """Stop drawing (the final state stays on screen unless ``transient``)."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- content hash


def content_hash(value: Any, *, keyed: bool = False) -> str:
    """sha256 (hex) of the JSON of ``value``: the one content hash behind every cache key.

    Texts and messages (``keyed=False``) are hashed in their order as compact JSON; identities
    (``keyed=True``: a model's files and settings, a judge's endpoint and template) with their keys
    sorted, so the order a dict was built in does not matter. The two spellings are those every
    score and judge cache written so far is keyed by; changing either would make them all miss.
    """
    if keyed:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def folder_files(folder: Path) -> dict[str, list[int]]:
    """Name -> [size, mtime] of a model folder's files: changes when weights or tokenizer change.

    Cheap (no file is read), so a scorer or judge can be fingerprinted without loading weights.
    Hidden files and READMEs are left out: editing a model card does not change the model.
    """
    files = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and not p.name.startswith(".") and not p.name.upper().startswith("README"):
            st = p.stat()
            files[p.name] = [st.st_size, st.st_mtime_ns]
    return files


# ---------------------------------------------------------------- the package's version


@cache
def package_version() -> str:
    """cheems' version: the installed package's metadata, else (a source checkout run with ``src`` on
    ``PYTHONPATH``, never installed) the ``version`` line of the checkout's ``pyproject.toml``.

    Read on first use, not at ``import cheems`` (``importlib.metadata`` scans ``sys.path``).
    """
    from importlib import metadata

    try:
        return metadata.version("cheems")
    except metadata.PackageNotFoundError:
        pass
    import re

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
    except OSError:
        found = None
    return found.group(1) if found else "0+unknown"


# ---------------------------------------------------------------- lazy package exports


def lazy_exports(package: str, exports: dict[str, str]) -> Any:
    """A module ``__getattr__`` (PEP 562) for ``package``: ``exports`` maps each public name to the
    submodule holding it, imported on first use (``"module:attr"`` when the submodule's name for it differs,
    ``"module:"`` for the submodule itself).

    Importing one submodule (the CLI reads the settings models at start-up) then costs that module
    alone, not every sibling the package re-exports (networkx, the judge, torch).
    """
    import importlib

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, itself, attr = exports[name].partition(":")
        found = importlib.import_module(f"{package}.{module}")
        return found if itself and not attr else getattr(found, attr or name)

    return __getattr__


def callable_package(module: Any, target: str) -> None:
    """Make the package ``module`` callable as ``target`` (``"submodule:function"``, imported on the first call).

    ``cheems.evaluate``, ``cheems.judge`` and ``cheems.train`` are each a package and the public function of that
    name: the package stays the package (``import cheems.evaluate.checks`` and ``from cheems.train import
    config`` work as ever) and calling it calls the function. The package reads as the function too:
    ``inspect.signature`` gives the function's, and its ``__doc__`` is the function's signature and docstring, which
    is what ``help(cheems.evaluate)`` shows (the package's own notes stay in its source).
    """
    import importlib
    import inspect
    import types

    submodule, _, name = target.partition(":")
    public = module.__name__.rpartition(".")[2]

    def function() -> Any:
        return getattr(importlib.import_module(f"{module.__name__}.{submodule}"), name)

    class _Callable(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            from cheems.arguments import checked  # the public function: its arguments checked as cheems.NAME's are

            return checked(function(), public)(*args, **kwargs)

        @property
        def __signature__(self) -> inspect.Signature:  # read by inspect.signature
            return inspect.signature(function())

        @property
        def __doc__(self) -> str:  # type: ignore[override]  # read by help(): the function imported only then
            return f"{public}{inspect.signature(function())}\n\n{inspect.getdoc(function()) or ''}"

    module.__class__ = _Callable
