"""Behaviour check for a redesign that must change no behaviour (issue 32).

Runs a fixed list of ``cheems`` commands (the demo without training, eval with every ``--metric``,
``--compat upstream``, suite, doctor, compare, leaderboard, correlate, bon, winrate, analyze bias,
validate ``--plot`` and every command's ``--help``) with the ``cheems`` that ``PYTHONPATH`` selects, and records
each command's exit code, stdout, stderr and the files it wrote under ``OUT``. Two such folders, one made with
the code before a change and one after, are then compared by this script::

    PYTHONPATH=/tmp/old/src python benchmarks/same_behaviour.py --out before
    PYTHONPATH=$PWD/src     python benchmarks/same_behaviour.py --out after
    python benchmarks/same_behaviour.py --compare before after      # exit 0: identical

Run the script from ONE tree both times (only PYTHONPATH changes): the inputs are then the same files
(the shipped demo assets of the cheems that runs, tests/data of this tree, and small files written here).

What is normalised, and why (nothing else is):
- the absolute path of OUT and of the cheems package folder, in stdout/stderr and text files (the two runs
  differ in where they run and which src they import);
- PNG files are compared by their decoded pixels, not their bytes (matplotlib writes a Software/version
  text chunk; the pixels are what a user sees);
- progress bars' elapsed/remaining times in stderr, and the loopback fake judge's port;
- SQLite files are compared by their sorted rows, minus the columns and meta rows holding a wall-clock time
  (``created``, ``*_at``, ...), the judge cache's ``judge`` key (a hash of the judge's identity, which holds the
  fake judge's random port) and an annotation project's secrets (``token_hash``, ``csrf``); an annotation
  project's ``tokens.txt`` (fresh random log-in tokens) is compared by its names and token lengths.
Kept in benchmarks/ rather than tests/: it compares two code trees, takes a couple of minutes, and is run by
hand around a redesign, not on every test run.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(ROOT / "tests"))  # the loopback fake judge (tests/fault_server.py)

HELP_COMMANDS = [
    [],
    *[
        [c]
        for c in (
            "validate import resolve split score eval demo dedup decontaminate train judge bon suite compare "
            "generate leaderboard correlate doctor winrate categorize curate annotate analyze"
        ).split()
    ],
    *[["curate", c] for c in ("filter", "distant", "debias", "run")],
    *[["annotate", c] for c in ("init", "serve", "export", "status")],
    ["analyze", "bias"],
]

SUITE_YAML = """\
resamples: 200
benches:
  - name: cheemsbench
    bench: [demo/bench/open.jsonl, demo/bench/human.jsonl]
  - name: rm-bench
    bench: rmbench.jsonl
    metric: rmbench
  - name: rewardbench2
    bench: rewardbench2.jsonl
    metric: bon
    bootstrap_seed: 1
