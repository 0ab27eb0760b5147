"""CLI start-up: wall time of ``cheems --help``, ``import cheems.cli.main`` and a small ``cheems validate``, this
tree vs a git ref.

Every command pays this before it reads a byte, so a slower start shows in every run. The baseline
is a git ref (default ``cdf0e02``: main before issue 9's config layer) checked out in a temporary
worktree; both trees run alternately in one process, ``--runs`` times each, and the medians print.

    python benchmarks/cli_startup.py [--baseline REF] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBES = {
    "python -m cheems --help": ["-m", "cheems", "--help"],
    "import cheems.cli.main": ["-c", "import cheems.cli.main"],
    "python -m cheems validate (demo sample, 40 records)": [
        "-m",
        "cheems",
        "validate",
        str(ROOT / "src" / "cheems" / "assets" / "demo" / "open.jsonl"),
    ],
}


def seconds(src: Path, args: list[str]) -> float:
    """Wall time of one fresh interpreter running ``args`` with ``src`` first on the path."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env={"PYTHONPATH": str(src), "PATH": ""}, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    """Print a markdown table of median start-up times, baseline vs this tree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="cdf0e02")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), args.baseline], check=True
        )
        try:
            trees = {f"baseline ({args.baseline})": base / "src", "this tree": ROOT / "src"}
            times: dict[tuple[str, str], list[float]] = {(t, p): [] for t in trees for p in PROBES}
            for _ in range(args.runs):  # alternate, so load on the machine hits both alike
                for tree, src in trees.items():
                    for probe, probe_args in PROBES.items():
                        times[tree, probe].append(seconds(src, probe_args))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=True)
    print(f"| probe | {' | '.join(trees)} |\n|---|---|---|")
    for probe in PROBES:
        cells = [f"{statistics.median(times[tree, probe]):.3f} s" for tree in trees]
        print(f"| `{probe}` | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
