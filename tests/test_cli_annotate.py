"""``cheems annotate init / export / status`` as a user runs them: outputs, tokens file, and one-line errors."""

from __future__ import annotations

import json
import stat

from cheems.annotate.human.store import Project
from helpers import assert_user_error, run_cheems

DEMO = "src/cheems/assets/demo/open.jsonl"
PEOPLE = """people:
  - {name: ann-01, role: annotator, categories: [数学, 代码]}
  - {name: ann-02, role: annotator}
  - {name: rev-01, role: reviewer}
  - {name: lead, role: admin}
"""


def init(tmp_path, *more):
    tmp_path.mkdir(parents=True, exist_ok=True)
    people = tmp_path / "people.yaml"
    people.write_text(PEOPLE, encoding="utf-8")
    return run_cheems("annotate", "init", DEMO, "--project", tmp_path / "proj", "--people", people, *more)


def test_init_writes_private_tokens_and_hashes_only(tmp_path):
    proc = init(tmp_path, "--overlap", "2", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    assert "planned 117 tasks over 24 prompts: 234 queue items" in proc.stdout
    tokens = tmp_path / "proj" / "tokens.txt"
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    lines = [line.split("\t") for line in tokens.read_text(encoding="utf-8").splitlines()]
    assert [name for name, _ in lines] == ["ann-01", "ann-02", "rev-01", "lead"]
    db = (tmp_path / "proj" / "project.sqlite3").read_bytes()
    assert all(token.encode() not in db for _, token in lines)
    project = Project.open(tmp_path / "proj")
    assert project.settings.overlap == 2 and project.settings.seed == 7
    assert project.person_by_token(lines[0][1]).name == "ann-01"


def test_init_refuses_to_overwrite_and_bad_inputs_are_one_line(tmp_path):
    assert init(tmp_path).returncode == 0
    before = (tmp_path / "proj" / "tokens.txt").read_bytes()
    assert_user_error(init(tmp_path), "already exists", "init never overwrites")
    assert (tmp_path / "proj" / "tokens.txt").read_bytes() == before
    bad = tmp_path / "bad.yaml"
    bad.write_text("people:\n  - {name: ann-01, role: boss}\n", encoding="utf-8")
    proc = run_cheems("annotate", "init", DEMO, "--project", tmp_path / "p2", "--people", bad)
    assert_user_error(proc, "bad.yaml:2", "role")
    assert not (tmp_path / "p2").exists()
    proc = init(tmp_path / "x", "--overlap", "3")
    assert assert_user_error(proc, "overlap 3 needs 3 annotators").startswith("error: --overlap: ")
    proc = init(tmp_path / "y", "--review-rate", "1.5")
    assert_user_error(proc, "--review-rate")
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "g", "input": "问", "responses": [{"id": "a", "content": "x"}]}) + "\n")
    assert_user_error(init(tmp_path / "z", "--gold", gold), "error: --gold: gold prompt 'g' has no 'rank'")


def test_export_and_status_on_a_project(tmp_path):
    assert init(tmp_path).returncode == 0
    out = tmp_path / "out.jsonl"
    proc = run_cheems("annotate", "export", tmp_path / "proj", "-o", out)
    assert (
        proc.returncode == 0 and "wrote 0 prompts" in proc.stdout and "24 prompt(s) have no answer yet" in proc.stdout
    )
    proc = run_cheems("annotate", "status", tmp_path / "proj", "--json")
    report = json.loads(proc.stdout)
    assert report["progress"]["tasks"] == 117 and report["progress"]["share_done"] == 0
    assert "annotation progress" in run_cheems("annotate", "status", tmp_path / "proj").stdout


def test_errors_name_what_is_wrong(tmp_path):
    assert_user_error(run_cheems("annotate", "status", tmp_path), "not an annotation project")
    (tmp_path / "project.sqlite3").write_text("not a database")
    assert_user_error(run_cheems("annotate", "export", tmp_path, "-o", tmp_path / "o.jsonl"), "cannot read")
    assert init(tmp_path / "t").returncode == 0
    db = tmp_path / "t" / "proj" / "project.sqlite3"
    proc = run_cheems("annotate", "export", tmp_path / "t" / "proj", "-o", db)
    assert_user_error(proc, "--output")
    assert Project.open(tmp_path / "t" / "proj").snapshot().tasks  # the project is intact