"""


def _t(n: int, c: str) -> str:
    return c * n


def _upstream_files(work: Path) -> None:
    """Small upstream-format files for the metrics tests/data has no file for (RewardBench v1, PPE)."""
    rb = [
        (1, "alpacaeval-easy", 20, 10),
        (2, "alpacaeval-easy", 5, 15),
        (3, "mt-bench-med", 12, 12),
        (4, "llmbar-natural", 30, 8),
        (5, "donotanswer", 9, 18),
        (6, "math-prm", 25, 11),
        (7, "hep-python", 6, 14),
        (8, "anthropic_helpful", 10, 4),
    ]
    rows: list[dict[str, object]] = [
        {
            "prompt": f"question {i}",
            "chosen": _t(c, "c"),
            "chosen_model": "GPT-4",
            "rejected": _t(r, "r"),
            "rejected_model": "Llama-2-7b-chat",
            "subset": s,
            "id": i,
        }
        for i, s, c, r in rb
    ]
    _write_jsonl(work / "rewardbench-up.jsonl", rows)
    bok = [
        ("q1", [10, 30, 20, 5], [True, False, True, False], "law", [[0, 1], [3, 2]]),
        ("q2", [40, 8, 8], [True, False, False], "law", [[1, 0]]),
        ("q3", [7, 9], [True, True], "math", []),
        ("q4", [3, 6], [False, False], "math", []),
        ("q5", [12, 12, 4], [True, False, False], "math", [[0, 1]]),
    ]
    rows = []
    for qid, lengths, correct, cat, sampled in bok:
        row: dict[str, object] = {"question_id": qid, "category": cat, "model_name": "m", "prompt": f"Q {qid}"}
        row |= {f"response_{i}": _t(n, "abcdefgh"[i]) for i, n in enumerate(lengths, start=1)}
        row |= {"scores": correct, "mean_score": sum(correct) / len(correct), "sampled_conflict_pairs": sampled}
        rows.append(row)
    _write_jsonl(work / "ppe-correctness-up.jsonl", rows)
    hp = [("p1", 20, 10, "model_a", "English"), ("p2", 15, 7, "model_b", "English"), ("p3", 6, 6, "tie", "Chinese")]
    rows = [
        dict[str, object](question_id=q, model_a="a", model_b="b", winner=w, language=lang, prompt=f"prompt {q}")
        | {"response_1": _t(f, "x"), "response_2": _t(s, "y")}
        for q, f, s, w, lang in hp
    ]
    _write_jsonl(work / "ppe-preference-up.jsonl", rows)
    (work / "suite.yaml").write_text(SUITE_YAML, encoding="utf-8")
    (work / "downstream.csv").write_text("name,winrate\nrm-length,0.61\nrm-sim,0.47\nrm-model,0.55\n", "utf-8")


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def steps(demo: Path, judge_url: str) -> list[tuple[str, list[str]]]:
    """The fixed list: (name, argv after ``cheems``), run in order in OUT/work (later steps read earlier files)."""
    bench = ["--bench", "demo/bench/open.jsonl", "demo/bench/human.jsonl"]
    length, sim = "demo/scores.length.jsonl", "demo/scores.similarity-m3e-small.jsonl"
    fast = ["--resamples", "200"]
    imports = [
        ("rmbench", str(TEST_DATA / "rmbench")),
        ("rmb", str(TEST_DATA / "rmb" / "Pairwise_set")),
        ("rewardbench2", str(TEST_DATA / "rewardbench2.jsonl")),
        ("judgebench", str(TEST_DATA / "judgebench.jsonl")),
        ("rewardbench", "rewardbench-up.jsonl"),
        ("ppe-correctness", "ppe-correctness-up.jsonl"),
        ("ppe-preference", "ppe-preference-up.jsonl"),
    ]
    judge = ["--judge-model", "fake-judge", "--base-url", judge_url, "--max-retries", "1", "--no-progress"]
    out: list[tuple[str, list[str]]] = [
        ("demo", ["demo", "--no-train", "-o", "demo"]),
        ("validate-plot", ["validate", str(demo / "human.jsonl"), str(demo / "open.jsonl"), "--plot", "cats.png"]),
        *[(f"import-{f}", ["import", f, src, "-o", f"{f}.jsonl"]) for f, src in imports],
        (
            "eval-cheems",
            ["eval", *bench, "--scores", length, *fast, "--output-json", "rm-length.json"]
            + ["--details", "details-length.jsonl", "--report", "report-length"],
        ),
        (
            "eval-sim",
            ["eval", *bench, "--scores", sim, *fast, "--output-json", "rm-sim.json"]
            + ["--details", "details-sim.jsonl"],
        ),
        (
            "eval-upstream",
            ["eval", *bench, "--scores", length, "--compat", "upstream", *fast] + ["--output-json", "rm-upstream.json"],
        ),
        (
            "eval-model-length",
            ["eval", *bench, "--model", "length", "--no-cache", *fast] + ["--output-json", "rm-model.json"],
        ),
        *[(f"eval-{m}", ["eval", *bench, "--scores", length, "--metric", m, *fast]) for m in ("bon", "pairwise")],
        ("eval-kendall", ["eval", *bench, "--scores", length, "--metric", "kendall", *fast]),
        ("eval-rmbench", ["eval", "--bench", "rmbench.jsonl", "--model", "length", "--metric", "rmbench", *fast]),
        ("eval-rmb-pairwise", ["eval", "--bench", "rmb.jsonl", "--model", "length", "--metric", "pairwise", *fast]),
        ("eval-rewardbench2", ["eval", "--bench", "rewardbench2.jsonl", "--model", "length", "--metric", "bon", *fast]),
        (
            "eval-rewardbench2-upstream",
            ["eval", "--bench", "rewardbench2.jsonl", "--model", "length", "--metric", "bon", "--compat", "upstream"],
        ),
        ("eval-judgebench", ["eval", "--bench", "judgebench.jsonl", "--model", "length", "--metric", "judgebench"]),
        ("eval-rewardbench", ["eval", "--bench", "rewardbench.jsonl", "--model", "length", "--metric", "rewardbench"]),
        (
            "eval-ppe-correctness",
            ["eval", "--bench", "ppe-correctness.jsonl", "--model", "length", "--metric", "ppe-correctness"],
        ),
        (
            "eval-ppe-preference",
            ["eval", "--bench", "ppe-preference.jsonl", "--model", "length", "--metric", "ppe-preference"],
        ),
        ("eval-judge", ["eval", "--bench", "demo/bench/human.jsonl", *judge, "--cache", "judge.sqlite", *fast]),
        ("eval-bad-metric", ["eval", *bench, "--scores", length, "--metric", "nope"]),
        ("suite", ["suite", "suite.yaml", "--model", "length", "--no-cache", "--output-json", "suite.json"]),
        (
            "doctor",
            ["doctor", "--bench", "demo/bench/human.jsonl", "--model", "length", "--no-cache"]
            + ["--output-json", "doctor.json"],
        ),
        ("compare", ["compare", "details-length.jsonl", "details-sim.jsonl", "--output-json", "compare.json"]),
        ("leaderboard-md", ["leaderboard", "rm-length.json", "rm-sim.json", "rm-model.json", "-o", "board.md"]),
        ("leaderboard-html", ["leaderboard", "rm-length.json", "rm-sim.json", "-o", "board.html", "--title", "t"]),
        ("leaderboard-suite", ["leaderboard", "suite.json", "--name", "length", "-o", "suite-board.md"]),
        ("leaderboard-mixed", ["leaderboard", "rm-length.json", "rm-upstream.json"]),
        (
            "correlate",
            ["correlate", "--bench", "rm-length.json", "rm-sim.json", "rm-model.json"]
            + ["--downstream", "downstream.csv", "--output-json", "correlate.json", "-o", "correlate", *fast],
        ),
        (
            "bon",
            ["bon", "demo/bench/human.jsonl", "--scores", length, "-o", "picks.jsonl"]
            + ["--output-json", "bon.json", "--plot", "bon.png"],
        ),
        (
            "winrate-judge",
            ["winrate", "picks.jsonl", "--pool", "winrate-pool.jsonl", "--baseline-field", "baseline"]
            + [*judge, "--cache", "winrate.sqlite", "--output-json", "winrate.json", *fast],
        ),
        (
            "winrate-annotate",
            ["winrate", "picks.jsonl", "--pool", "winrate-pool.jsonl", "--baseline-field"]
            + ["baseline", "--annotate", "winrate-project", "--people", str(demo / "people.yaml")],
        ),
        (
            "analyze-bias",
            ["analyze", "bias", str(demo / "human.jsonl"), str(demo / "open.jsonl"), "--out", "bias"]
            + ["--output-json", "bias-numbers.json"],
        ),
    ]
    return out


def _winrate_pool(work: Path) -> None:
    """The demo's human bench with a baseline answer per prompt (its last response), for winrate."""
    rows = [json.loads(line) for line in (work / "demo/bench/human.jsonl").read_text("utf-8").splitlines()]
    _write_jsonl(work / "winrate-pool.jsonl", [r | {"baseline": r["responses"][-1]["content"]} for r in rows])


