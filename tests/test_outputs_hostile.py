"""Hostile output paths and number options (issue 8, classes 4 and 2 for options), as a user would type them.

Every catalogue case runs the real ``cheems`` command in a folder of real files and asserts: exit 2,
one ``error:`` line naming the option (and the resolved path where one is involved), no traceback,
and the folder byte for byte as it was (inputs untouched, no temporary file, no new folder, no
cache created). Then the things only a real process shows: SIGINT, SIGTERM and SIGKILL mid-write,
and two runs writing the same file at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cheems
from annotate_server import answer, make_project, prompt, team
from cheems.data.io import write_jsonl as io_write_jsonl
from cheems.data.io import write_records
from cheems.data.stream import read_records
from cheems.outputs import replace_folder, together
from fault_server import FakeJudgeServer
from helpers import assert_user_error, run_cheems, run_main, write_jsonl

# The commands run in a folder of their own: the subprocess must import this cheems, whatever PYTHONPATH says.
HERE = {
    "PYTHONPATH": os.pathsep.join([str(Path(cheems.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])
}

# ---------------------------------------------------------------------------- a folder of real files


def _record(pid: str, source: str = "human", ranked: bool = False) -> dict:
    row = {
        "id": pid,
        "input": f"问题{pid}",
        "category": ["知识"],
        "responses": [{"id": "r1", "content": "深度学习是机器学习的一个分支。"}, {"id": "r2", "content": "不知道。"}],
    }
    if ranked:
        row["rank"] = {"r1": 1, "r2": 2}
    else:
        row["comparisons"] = [{"a": "r1", "b": "r2", "label": "a", "source": source}]
    return row


def _workspace(root: Path) -> None:
    """Inputs of every kind the commands read, plus links and folders that hostile paths point at."""
    write_jsonl(root / "in.jsonl", [_record(f"p{i}") for i in range(3)])
    write_jsonl(root / "judged.jsonl", [_record(f"p{i}", source="judge") for i in range(3)])
    write_jsonl(root / "open.jsonl", [_record(f"o{i}", ranked=True) for i in range(2)])
    write_jsonl(root / "human.jsonl", [_record(f"h{i}", ranked=True) for i in range(2)])
    write_jsonl(
        root / "scores.jsonl",
        [
            {"prompt_id": pid, "response_id": rid, "score": s}
            for pid in ("o0", "o1", "p0", "p1", "p2")
            for rid, s in (("r1", 2.0), ("r2", 1.0))
        ],
    )
    write_jsonl(root / "x.failures.jsonl", [_record("f0")])  # the failures list `judge -o x.jsonl` would write
    (root / "f.yaml").write_text("max_chars: 9000\n", encoding="utf-8")
    (root / "tc.yaml").write_text("output: in.jsonl\n", encoding="utf-8")
    (root / "folder").mkdir()
    (root / "folder" / "keep.txt").write_text("kept\n", encoding="utf-8")
    (root / "link.jsonl").symlink_to("in.jsonl")
    (root / "linkdir").symlink_to("folder")
    (root / "dangling.jsonl").symlink_to("a.jsonl")  # points where --train a.jsonl will write
    os.link(root / "in.jsonl", root / "hard.jsonl")
    (root / "cur").mkdir()
    write_jsonl(root / "cur" / "final.jsonl", [_record(f"p{i}", source="judge") for i in range(3)])
    recipes = {
        "r_final.yaml": "output_dir: cur\njudge_input: cur/final.jsonl\ndebias: {seed: 0}\n",
        "r_human.yaml": "output_dir: cur\njudge_input: judged.jsonl\nhuman: cur/final.jsonl\n",
        "r_file.yaml": "output_dir: in.jsonl\njudge_input: judged.jsonl\n",
        "r_scores.yaml": "output_dir: cur\njudge_input: judged.jsonl\ndistant: {scores: cur/03-distant.jsonl}\n",
    }
    (root / "cur" / "03-distant.jsonl").write_text(
        (root / "scores.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
    )
    for name, text in recipes.items():
        (root / name).write_text(text, encoding="utf-8")
    make_project(root / "proj", [prompt("q1")])[0].close()  # an annotation project: database and tokens


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: links by target, files by content, folders by name."""
    seen: dict[str, object] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = ("file", path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return seen


JUDGE = ("--judge-model", "m", "--base-url", "http://127.0.0.1:9/v1")  # never contacted: the checks come first
BENCH = ("--bench", "open.jsonl")

# id: (arguments, substrings of the one error line; {ws} = the folder, resolved)
CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # ---- import
    "import -o the input": (
        ("import", "in.jsonl", "-o", "in.jsonl"),
        ("--output", "is also the input IN ({ws}/in.jsonl)"),
    ),
    "import -o a symlink to the input": (
        ("import", "in.jsonl", "-o", "link.jsonl"),
        ("link.jsonl", "is also the input IN ({ws}/in.jsonl)"),
    ),
    "import -o a hard link of the input": (
        ("import", "in.jsonl", "-o", "hard.jsonl"),
        ("hard.jsonl", "is also the input IN"),
    ),
    "import FORMAT -o the input": (("import", "ranked", "in.jsonl", "-o", "./in.jsonl"), ("is also the input IN",)),
    "import -o the input spelled with ..": (
        ("import", "in.jsonl", "-o", "folder/../in.jsonl"),
        ("is also the input IN ({ws}/in.jsonl)",),
    ),
    "import -o a folder": (
        ("import", "in.jsonl", "-o", "folder"),
        ("--output", "is a folder ({ws}/folder), not a file"),
    ),
    "import -o a symlink to a folder": (
        ("import", "in.jsonl", "-o", "linkdir"),
        ("linkdir", "is a folder ({ws}/folder)"),
    ),
    "import -o inside a file": (
        ("import", "in.jsonl", "-o", "in.jsonl/out.jsonl"),
        ("cannot be created: {ws}/in.jsonl is a file",),
    ),
    # ---- resolve
    "resolve -o the input": (("resolve", "in.jsonl", "-o", "in.jsonl"), ("--output", "is also the input IN")),
    "resolve -o a symlink to the input": (
        ("resolve", "in.jsonl", "-o", "link.jsonl"),
        ("is also the input IN ({ws}/in.jsonl)",),
    ),
    "resolve -o X --stats-json X": (
        ("resolve", "in.jsonl", "-o", "out.json", "--stats-json", "out.json"),
        ("--stats-json", "is also --output ({ws}/out.json)"),
    ),
    "resolve --stats-json the input": (
        ("resolve", "in.jsonl", "-o", "out.jsonl", "--stats-json", "in.jsonl"),
        ("--stats-json", "is also the input IN"),
    ),
    "resolve -o a folder": (("resolve", "in.jsonl", "-o", "folder"), ("is a folder ({ws}/folder)",)),
    "resolve --stats-json a folder": (
        ("resolve", "in.jsonl", "-o", "out.jsonl", "--stats-json", "folder"),
        ("--stats-json", "is a folder"),
    ),
    "resolve into a new folder, stats onto the input": (
        ("resolve", "in.jsonl", "-o", "new/out.jsonl", "--stats-json", "in.jsonl"),
        ("is also the input IN",),
    ),
    "resolve --stats-json inside a file": (
        ("resolve", "in.jsonl", "-o", "o.jsonl", "--stats-json", "in.jsonl/s.json"),
        ("--stats-json", "cannot be created"),
    ),
    # ---- split
    "split --train X --test X": (
        ("split", "in.jsonl", "--train", "a.jsonl", "--test", "a.jsonl"),
        ("--test", "is also --train ({ws}/a.jsonl)"),
    ),
    "split --train the input": (
        ("split", "in.jsonl", "--train", "in.jsonl", "--test", "b.jsonl"),
        ("--train", "is also the input IN"),
    ),
    "split --test a symlink to the input": (
        ("split", "in.jsonl", "--train", "a.jsonl", "--test", "link.jsonl"),
        ("--test", "is also the input IN"),
    ),
    "split --test a dangling link to --train": (
        ("split", "in.jsonl", "--train", "a.jsonl", "--test", "dangling.jsonl"),
        ("--test", "is also --train ({ws}/a.jsonl)"),
    ),
    "split --train a folder": (
        ("split", "in.jsonl", "--train", "folder", "--test", "b.jsonl"),
        ("--train", "is a folder"),
    ),
    "split --test-fraction nan": (
        ("split", "in.jsonl", "--train", "a.jsonl", "--test", "b.jsonl", "--test-fraction", "nan"),
        ("--test-fraction: must be a finite number, got nan",),
    ),
    "split --test-fraction inf": (
        ("split", "in.jsonl", "--train", "a.jsonl", "--test", "b.jsonl", "--test-fraction", "inf"),
        ("--test-fraction: must be a finite number",),
    ),
    "split --test-fraction 1.5": (
        ("split", "in.jsonl", "--train", "a.jsonl", "--test", "b.jsonl", "--test-fraction", "1.5"),
        ("--test-fraction: must be between 0 and 1, got 1.5",),
    ),
    "split --test-fraction -0.1": (
        ("split", "in.jsonl", "--train", "a.jsonl", "--test", "b.jsonl", "--test-fraction", "-0.1"),
        ("--test-fraction: must be between 0 and 1",),
    ),
    # ---- score
    "score -o its bench": (
        ("score", "--model", "length", *BENCH, "-o", "open.jsonl"),
        ("--output", "is also the input --bench ({ws}/open.jsonl)"),
    ),
    "score -o its second bench": (
        ("score", "--model", "length", *BENCH, "--bench", "human.jsonl", "-o", "human.jsonl"),
        ("is also the input --bench ({ws}/human.jsonl)",),
    ),
    "score -o its score cache": (
        ("score", "--model", "length", *BENCH, "--cache", "c.sqlite", "-o", "c.sqlite"),
        ("is also the input --cache",),
    ),
    "score -o a folder": (("score", "--model", "length", *BENCH, "-o", "folder"), ("is a folder",)),
    # ---- eval
    "eval --output-json onto a bench": (
        ("eval", *BENCH, "--scores", "scores.jsonl", "--output-json", "open.jsonl"),
        ("--output-json", "is also the input --bench"),
    ),
    "eval --output-json onto the scores": (
        ("eval", *BENCH, "--scores", "scores.jsonl", "--output-json", "scores.jsonl"),
        ("is also the input --scores ({ws}/scores.jsonl)",),
    ),
    "eval --report a file": (
        ("eval", *BENCH, "--scores", "scores.jsonl", "--report", "human.jsonl"),
        ("--report", "is a file ({ws}/human.jsonl), not a folder"),
    ),
    "eval --report beside --output-json": (
        ("eval", *BENCH, "--scores", "scores.jsonl", "--output-json", "rep/report.json", "--report", "rep"),
        ("--report", "is also --output-json"),
    ),
    "eval --output-json a folder": (
        ("eval", *BENCH, "--scores", "scores.jsonl", "--output-json", "linkdir"),
        ("is a folder ({ws}/folder)",),
    ),
    # ---- judge
    "judge -o the input": (("judge", "in.jsonl", "-o", "in.jsonl", *JUDGE), ("--output", "is also the input IN")),
    "judge -o X --stats-json X": (
        ("judge", "in.jsonl", "-o", "o.jsonl", "--stats-json", "o.jsonl", *JUDGE),
        ("--stats-json", "is also --output"),
    ),
    "judge: failures list onto the input": (
        ("judge", "x.failures.jsonl", "-o", "x.jsonl", *JUDGE),
        ("failures list of --output", "is also the input IN ({ws}/x.failures.jsonl)"),
    ),
    "judge -o its cache": (
        ("judge", "in.jsonl", "-o", "j.sqlite", "--cache", "j.sqlite", *JUDGE),
        ("is also the input --cache",),
    ),
    "judge -o a folder": (("judge", "in.jsonl", "-o", "folder", *JUDGE), ("is a folder",)),
    "judge --timeout nan": (
        ("judge", "in.jsonl", "-o", "o.jsonl", "--timeout", "nan", *JUDGE),
        ("--timeout: must be a finite number, got nan",),
    ),
    "judge --timeout 1e400": (
        ("judge", "in.jsonl", "-o", "o.jsonl", "--timeout", "1e400", *JUDGE),
        ("--timeout: must be a finite number, got inf",),
    ),
    "judge --timeout 0": (
        ("judge", "in.jsonl", "-o", "o.jsonl", "--timeout", "0", *JUDGE),
        ("timeout", "must be positive"),
    ),
    "judge --price-in inf": (
        ("judge", "in.jsonl", "-o", "o.jsonl", "--price-in", "inf", *JUDGE),
        ("--price-in: must be a finite number",),
    ),
    "judge --price-out -inf": (
        ("judge", "in.jsonl", "-o", "o.jsonl", "--price-out", "-inf", *JUDGE),
        ("--price-out: must be a finite number",),
    ),
    # ---- curate filter
    "filter -o the input": (("curate", "filter", "in.jsonl", "-o", "in.jsonl"), ("--output", "is also the input IN")),
    "filter -o X --report-json X": (
        ("curate", "filter", "in.jsonl", "-o", "o.jsonl", "--report-json", "o.jsonl"),
        ("--report-json", "is also --output"),
    ),
    "filter -o its config": (
        ("curate", "filter", "in.jsonl", "-o", "f.yaml", "--config", "f.yaml"),
        ("is also the input --config",),
    ),
    "filter --report-json a folder": (
        ("curate", "filter", "in.jsonl", "-o", "o.jsonl", "--report-json", "folder"),
        ("--report-json", "is a folder"),
    ),
    "filter --max-length-ratio nan": (
        ("curate", "filter", "in.jsonl", "-o", "o.jsonl", "--max-length-ratio", "nan"),
        ("--max-length-ratio: must be a finite number",),
    ),
    "filter --max-length-ratio 1e400": (
        ("curate", "filter", "in.jsonl", "-o", "o.jsonl", "--max-length-ratio", "1e400"),
        ("--max-length-ratio: must be a finite number, got inf",),
    ),
    "filter --max-length-ratio 0": (
        ("curate", "filter", "in.jsonl", "-o", "o.jsonl", "--max-length-ratio", "0"),
        ("--max-length-ratio: ", "greater than 0"),
    ),
    "filter --max-non-chinese-share nan": (
        ("curate", "filter", "in.jsonl", "-o", "o.jsonl", "--max-non-chinese-share", "nan"),
        ("--max-non-chinese-share: must be a finite number",),
    ),
    # ---- curate distant
    "distant -o its scores": (
        ("curate", "distant", "judged.jsonl", "--scores", "scores.jsonl", "-o", "scores.jsonl"),
        ("is also the input --scores",),
    ),
    "distant --report-json the input": (
        (
            "curate",
            "distant",
            "judged.jsonl",
            "--scores",
            "scores.jsonl",
            "-o",
            "o.jsonl",
            "--report-json",
            "judged.jsonl",
        ),
        ("--report-json", "is also the input IN"),
    ),
    "distant --margin nan": (
        ("curate", "distant", "judged.jsonl", "--scores", "scores.jsonl", "-o", "o.jsonl", "--margin", "nan"),
        ("--margin: must be a finite number, got nan",),
    ),
    "distant --margin inf": (
        ("curate", "distant", "judged.jsonl", "--scores", "scores.jsonl", "-o", "o.jsonl", "--margin", "inf"),
        ("--margin: must be a finite number",),
    ),
    "distant --margin -1": (
        ("curate", "distant", "judged.jsonl", "--scores", "scores.jsonl", "-o", "o.jsonl", "--margin", "-1"),
        ("--margin: must be at least 0, got -1",),
    ),
    # ---- curate debias
    "debias -o the input": (("curate", "debias", "judged.jsonl", "-o", "judged.jsonl"), ("is also the input IN",)),
    "debias -o X --report-json X": (
        ("curate", "debias", "judged.jsonl", "-o", "o.jsonl", "--report-json", "o.jsonl"),
        ("--report-json", "is also --output"),
    ),
    # ---- curate run: the recipe's stage files against its inputs
    "recipe: final.jsonl is judge_input": (
        ("curate", "run", "r_final.yaml"),
        ("r_final.yaml:1: field 'output_dir'", "{ws}/cur/final.jsonl is also the input judge_input"),
    ),
    "recipe: final.jsonl is human": (
        ("curate", "run", "r_human.yaml"),
        ("r_human.yaml:1: field 'output_dir'", "is also the input human"),
    ),
    "recipe: a stage file is distant.scores": (
        ("curate", "run", "r_scores.yaml"),
        ("field 'output_dir'", "03-distant.jsonl is also the input distant.scores"),
    ),
    "recipe: output_dir is a file": (
        ("curate", "run", "r_file.yaml"),
        ("r_file.yaml:1: field 'output_dir'", "is a file ({ws}/in.jsonl), not a folder"),
    ),
    "score -o its score cache's write-ahead log": (
        ("score", "--model", "length", *BENCH, "--cache", "c.sqlite", "-o", "c.sqlite-wal"),
        ("--output", "is a SQLite side file of the input --cache ({ws}/c.sqlite)"),
    ),
    "score -o the default cache's shared memory": (
        ("score", "--model", "length", *BENCH, "-o", "cache-dir/scores.sqlite-shm"),
        ("is a SQLite side file of the input --cache ({ws}/cache-dir/scores.sqlite)",),
    ),
    "score -o a file of the model folder": (
        ("score", "--model", "folder", *BENCH, "-o", "folder/keep.txt"),
        ("--output", "is a file of the input --model ({ws}/folder)"),
    ),
    "bon -o a file of the model folder": (
        ("bon", "in.jsonl", "--model", "folder", "-o", "folder/keep.txt"),
        ("is a file of the input --model ({ws}/folder)",),
    ),
    # ---- annotate export: every file of the project is an input
    "annotate export -o the tokens": (
        ("annotate", "export", "proj", "-o", "proj/tokens.txt"),
        ("--output", "is also the input DIR ({ws}/proj/tokens.txt)"),
    ),
    "annotate export -o the database": (
        ("annotate", "export", "proj", "-o", "proj/project.sqlite3"),
        ("is also the input DIR ({ws}/proj/project.sqlite3)",),
    ),
    "annotate export -o the write-ahead log": (
        ("annotate", "export", "proj", "-o", "proj/project.sqlite3-wal"),
        ("is a SQLite side file of the input DIR ({ws}/proj/project.sqlite3)",),
    ),
    "annotate export -o the lock of a server to come": (
        ("annotate", "export", "proj", "-o", "proj/serve.lock"),
        ("--output", "is also the input DIR ({ws}/proj/serve.lock)"),
    ),
    "annotate export -o the rollback journal": (
        ("annotate", "export", "./proj/", "-o", "proj/project.sqlite3-journal"),
        ("is a SQLite side file of the input DIR ({ws}/proj/project.sqlite3)",),
    ),
    # ---- judge: its cache's side files
    "judge -o its cache's journal": (
        ("judge", "in.jsonl", "-o", "j.sqlite-journal", "--cache", "j.sqlite", *JUDGE),
        ("is a SQLite side file of the input --cache ({ws}/j.sqlite)",),
    ),
    # ---- train (its output is a folder)
    "train -o the model folder": (
        ("train", "--data", "in.jsonl", "--model", "folder", "-o", "folder"),
        ("--output", "is also the input --model ({ws}/folder)"),
    ),
    "train -o inside the model folder": (
        ("train", "--data", "in.jsonl", "--model", "linkdir", "-o", "folder/rm"),
        ("--output", "is inside the input --model ({ws}/folder)"),
    ),
    "train -o a folder holding the data": (
        ("train", "--data", "cur/final.jsonl", "-o", "cur", "--overwrite"),
        ("--output", "holds the input --data ({ws}/cur/final.jsonl)"),
    ),
    "train -o beside its own data's .partial": (
        ("train", "--data", "rm.partial/in.jsonl", "-o", "rm"),
        ("holds the input --data",),
    ),
    "train -o the data file": (
        ("train", "--data", "in.jsonl", "-o", "in.jsonl"),
        ("--output", "is a file ({ws}/in.jsonl), not a folder"),
    ),
    "train -o inside a file": (
        ("train", "--data", "in.jsonl", "-o", "in.jsonl/rm"),
        ("cannot be created: {ws}/in.jsonl is a file",),
    ),
    "train: config output is the data file": (
        ("train", "--data", "in.jsonl", "--config", "tc.yaml"),
        ("is a file ({ws}/in.jsonl), not a folder",),
    ),
    "train --lr nan": (
        ("train", "--data", "in.jsonl", "-o", "rm", "--lr", "nan"),
        ("--lr: must be a finite number, got nan",),
    ),
    "train --lr inf": (("train", "--data", "in.jsonl", "-o", "rm", "--lr", "inf"), ("--lr: must be a finite number",)),
    "train --warmup-ratio nan": (
        ("train", "--data", "in.jsonl", "-o", "rm", "--warmup-ratio", "nan"),
        ("--warmup-ratio: must be a finite number",),
    ),
    "train --reg-coef -inf": (
        ("train", "--data", "in.jsonl", "-o", "rm", "--reg-coef", "-inf"),
        ("--reg-coef: must be a finite number",),
    ),
    # ---- demo
    "demo -o a file": (
        ("demo", "-o", "in.jsonl", "--no-train"),
        ("--output", "is a file ({ws}/in.jsonl), not a folder"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_output_or_option_is_one_line_and_changes_nothing(tmp_path, monkeypatch, capsys, case):
    args, expected = CASES[case]
    _workspace(tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    # the cache folder must not be created either
    proc = run_main(
        *args,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"OPENAI_API_KEY": "k", "CHEEMS_CACHE_DIR": str(tmp_path / "cache-dir")},
    )
    ws = os.path.realpath(tmp_path)
    assert_user_error(proc, *(e.format(ws=ws) for e in expected))
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert snapshot(tmp_path) == before  # inputs byte-identical; no temporary file, folder or cache left


@pytest.mark.parametrize(
    "case",
    ["score -o its bench", "split --test-fraction nan", "recipe: final.jsonl is judge_input", "train -o the data file"],
)
def test_the_real_command_says_the_same(tmp_path, case):
    """A few catalogue cases as a user runs them: a separate process, its exit code and stderr."""
    args, expected = CASES[case]
    _workspace(tmp_path)
    before = snapshot(tmp_path)
    proc = run_cheems(*args, cwd=tmp_path, env={**HERE, "CHEEMS_CACHE_DIR": str(tmp_path / "cache-dir")})
    assert_user_error(proc, *(e.format(ws=os.path.realpath(tmp_path)) for e in expected))
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert snapshot(tmp_path) == before


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 45


def test_a_replaced_folder_changes_at_once_or_not_at_all(tmp_path):
    old, new = tmp_path / "rm", tmp_path / "rm.partial"
    old.mkdir()
    (old / "weights").write_text("old", encoding="utf-8")
    with pytest.raises(FileNotFoundError):  # nothing to move in: the old folder stays, whole
        replace_folder(new, old)
    assert os.listdir(tmp_path) == ["rm"] and (old / "weights").read_text(encoding="utf-8") == "old"
    new.mkdir()
    (new / "weights").write_text("new", encoding="utf-8")
    replace_folder(new, old)
    assert os.listdir(tmp_path) == ["rm"] and (old / "weights").read_text(encoding="utf-8") == "new"  # nothing beside


def test_export_onto_a_served_projects_files_is_refused_and_loses_no_answer(tmp_path, serve_project, cheems_cli):
    """Issue 22.1: while the project is served its write-ahead log holds the acknowledged answer; an export
    aimed at it (or at the tokens, the lock, the shared memory) is one line and the answer stays."""
    server, tokens = serve_project([prompt("q1", 3)], team(annotators=1, reviewers=0), review_rate=0.0)
    client = server.client(tokens["ann-01"])
    task = client.get("/api/next").json()
    assert client.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r2>r3")).status_code == 200
    project = tmp_path / "project"
    assert (project / "project.sqlite3-wal").stat().st_size > 0  # the answer is in the live log
    before = snapshot(project)
    for name in ("project.sqlite3-wal", "project.sqlite3-shm", "tokens.txt", "serve.lock", "project.sqlite3"):
        proc = cheems_cli("annotate", "export", project, "-o", project / name, env=HERE)
        assert_user_error(proc, "--output", f"the input DIR ({os.path.realpath(project)}/")
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert snapshot(project) == before
    assert client.get("/api/next").status_code == 204  # the server still reads its project: the task is done
    for _ in range(2):  # an export beside the project's files, and its rerun, are fine
        proc = cheems_cli("annotate", "export", project, "-o", project / "labels.jsonl", env=HERE)
        assert proc.returncode == 0, proc.stderr
    [record] = read_records(project / "labels.jsonl").records
    assert len(record.comparisons) == 3  # r1>r2>r3: the answer given before the refused exports


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files anyway")
def test_read_only_output_is_refused(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [_record("p0")])
    out = tmp_path / "out.jsonl"
    out.write_text("kept\n")
    out.chmod(0o444)
    assert_user_error(run_cheems("resolve", src, "-o", out), "--output", "is read-only")
    assert out.read_text() == "kept\n"


# ---------------------------------------------------------------------------- what a good path still does


def test_missing_folders_are_created(tmp_path, cheems_cli):
    src = write_jsonl(tmp_path / "in.jsonl", [_record("p0")])
    proc = cheems_cli(
        "resolve", src, "-o", tmp_path / "a" / "b" / "out.jsonl", "--stats-json", tmp_path / "c" / "s.json"
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a" / "b" / "out.jsonl").is_file() and (tmp_path / "c" / "s.json").is_file()


def test_a_symlinked_output_is_written_through_and_keeps_its_mode(tmp_path, cheems_cli):
    src = write_jsonl(tmp_path / "in.jsonl", [_record("p0")])
    run1 = tmp_path / "run1.jsonl"
    run1.write_text("old\n")
    run1.chmod(0o640)
    (tmp_path / "latest.jsonl").symlink_to("run1.jsonl")
    assert cheems_cli("resolve", src, "-o", tmp_path / "latest.jsonl").returncode == 0
    assert (tmp_path / "latest.jsonl").is_symlink() and json.loads(run1.read_text())["rank"] == {"r1": 1, "r2": 2}
    assert stat.S_IMODE(run1.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "latest.jsonl", "run1.jsonl"]


def test_a_named_pipe_as_output_stays_a_pipe(tmp_path):
    """``-o /dev/stdout``, ``-o /dev/null``, a FIFO: written directly; an atomic replace would swap the "
    "device for a file."""
    src = write_jsonl(tmp_path / "in.jsonl", [_record("p0")])
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    proc = run_cheems("split", src, "--train", fifo, "--test", tmp_path / "test.jsonl", "--test-fraction", "0")
    reader.join(timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and json.loads(got[0])["id"] == "p0"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "new" / "deeper" / "out.jsonl"

    def rows():
        yield {"n": 1}
        raise ValueError("boom")

    with pytest.raises(ValueError):
        io_write_jsonl(target, rows())
    assert list(tmp_path.iterdir()) == []  # neither the temporary file nor the folders made for it
    old = tmp_path / "out.jsonl"
    old.write_text("old\n")
    with pytest.raises(ValueError):
        io_write_jsonl(old, rows())
    assert old.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_together_writes_all_files_or_none(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("old a\n")
    with pytest.raises(RuntimeError), together():
        io_write_jsonl(a, [{"x": 1}])
        io_write_jsonl(b, [{"x": 2}])
        assert a.read_text() == "old a\n"  # nothing takes its name before the block ends
        raise RuntimeError("second stage failed")
    assert a.read_text() == "old a\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]
    with together():
        io_write_jsonl(a, [{"x": 1}])
        io_write_jsonl(b, [{"x": 2}])
    assert a.read_text() == '{"x": 1}\n' and b.read_text() == '{"x": 2}\n'


# ---------------------------------------------------------------------------- real signals, real concurrency

TEMP = re.compile(r"^\.out\.jsonl\..+\.tmp$")


@pytest.fixture(scope="module")
def big_input(tmp_path_factory) -> Path:
    """60 MB of records (long responses): writing the output takes a few hundred ms, long enough to interrupt."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    write_jsonl(
        path,
        [
            {
                "id": f"p{i}",
                "input": "问题",
                "category": ["知识"],
                "responses": [{"id": "r1", "content": "甲" * 1_000_000}, {"id": "r2", "content": "乙" * 1_000_000}],
                "comparisons": [{"a": "r1", "b": "r2", "label": "a"}],
            }
            for i in range(10)
        ],
    )
    return path


def _start_and_signal_mid_write(args: list, folder: Path, sig: int) -> subprocess.CompletedProcess:
    """Start ``cheems ARGS`` and send ``sig`` once its temporary output file exists (it is writing)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cheems", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 120
    while not any(TEMP.match(p) for p in os.listdir(folder)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.001)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_mid_write_leaves_outputs_unchanged(tmp_path, big_input, sig, code):
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    out.write_bytes(b"an earlier complete run\n")
    proc = _start_and_signal_mid_write(["resolve", big_input, "-o", out, "--stats-json", stats], tmp_path, sig)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [f"interrupted; {out}, {stats} left unchanged"]
    assert out.read_bytes() == b"an earlier complete run\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temporary file, no stats file


def test_second_ctrl_c_still_cleans_up(tmp_path, big_input):
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cheems", "import", str(big_input), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    while not any(TEMP.match(p) for p in os.listdir(tmp_path)):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.001)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.splitlines() == [f"interrupted; {out} left unchanged"], err
    assert list(tmp_path.iterdir()) == []


def test_sigkill_mid_write_leaves_the_old_file(tmp_path, big_input):
    """SIGKILL cannot be caught: the real name still holds the old complete file; only the hidden
    ``.out.jsonl.<random>.tmp`` the run was writing may stay behind (nothing can remove it)."""
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"an earlier complete run\n")
    proc = _start_and_signal_mid_write(["import", big_input, "-o", out], tmp_path, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert out.read_bytes() == b"an earlier complete run\n"
    assert all(p.name == "out.jsonl" or TEMP.match(p.name) for p in tmp_path.iterdir())


def test_judge_interrupted_names_its_cache_in_one_line(tmp_path):
    rows = [
        {
            "id": f"q{k}",
            "input": f"第{k}个问题",
            "category": ["数学"],
            "responses": [{"id": f"r{i}", "content": f"q{k}的回答" + "对" * i} for i in range(1, 5)],
        }
        for k in range(4)
    ]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    before = src.read_bytes()
    out, db = tmp_path / "out.jsonl", tmp_path / "judge.sqlite"
    with FakeJudgeServer(latency=0.3) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cheems",
                "judge",
                str(src),
                "-o",
                str(out),
                "--base-url",
                server.url,
                "--judge-model",
                "fake",
                "--cache",
                str(db),
                "--no-progress",
                "--concurrency",
                "2",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OPENAI_API_KEY": "k", "COLUMNS": "200"},
        )
        deadline = time.monotonic() + 60
        while server.total < 3:  # judging is under way
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines() == [
        (
            f"interrupted; {out}, {tmp_path / 'out.failures.jsonl'} left unchanged; "
            f"finished judgements are in {db}; rerun the same command to resume"
        )
    ]
    assert src.read_bytes() == before and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_two_runs_writing_the_same_output_leave_one_complete_run(tmp_path):
    """Both runs write 30 MB to the same -o at once: the file ends up as exactly one run's output, never a mix."""
    inputs, expected = [], []
    for name, char in (("a", "甲"), ("b", "乙")):
        src = write_jsonl(
            tmp_path / f"{name}.jsonl",
            [
                {
                    "id": f"{name}{i}",
                    "input": "问题",
                    "category": ["知识"],
                    "responses": [{"id": "r1", "content": char * 500_000}, {"id": "r2", "content": "短"}],
                    "comparisons": [{"a": "r1", "b": "r2", "label": "a"}],
                }
                for i in range(20)
            ],
        )
        ref = tmp_path / f"ref-{name}.jsonl"
        write_records(ref, read_records(src).records)
        inputs.append(src)
        expected.append(ref.read_bytes())
    folder = tmp_path / "shared"
    folder.mkdir()
    out = folder / "out.jsonl"
    for _ in range(2):
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "cheems", "import", str(src), "-o", str(out)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for src in inputs
        ]
        for p in procs:
            p.communicate(timeout=120)
            assert p.returncode == 0
        assert out.read_bytes() in expected
        assert [p.name for p in folder.iterdir()] == ["out.jsonl"]


def test_a_signal_inside_code_that_swallows_exceptions_still_interrupts_a_chat_run():
    """asyncio's socket transport catches any exception raised while it writes ("Fatal write error"): a
    signal handler that raised there lost the interrupt and the run went on to exit 0. The run's event
    loop now takes the signal and cancels the run, whatever code was running when it came."""
    from cheems.judge.judge_settings import JudgeSettings
    from cheems.llm.client import ChatClient
    from cheems.llm.endpoint import RequestBudget
    from cheems.outputs import Interrupted, signals_interrupt

    settings = JudgeSettings(base_url="http://127.0.0.1:9/v1", judge_model="m", concurrency=1, give_up_after=60)
    client = ChatClient(settings, RequestBudget(None))
    finished: list[int] = []

    async def handle(http, job):
        try:  # what asyncio's transport does around a socket write
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the signal arrives inside the try, as it can inside a write
        except BaseException:
            pass
        await asyncio.sleep(30)  # a cancelled run never finishes this
        finished.append(job)

    with signals_interrupt(), pytest.raises(Interrupted) as caught:
        client.run_many([1], handle)
    assert caught.value.signum == signal.SIGINT and finished == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
