"""Wall time and peak memory of each data step on one record file, for one or more ``cheems`` commands.

Runs, as subprocesses, on the file given (e.g. from ``benchmarks/synth_preference.py``):
``validate``, ``import official``, ``resolve``, ``split``, ``curate filter``, ``curate debias``, ``score --model
length`` (on the resolved file, no cache), ``curate distant`` (the resolved file with those scores) and ``eval
--scores`` (that scores file against the resolved file).
Each ``--cheems LABEL=COMMAND`` is run through every step in turn (default: ``before=`` this
Python with ``-m cheems``), so an in-memory and a streaming implementation are measured side by side
in one run, e.g. ``--cheems "before=/work/main/.venv/bin/python -m cheems"
--cheems "after=env PYTHONPATH=/work/wt-stream/src /work/main/.venv/bin/python -m cheems"``.

Per step: wall seconds; ``max_rss`` = the kernel's peak resident set of the step's process
(``os.wait4`` rusage, exact, but for a process pool it is the largest single process, not the sum);
``tree_rss`` = the peak of the summed RSS of the process and all its descendants, sampled every
``--interval`` seconds (what a pool of workers holds, counting a page they share, such as the
interpreter's or numpy's, once in each process; a short spike between samples can be missed); ``tree_pss`` = the
same peak of the summed proportional set size (``/proc/PID/smaps_rollup``: a page shared by k processes
counts 1/k in each, so the sum is the memory the tree takes from the machine); and the SHA-256 of every
output, compared with the first label's (byte-identical or not).
Children run with ``PYTHONHASHSEED=0`` (see ``run_label``; a guard: set order must never reach an output) and their
output folder as working directory.
Prints a markdown table and writes everything as JSON.

    python benchmarks/data_scale.py FILE.jsonl [--cheems LABEL=COMMAND ...] [--json out.json] [--workdir DIR]
        [--steps "curate filter,eval --scores"]

``--steps`` runs some steps only; a step that reads an earlier step's output (``resolved.jsonl``,
``scores.jsonl``) finds it in ``--workdir``/LABEL, so run the earlier step there first (or put the file there).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

STEPS: list[tuple[str, list[str], list[str]]] = [
    # (name, arguments, output files to hash); "{in}" is the data file, outputs are relative to the label's folder
    ("validate", ["validate", "{in}"], []),
    ("import", ["import", "official", "{in}", "-o", "imported.jsonl"], ["imported.jsonl"]),
    ("resolve", ["resolve", "{in}", "-o", "resolved.jsonl", "--stats-json", "resolve.json"], ["resolved.jsonl"]),
    ("split", ["split", "{in}", "--train", "train.jsonl", "--test", "test.jsonl"], ["train.jsonl", "test.jsonl"]),
    ("curate filter", ["curate", "filter", "{in}", "-o", "filtered.jsonl", "--report-json", "filter.json"],
     ["filtered.jsonl", "filter.json"]),
    ("curate debias", ["curate", "debias", "{in}", "-o", "debiased.jsonl", "--report-json", "debias.json"],
     ["debiased.jsonl", "debias.json"]),
    ("score --model length", ["score", "--model", "length", "--bench", "resolved.jsonl", "-o", "scores.jsonl",
                              "--no-cache"], ["scores.jsonl"]),
    ("curate distant", ["curate", "distant", "resolved.jsonl", "--scores", "scores.jsonl", "-o", "distant.jsonl",
                        "--report-json", "distant.json"], ["distant.jsonl", "distant.json"]),
    ("eval --scores", ["eval", "--bench", "resolved.jsonl", "--scores", "scores.jsonl", "--output-json", "eval.json"],
     ["eval.json"]),
]  # fmt: skip


def tree_memory(pid: int) -> tuple[int, int]:
    """Summed resident and proportional bytes (RSS, PSS) of ``pid`` and all its descendants (0 once gone)."""
    rss = pss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            rss += next(int(x.split()[1]) * 1024 for x in status.splitlines() if x.startswith("VmRSS:"))
            pss += next(int(x.split()[1]) * 1024 for x in rollup.splitlines() if x.startswith("Pss:"))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue  # exited between listing and reading, or a zombie without VmRSS
    return rss, pss


def run_step(command: list[str], cwd: Path, log: Path, env: dict[str, str], interval: float) -> dict:
    """Run ``command`` to completion; its wall time, kernel max RSS, sampled tree RSS and PSS peaks, exit code."""
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(interval):
            peak[:] = map(max, peak, tree_memory(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)  # rusage of this child alone (RUSAGE_CHILDREN accumulates)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    return {
        "seconds": round(wall, 2),
        "max_rss": usage.ru_maxrss * 1024,
        "tree_rss": peak[0],
        "tree_pss": peak[1],
        "rc": proc.returncode,
    }


def sha256(path: Path) -> str | None:
    """Hex SHA-256 of a file, streamed; None when it was not written."""
    if not path.exists():
        return None
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run_label(
    label: str, cheems: list[str], data: Path, workdir: Path, interval: float, steps: list[str]
) -> list[dict]:
    """The ``steps`` named (in STEPS order) with one ``cheems`` command, outputs under ``workdir/label``."""
    out = workdir / label
    out.mkdir(parents=True, exist_ok=True)
    # Each label runs in its own folder with relative output names, so outputs that echo their
    # inputs' paths (eval's JSON names the scores file) compare equal across labels. A fixed hash
    # seed: `resolve` writes `rank` in set order, which otherwise changes from run to run.
    pythonpath = os.pathsep.join(
        str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    )
    env = {**os.environ, "CHEEMS_CACHE_DIR": str(out / "cache"), "PYTHONHASHSEED": "0", "PYTHONPATH": pythonpath}
    rows = []
    for name, args, outputs in STEPS:
        if name not in steps:
            continue
        argv = cheems + [a.replace("{in}", str(data)) for a in args]
        row = {"label": label, "step": name, "command": shlex.join(argv)}
        row.update(run_step(argv, out, out / f"{name.split()[0]}-{len(rows)}.log", env, interval))
        row["outputs"] = {f: sha256(out / f) for f in outputs}
        print(
            f"{label:>8} {name:<22} {row['seconds']:>8.1f} s {row['max_rss'] / 2**20:>8.0f} MiB "
            f"tree {row['tree_rss'] / 2**20:>8.0f} MiB (PSS {row['tree_pss'] / 2**20:.0f}) rc={row['rc']}",
            flush=True,
        )
        rows.append(row)
        if row["rc"]:
            print((out / f"{name.split()[0]}-{len(rows) - 1}.log").read_text()[-2000:], file=sys.stderr)
    return rows


def table(rows: list[dict], size: int) -> str:
    """Markdown: one line per step and label, with RSS per file size and whether outputs match the first label."""
    first = {r["step"]: r["outputs"] for r in rows if r["label"] == rows[0]["label"]}
    lines = [
        "| step | label | wall s | peak RSS MiB | tree RSS MiB | tree PSS MiB | peak RSS / file "
        "| outputs = first label |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(rows, key=lambda r: [s[0] for s in STEPS].index(r["step"])):
        same = "n/a" if not r["outputs"] else ("yes" if r["outputs"] == first[r["step"]] else "**no**")
        same = same if r["rc"] == 0 else f"failed (rc {r['rc']})"
        lines.append(
            f"| {r['step']} | {r['label']} | {r['seconds']:.1f} | {r['max_rss'] / 2**20:,.0f} | "
            f"{r['tree_rss'] / 2**20:,.0f} | {r['tree_pss'] / 2**20:,.0f} | {r['max_rss'] / size:.2f}x | {same} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, help="record file (e.g. from synth_preference.py)")
    parser.add_argument(
        "--cheems",
        action="append",
        metavar="LABEL=COMMAND",
        help=f"a cheems command to measure (repeatable); default: before={sys.executable} -m cheems",
    )
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--workdir", type=Path, help="where outputs go (default: a new temporary folder)")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between tree RSS/PSS samples")
    parser.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="LABEL=MIB",
        help="check that every step of LABEL stays within MIB of tree RSS (exit 1 if not); e.g. after=300",
    )
    parser.add_argument(
        "--steps",
        default=",".join(s[0] for s in STEPS),
        help="comma-separated steps to run (default: all): " + ", ".join(s[0] for s in STEPS),
    )
    args = parser.parse_args()
    steps = [s.strip() for s in args.steps.split(",")]
    unknown = [s for s in steps if s not in [name for name, _, _ in STEPS]]
    if unknown:
        parser.error(f"--steps: unknown step(s) {', '.join(unknown)}; choose from {', '.join(s[0] for s in STEPS)}")
    specs = args.cheems or [f"before={shlex.join([sys.executable, '-m', 'cheems'])}"]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cheems-scale-"))
    size = args.data.stat().st_size
    rows = []
    for spec in specs:
        label, _, command = spec.partition("=")
        rows += run_label(label, shlex.split(command), args.data.resolve(), workdir, args.interval, steps)
    print(f"\n{args.data} ({size / 1e6:,.0f} MB), outputs in {workdir}, {os.cpu_count()} cores\n")
    print(table(rows, size))
    if args.json:
        args.json.write_text(json.dumps({"data": str(args.data), "bytes": size, "rows": rows}, indent=2) + "\n")
    if not within_budget(rows, dict(b.split("=", 1) for b in args.budget)):
        sys.exit(1)


def within_budget(rows: list[dict], budgets: dict[str, str]) -> bool:
    """Print each step of a budgeted label against its memory budget (tree RSS, the stricter measure; PSS
    beside it); True when all are within."""
    ok = True
    for r in rows:
        if r["label"] in budgets:
            limit = float(budgets[r["label"]])
            used = r["tree_rss"] / 2**20
            ok &= used <= limit
            verdict = "<=" if used <= limit else "> **over**"
            pss = r["tree_pss"] / 2**20
            print(f"{r['label']} {r['step']}: tree RSS {used:,.0f} MiB {verdict} {limit:,.0f} (tree PSS {pss:,.0f})")
    return ok


if __name__ == "__main__":
    main()