def _normalise(text: str, out: Path, pkg: Path) -> str:
    for p, tag in ((str(out / "work"), "<WORK>"), (str(out), "<OUT>"), (str(pkg), "<PKG>")):
        text = text.replace(p, tag)
    text = re.sub(r"http://127\.0\.0\.1:\d+", "<JUDGE>", text)
    return re.sub(r"\b\d+:\d\d:\d\d\b", "<H:MM:SS>", text)


TIME_COLUMN = re.compile(r"(time|created|updated|_at$|^at$|stamp)", re.I)
UNSTABLE_COLUMN = re.compile(r"^(judge|token_hash|csrf)$")


def _fingerprint(path: Path, out: Path, pkg: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".png":
        import numpy as np
        from PIL import Image

        with Image.open(path) as im:
            data = im.mode.encode() + str(im.size).encode() + np.asarray(im).tobytes()
    elif path.suffix in (".sqlite", ".db") or data[:16] == b"SQLite format 3\x00":
        data = _sqlite_rows(path).encode()
    else:
        try:
            text = _normalise(data.decode("utf-8"), out, pkg)
            if path.name == "tokens.txt":
                text = re.sub(r"\t(\S+)", lambda m: f"\t<{len(m[1])} chars>", text)
            data = text.encode()
        except UnicodeDecodeError:
            pass
    return hashlib.sha256(data).hexdigest()


def _sqlite_rows(path: Path) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        parts = []
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        for t in tables:
            info = con.execute(f'PRAGMA table_info("{t}")')
            cols = [r[1] for r in info if not TIME_COLUMN.search(r[1]) and not UNSTABLE_COLUMN.search(r[1])]
            sel = ", ".join(f'"{c}"' for c in cols) or "1"
            rows = sorted(repr(r) for r in con.execute(f'SELECT {sel} FROM "{t}"'))
            if t == "meta":
                rows = [r for r in rows if not TIME_COLUMN.search(r.split(",")[0])]
            parts.append(f"{t}{cols}\n" + "\n".join(rows))
        return "\n".join(parts)
    finally:
        con.close()


def _snapshot(work: Path, out: Path, pkg: Path) -> dict[str, str]:
    return {
        str(p.relative_to(work)): _fingerprint(p, out, pkg)
        for p in sorted(work.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm", "-journal", ".lock")) and "cache" not in p.parts
    }


def _run(argv: list[str], work: Path, env: dict[str, str], out: Path, pkg: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "cheems", *argv], cwd=work, env=env, capture_output=True, text=True)
    return {
        "argv": argv,
        "rc": proc.returncode,
        "stdout": _normalise(proc.stdout, out, pkg),
        "stderr": _normalise(proc.stderr, out, pkg),
    }


def record(out: Path) -> None:
    """Run every step with the cheems on PYTHONPATH into OUT; write OUT/manifest.json."""
    import cheems
    from fault_server import FakeJudgeServer

    pkg = Path(cheems.__file__).resolve().parent
    work = out / "work"
    work.mkdir(parents=True, exist_ok=False)
    # the shipped demo assets, copied in: commands given them print their path, the same in both runs
    demo = Path("assets")
    shutil.copytree(pkg / "assets" / "demo", work / demo)
    env = dict(os.environ, COLUMNS="120", LINES="50", CHEEMS_CACHE_DIR=str(work / "cache"), CHEEMS_WORKERS="1")
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OPENAI_API_KEY": "test-key", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    _upstream_files(work)
    steps_done: dict[str, dict[str, object]] = {}
    started = time.perf_counter()
    before = _snapshot(work, out, pkg)
    with FakeJudgeServer() as server:
        for name, argv in steps(demo, server.url):
            result = _run(argv, work, env, out, pkg)
            after = _snapshot(work, out, pkg)
            files = {k: v for k, v in after.items() if before.get(k) != v}
            result["files"] = files
            before = after
            steps_done[name] = result
            print(f"{name:28s} rc={result['rc']} files={len(files)}", flush=True)
            if name == "demo":
                _winrate_pool(work)
                before = _snapshot(work, out, pkg)
    with ThreadPoolExecutor(4) as pool:
        helps = pool.map(lambda a: _run([*a, "--help"], work, env, out, pkg), HELP_COMMANDS)
        help_done = {" ".join(a) or "cheems": r for a, r in zip(HELP_COMMANDS, helps, strict=True)}
    manifest = {"cheems": str(pkg), "steps": steps_done, "help": help_done}
    (out / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    took = time.perf_counter() - started
    print(f"{len(steps_done)} steps and {len(HELP_COMMANDS)} --help in {took:.0f}s -> {out}")


def compare(a: Path, b: Path) -> int:
    """Print every difference between two recorded folders; 0 when there is none."""
    ma, mb = (json.loads((p / "manifest.json").read_text("utf-8")) for p in (a, b))
    diffs = 0
    for section in ("steps", "help"):
        for name in sorted(set(ma[section]) | set(mb[section])):
            ra, rb = ma[section].get(name), mb[section].get(name)
            if ra is None or rb is None:
                print(f"{section} {name}: only in {'after' if ra is None else 'before'}")
                diffs += 1
                continue
            for key in ("rc", "stdout", "stderr", "files"):
                if ra.get(key) == rb.get(key):
                    continue
                diffs += 1
                print(f"--- {section} {name}: {key} differs")
                if key in ("stdout", "stderr"):
                    lines = difflib.unified_diff(
                        ra[key].splitlines(), rb[key].splitlines(), "before", "after", lineterm=""
                    )
                    print("\n".join(list(lines)[:40]))
                elif key == "files":
                    for f in sorted(set(ra[key]) | set(rb[key])):
                        if ra[key].get(f) != rb[key].get(f):
                            print(f"    {f}: {ra[key].get(f, 'absent')[:12]} vs {rb[key].get(f, 'absent')[:12]}")
                else:
                    print(f"    {ra[key]} vs {rb[key]}")
    n_steps, n_files = len(ma["steps"]), sum(len(s["files"]) for s in ma["steps"].values())
    verdict = "identical" if diffs == 0 else f"{diffs} differences"
    print(f"{verdict}: {n_steps} commands, {len(ma['help'])} --help, {n_files} files")
    return 0 if diffs == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="Record a run here (a new folder).")
    group.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="Diff two recorded runs.")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    record(args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
