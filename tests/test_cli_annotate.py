"""``cheems annotate init / export / status`` as a user runs them: outputs, tokens file, and one-line errors."""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from annotate_server import free_port, make_project, prompt, team
from cheems.annotate.answer import Answer
from cheems.annotate.store import Project
from helpers import assert_user_error, run_cheems, run_main

DEMO = "src/cheems/assets/demo/open.jsonl"
PEOPLE = """people:
  - {name: ann-01, role: annotator, categories: [数学, 代码]}
  - {name: ann-02, role: annotator}
  - {name: rev-01, role: reviewer}
  - {name: lead, role: admin}
"""


def init(tmp_path, *more, run=run_cheems):
    """``cheems annotate init`` of the demo prompts into ``tmp_path/proj``, run by ``run`` (a real process unless a
    test passes its ``cheems_cli``)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    people = tmp_path / "people.yaml"
    people.write_text(PEOPLE, encoding="utf-8")
    return run("annotate", "init", DEMO, "--project", tmp_path / "proj", "--people", people, *more)


def test_init_writes_private_tokens_and_hashes_only(tmp_path):
    proc = init(tmp_path, "--overlap", "2", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    assert "planned 117 tasks over 24 prompts: 234 queue items" in proc.stdout
    assert "24 prompt(s) have more tasks × overlap (up to 10) than the 2 annotators" in proc.stderr
    assert "(give the team 10 annotators, or lower --overlap)" in proc.stderr
    tokens = tmp_path / "proj" / "tokens.txt"
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    lines = [line.split("\t") for line in tokens.read_text(encoding="utf-8").splitlines()]
    assert [name for name, _ in lines] == ["ann-01", "ann-02", "rev-01", "lead"]
    db = (tmp_path / "proj" / "project.sqlite3").read_bytes()
    assert all(token.encode() not in db for _, token in lines)
    project = Project.open(tmp_path / "proj")
    assert project.settings.overlap == 2 and project.settings.seed == 7
    assert project.person_by_token(lines[0][1]).name == "ann-01"


def test_the_readme_example_plans_without_a_warning(tmp_path):
    """README: `cheems annotate init ... --people src/cheems/assets/demo/people.yaml --overlap 2`."""
    people = "src/cheems/assets/demo/people.yaml"
    proc = run_cheems("annotate", "init", DEMO, "--project", tmp_path / "p", "--people", people, "--overlap", "2")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_init_refuses_to_overwrite_and_bad_inputs_are_one_line(tmp_path, cheems_cli):
    assert init(tmp_path, run=cheems_cli).returncode == 0
    before = (tmp_path / "proj" / "tokens.txt").read_bytes()
    assert_user_error(init(tmp_path, run=cheems_cli), "already exists", "init never overwrites")
    assert (tmp_path / "proj" / "tokens.txt").read_bytes() == before
    bad = tmp_path / "bad.yaml"
    bad.write_text("people:\n  - {name: ann-01, role: boss}\n", encoding="utf-8")
    proc = cheems_cli("annotate", "init", DEMO, "--project", tmp_path / "p2", "--people", bad)
    assert_user_error(proc, "bad.yaml:2", "role")
    assert not (tmp_path / "p2").exists()
    proc = init(tmp_path / "x", "--overlap", "3", run=cheems_cli)
    assert assert_user_error(proc, "overlap 3 needs 3 annotators").startswith("error: --overlap: ")
    proc = init(tmp_path / "y", "--review-rate", "1.5", run=cheems_cli)
    assert_user_error(proc, "--review-rate")
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "g", "input": "问", "responses": [{"id": "a", "content": "x"}]}) + "\n")
    assert_user_error(
        init(tmp_path / "z", "--gold", gold, run=cheems_cli), "error: --gold: gold prompt 'g' has no 'rank'"
    )


def test_export_and_status_on_a_project(tmp_path, cheems_cli):
    assert init(tmp_path, run=cheems_cli).returncode == 0
    out = tmp_path / "out.jsonl"
    proc = cheems_cli("annotate", "export", tmp_path / "proj", "-o", out)
    assert (
        proc.returncode == 0 and "wrote 0 prompts" in proc.stdout and "24 prompt(s) have no answer yet" in proc.stdout
    )
    proc = cheems_cli("annotate", "status", tmp_path / "proj", "--json")
    report = json.loads(proc.stdout)
    assert report["progress"]["tasks"] == 117 and report["progress"]["share_done"] == 0
    assert "annotation progress" in cheems_cli("annotate", "status", tmp_path / "proj").stdout


def test_errors_name_what_is_wrong(tmp_path, cheems_cli):
    assert_user_error(cheems_cli("annotate", "status", tmp_path), "not an annotation project")
    (tmp_path / "project.sqlite3").write_text("not a database")
    assert_user_error(cheems_cli("annotate", "export", tmp_path, "-o", tmp_path / "o.jsonl"), "cannot read")
    assert init(tmp_path / "t", run=cheems_cli).returncode == 0
    db = tmp_path / "t" / "proj" / "project.sqlite3"
    proc = cheems_cli("annotate", "export", tmp_path / "t" / "proj", "-o", db)
    assert_user_error(proc, "--output")
    assert Project.open(tmp_path / "t" / "proj").snapshot().tasks  # the project is intact


def test_serve_listens_on_8765_by_default_and_names_a_bad_port(tmp_path, cheems_cli):
    help_text = cheems_cli("annotate", "serve", "--help").stdout
    assert "[default: 8765]" in help_text and "docs/serving.md" in help_text  # 8000 is vLLM's
    assert init(tmp_path, run=cheems_cli).returncode == 0
    # a real process: were a bad port not refused, it would serve (and this test would time out, not hang)
    for port in ("0", "70000"):
        assert_user_error(run_cheems("annotate", "serve", tmp_path / "proj", "--port", port), "--port")
    assert not (tmp_path / "proj" / "serve.lock").exists()  # refused before the project was touched


# ------------------------------------------------------------------------ a damaged project file


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> Path:
    """A project with one submitted answer (made once; each test damages a copy)."""
    folder = tmp_path_factory.mktemp("answered") / "proj"
    project, _ = make_project(folder, [prompt("p1"), prompt("p2")], team(annotators=2))
    item = project.next_item("ann-01")
    project.submit(item.item_id, "ann-01", Answer(scores={"A": 3, "B": 2, "C": 1}, ranking="A>B>C"))
    project.close()
    return folder


def _sql(db: Path, script: str) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.executescript(script)
    finally:
        conn.close()


ANSWER = '{"scores": {}, "levels": [], "spans": [], "flags": {}, "note": "", "override": false}'
DAMAGE = {
    # name: (how the file is damaged, what the one line says, whether open finds it: serve refuses to start)
    "garbage bytes": (lambda db: db.write_bytes(os.urandom(4096)), "cannot read project.sqlite3: file is not a", True),
    "cut short": (lambda db: os.truncate(db, 3 * 4096), "database disk image is malformed", True),
    "no table": (lambda db: _sql(db, "DROP TABLE answers"), "damaged: table 'answers' is missing", True),
    "no column": (
        lambda db: _sql(db, "ALTER TABLE reviews DROP COLUMN reason"),
        "damaged: table 'reviews' has no column reason",
        True,
    ),
    "no meta": (lambda db: _sql(db, "DROP TABLE meta"), "damaged: table 'meta' is missing", True),
    "no settings": (
        lambda db: _sql(db, "DELETE FROM meta WHERE key = 'settings'"),
        "damaged: the settings row of table 'meta' is missing",
        True,
    ),
    "bad settings": (
        lambda db: _sql(db, "UPDATE meta SET value = '{\"overlap\": 0}' WHERE key = 'settings'"),
        "damaged: the settings row of table 'meta' is not valid: overlap:",
        True,
    ),
    "answer not JSON": (
        lambda db: _sql(db, "UPDATE answers SET body = '{\"scores\": {' WHERE id = 1"),
        "damaged: answer 1 is not valid: Invalid JSON",
        False,
    ),
    "answer of another shape": (
        lambda db: _sql(db, "UPDATE answers SET body = '{\"scores\": [1, 2]}' WHERE id = 1"),
        "damaged: answer 1 is not valid: scores: Input should be an object",
        False,
    ),
    "answer time": (
        lambda db: _sql(db, f"UPDATE answers SET body = '{ANSWER}', submitted_at = 'yesterday' WHERE id = 1"),
        "damaged: the time of answer 1 'yesterday' is not a time",
        False,
    ),
    "invalid prompt": (
        lambda db: _sql(db, 'UPDATE prompts SET record = \'{"id": "p1", "input": "问"}\' WHERE id = \'p1\''),
        "damaged: prompt 'p1' is not valid: responses: Field required",
        False,
    ),
    "person's role": (
        lambda db: _sql(db, "UPDATE people SET role = 'boss' WHERE name = 'lead'"),
        "damaged: person 'lead' has the role 'boss'",
        False,
    ),
    "person's categories": (
        lambda db: _sql(db, "UPDATE people SET categories = 'maths' WHERE name = 'lead'"),
        "damaged: person 'lead' (categories) is not valid: Invalid JSON",
        False,
    ),
    "task not JSON": (
        lambda db: _sql(db, "UPDATE tasks SET responses = 'r1,r2' WHERE rowid = 1"),
        "damaged: task 'p1#t1' is not valid: Invalid JSON",
        False,
    ),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_project_is_one_line_naming_the_project_and_the_damage(answered, tmp_path, case, monkeypatch, capsys):
    damage, says, at_open = DAMAGE[case]
    folder = tmp_path / "proj"
    shutil.copytree(answered, folder)
    damage(folder / "project.sqlite3")
    before = (folder / "project.sqlite3").read_bytes()
    out = tmp_path / "out.jsonl"
    for args in (["status", folder], ["export", folder, "-o", out]):
        proc = run_main("annotate", *args, monkeypatch=monkeypatch, capsys=capsys)
        line = assert_user_error(proc, says, "restore project.sqlite3 from a backup")
        assert line.startswith(f"error: {folder}: ")
    if at_open:  # refused before it listens (a real process: were it not refused, it would serve)
        proc = run_cheems("annotate", "serve", folder, "--port", str(free_port()), timeout=60)
        assert_user_error(proc, says)
    assert not out.exists()
    assert (folder / "project.sqlite3").read_bytes() == before  # reading changes nothing


# ------------------------------------------------------------------------ a full disk while init writes


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 160 KiB: too small for the demo project (skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", mount], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mount
    subprocess.run(["umount", mount], check=True)


def test_a_full_disk_while_init_writes_leaves_no_project(small_disk, tmp_path):
    people = tmp_path / "people.yaml"
    people.write_text(PEOPLE, encoding="utf-8")
    for project in (small_disk / "proj", small_disk / "new" / "proj"):
        proc = run_cheems("annotate", "init", DEMO, "--project", project, "--people", people)
        assert_user_error(proc, f"{project}: cannot write the project: database or disk is full", "free some space")
        assert not project.exists()
        assert [p.name for p in small_disk.rglob("*")] in ([], ["new"])  # nothing half-written, hidden or not


def test_init_moves_the_finished_files_into_place(tmp_path):
    people = tmp_path / "people.yaml"
    people.write_text(PEOPLE, encoding="utf-8")
    (tmp_path / "here").mkdir()  # an empty folder may be named, the working directory too
    proc = run_cheems(
        "annotate", "init", Path(DEMO).resolve(), "--project", ".", "--people", people, cwd=tmp_path / "here"
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["project.sqlite3", "tokens.txt"]  # no build folder
    assert Project.open(tmp_path / "here").snapshot().tasks


def test_what_a_stopped_init_left_is_named(tmp_path, cheems_cli):
    (tmp_path / "proj" / ".init-0123abcd").mkdir(parents=True)  # what a SIGKILL in the middle of init leaves
    line = assert_user_error(
        init(tmp_path, run=cheems_cli), "holds only .init-0123abcd, left by an init that was stopped"
    )
    assert "delete the folder and run init again" in line
    assert_user_error(cheems_cli("annotate", "status", tmp_path / "proj"), "not an annotation project")


def test_a_name_an_older_cheems_took_still_reads(answered, tmp_path, monkeypatch, capsys):
    shutil.copytree(answered, tmp_path / "proj")
    _sql(tmp_path / "proj" / "project.sqlite3", "UPDATE people SET name = 'lead ' WHERE name = 'lead'")  # spaces
    proc = run_main("annotate", "status", tmp_path / "proj", "--json", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "lead " in json.loads(proc.stdout)["progress"]["by_person"]


def test_a_write_refused_while_init_writes_leaves_no_project(tmp_path):
    """Where no tmpfs can be mounted: a file size limit (RLIMIT_FSIZE) refuses the writes the same way."""
    people = tmp_path / "people.yaml"
    people.write_text(PEOPLE, encoding="utf-8")
    limit = 64 * 1024  # the demo project's database is ~150 KiB
    proc = subprocess.run(
        [sys.executable, "-m", "cheems", "annotate", "init", DEMO, "--project", tmp_path / "proj", "--people", people],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
        timeout=120,
    )
    assert_user_error(proc, f"{tmp_path / 'proj'}: cannot write the project: disk I/O error")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["people.yaml"]


def test_a_request_that_meets_damage_is_one_line_in_the_servers_log(serve_project, tmp_path):
    server, tokens = serve_project([prompt("p1")], team(annotators=2))
    _sql(tmp_path / "project" / "project.sqlite3", "UPDATE tasks SET responses = '[1' WHERE id = 'p1#t1'")
    reply = server.client(tokens["lead"]).get("/api/status")
    assert reply.status_code == 500 and reply.json() == {
        "detail": "the project file is damaged — tell the project's admin"
    }
    server.stop()
    log = server.proc.stderr.read().decode()
    assert "Traceback" not in log and log.splitlines()[1:] == ["interrupted"], log  # then the server's stop
    assert f"{tmp_path / 'project'}: project.sqlite3 is damaged: task 'p1#t1' is not valid: Invalid JSON" in log
