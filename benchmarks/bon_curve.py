"""Best-of-n curves of several ``cheems bon --output-json`` files on one pool: one PNG and a Markdown table.

    python benchmarks/bon_curve.py J1.json J2.json … --names NAME1 NAME2 … --plot curve.png

The table has a row per n: each scorer's mean quality and top-tier share of its picks, then the oracle's and
a random pick's (read from the first file: on one pool with the same N and draw they are the same for all).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cheems.analysis.bon import curve_png
from cheems.data.io import write_bytes


def markdown(runs: dict[str, dict]) -> str:
    """The curves as a Markdown table: ``quality / top-tier share`` per scorer, oracle and random pick."""
    first = next(iter(runs.values()))
    names = [*runs, "oracle", "random pick"]
    lines = ["| n | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for i, point in enumerate(first["curve"]):
        cells = [runs[name]["curve"][i] for name in runs]
        values = [(c["quality"]["pick"], c["top_tier"]["pick"]) for c in cells]
        values += [(point["quality"][k], point["top_tier"][k]) for k in ("oracle", "random")]
        lines.append(f"| {point['n']} | " + " | ".join(f"{q:.3f} / {t:.3f}" for q, t in values) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--names", nargs="+", required=True)
    parser.add_argument("--plot", type=Path, required=True)
    args = parser.parse_args()
    if len(args.names) != len(args.files):
        parser.error("give one name per file")
    runs = {name: json.loads(path.read_text()) for name, path in zip(args.names, args.files)}
    first = next(iter(runs.values()))
    write_bytes(args.plot, curve_png(runs, title=f"best-of-n, sample {first['sample']} seed {first['seed']}"))
    print(markdown(runs))
    print(
        f"\n{first['gold']['prompts']} prompts with gold; fewer than n candidates: "
        + ", ".join(f"n={p['n']}: {p['fewer_candidates']}" for p in first["curve"])
    )


if __name__ == "__main__":
    main()
