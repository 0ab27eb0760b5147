"""``cheems correlate``: coefficients and p-values as scipy gives them, bootstrap intervals reproducible from the
seed and equal to a plain scipy loop over the documented draws, and every user error as one line.

The eval JSONs and the downstream CSV are written by hand, so every number is known.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from cheems.analysis.correlate import correlate, load_rm_table, resampled
from cheems.errors import InputError
from helpers import assert_user_error, run_cheems, run_main

# six RMs: overall and two subsets on the bench, two downstream metrics (win rate, MT-Bench-like score)
BENCH = {
    "alpha": (0.61, {"open": (0.70, 0.30), "human": (0.66, 0.20)}),
    "beta": (0.55, {"open": (0.65, 0.25), "human": (0.60, 0.18)}),
    "gamma": (0.72, {"open": (0.80, 0.45), "human": (0.75, 0.30)}),
    "delta": (0.48, {"open": (0.58, 0.20), "human": (0.55, 0.15)}),
    "eps": (0.66, {"open": (0.74, 0.40), "human": (0.70, 0.25)}),
    "zeta": (0.50, {"open": (0.62, 0.20), "human": (0.64, 0.22)}),
}
DOWNSTREAM = (
    "name,win_rate,mt_bench\nalpha,0.52,6.1\nbeta,0.47,5.2\ngamma,0.63,7.0\ndelta,0.41,5.5\neps,0.58,6.0\n"
    "zeta,0.45,5.9\n"
)


def eval_json(overall: float, subsets: dict) -> dict:
    return {
        "subsets": {
            name: {"accuracy": acc, "exact_match": exact, "n_prompts": 10, "n_pairs": 30}
            for name, (acc, exact) in subsets.items()
        },
        "overall": overall,
        "scorer": "ignored: the file stem names the RM",
    }


@pytest.fixture
def inputs(tmp_path) -> tuple[list[Path], Path]:
    """The six eval JSONs (in a file order unlike the CSV's) and the downstream CSV."""
    files = []
    for name in sorted(BENCH):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(eval_json(*BENCH[name])), encoding="utf-8")
        files.append(path)
    csv = tmp_path / "down.csv"
    csv.write_text(DOWNSTREAM, encoding="utf-8")
    return files, csv


def column(key: str) -> np.ndarray:
    """A benchmark number of the six RMs in the CSV's order, from BENCH directly."""
    order = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
    if key == "overall":
        return np.array([BENCH[n][0] for n in order])
    subset, metric = key.split(".")
    return np.array([BENCH[n][1][subset][0 if metric == "accuracy" else 1] for n in order])


WIN = np.array([0.52, 0.47, 0.63, 0.41, 0.58, 0.45])
MT = np.array([6.1, 5.2, 7.0, 5.5, 6.0, 5.9])
KEYS = ["overall", "open.accuracy", "open.exact_match", "human.accuracy", "human.exact_match"]


def test_coefficients_and_p_values_are_scipys(inputs):
    table = load_rm_table(*inputs)
    assert table.names == ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
    result = correlate(table, resamples=50, seed=1)
    assert [(c.bench, c.downstream) for c in result] == [(k, d) for k in KEYS for d in ("win_rate", "mt_bench")]
    for c in result:
        x, y = column(c.bench), WIN if c.downstream == "win_rate" else MT
        assert c.n == 6
        for method, test in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
            expected = test(x, y)
            assert c.values[method] == pytest.approx(expected[0], abs=1e-12)
            assert c.p_values[method] == pytest.approx(expected[1], abs=1e-12)
    # one coefficient worked out by hand: ranks of overall 4 3 6 1 5 2 and of mt_bench 5 1 6 2 4 3
    # differ by 1 2 0 1 1 1 -> rho = 1 - 6 * 8 / (6 * 35) = 27/35
    assert result[1].values["spearman"] == pytest.approx(27 / 35)


def test_resampled_equals_scipy_on_every_draw_and_skips_what_it_documents():
    x = np.array([0.1, 0.4, 0.4, 0.9, 0.6])
    y = np.array([2.0, 1.0, 3.0, 5.0, 5.0])
    picks = np.array(
        [
            [0, 1, 2, 3, 4],
            [3, 3, 0, 1, 4],  # repeated RMs: ties on both sides
            [0, 0, 3, 3, 3],  # two distinct RMs: skipped
            [1, 2, 1, 2, 1],  # two distinct RMs (x constant too): skipped
            [3, 4, 3, 4, 0],  # three distinct RMs
            [1, 2, 1, 2, 4],  # three distinct RMs, x ties 1 = 2 but not constant
            [3, 4, 4, 3, 3],  # two distinct RMs whose y is constant: skipped
        ]
    )
    draws = resampled(x, y, picks)
    for i, row in enumerate(picks):
        if len(set(row)) < 3:
            assert np.isnan(draws[:, i]).all()
            continue
        xs, ys = x[row], y[row]
        expected = [stats.pearsonr(xs, ys)[0], stats.spearmanr(xs, ys)[0], stats.kendalltau(xs, ys)[0]]
        assert draws[:, i] == pytest.approx(expected, abs=1e-12)


def test_resampled_skips_a_resample_with_a_constant_column():
    x = np.array([0.5, 0.5, 0.5, 0.7])
    y = np.array([1.0, 2.0, 3.0, 4.0])
    draws = resampled(x, y, np.array([[0, 1, 2, 0], [0, 1, 3, 2]]))
    assert np.isnan(draws[:, 0]).all()  # three distinct RMs, but all with x = 0.5
    assert draws[0, 1] == pytest.approx(stats.pearsonr(x[[0, 1, 3, 2]], y[[0, 1, 3, 2]])[0])


def test_intervals_are_the_percentiles_of_the_documented_draws_and_reproducible(inputs):
    table = load_rm_table(*inputs)
    first = correlate(table, resamples=200, seed=7)
    assert [c.intervals for c in correlate(table, resamples=200, seed=7)] == [c.intervals for c in first]
    assert [c.intervals for c in correlate(table, resamples=200, seed=8)] != [c.intervals for c in first]
    # independently: the draws the module docstring describes, each measured with scipy
    picks = np.random.default_rng(7).integers(0, 6, size=(200, 6))
    x, y = column("overall"), WIN
    kept = [p for p in picks if len(set(p)) >= 3 and np.ptp(x[p]) > 0 and np.ptp(y[p]) > 0]
    c = first[0]
    assert (c.bench, c.downstream, c.used, c.resamples, c.seed) == ("overall", "win_rate", len(kept), 200, 7)
    for method, test in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        values = [test(x[p], y[p])[0] for p in kept]
        assert c.intervals[method] == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12)


def test_a_constant_column_gives_null_and_a_warning(inputs, tmp_path):
    files, _ = inputs
    csv = tmp_path / "flat.csv"
    csv.write_text("name,flat\n" + "".join(f"{n},0.5\n" for n in BENCH), encoding="utf-8")
    table = load_rm_table(files, csv)
    assert "downstream metric flat is the same for every RM: no correlation" in table.warnings
    entry = correlate(table, resamples=20)[0].to_dict()
    assert entry["pearson"] is entry["kendall_p"] is entry["spearman_ci"][0] is None
    assert entry["bootstrap"] == {"resamples": 20, "used": 0, "seed": 0, "level": 0.95}


# ---------------------------------------------------------------------------- the command


def test_cli_writes_the_json_page_and_charts_and_warns_under_ten_rms(inputs, tmp_path, monkeypatch, capsys):
    files, csv = inputs
    out_json, folder = tmp_path / "corr.json", tmp_path / "page"
    args = [a for f in files for a in ("--bench", f)]
    proc = run_main(
        "correlate", *args, "--downstream", csv, "--output-json", out_json, "-o", folder, "--resamples", "100",
        "--seed", "3", monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning: only 6 RMs: correlations over fewer than 10 are very uncertain" in proc.stderr
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert list(data) == ["correlations"]
    first = data["correlations"][0]
    assert list(first)[:6] == ["bench", "downstream", "n", "pearson", "spearman", "kendall"]
    assert (first["bench"], first["downstream"], first["n"]) == ("overall", "win_rate", 6)
    assert first["pearson"] == pytest.approx(stats.pearsonr(column("overall"), WIN)[0])
    expected = correlate(load_rm_table(files, csv), resamples=100, seed=3)
    assert [c["kendall_ci"] for c in data["correlations"]] == [list(c.intervals["kendall"]) for c in expected]
    assert sorted(p.name for p in folder.iterdir()) == ["correlate.html", "heatmap.png", "scatter.png"]
    assert (folder / "scatter.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (folder / "correlate.html").read_text(encoding="utf-8")
    assert "human.exact_match" in page and "zeta" in page and "data:image/png;base64," in page
    assert "overall" in proc.stdout and "mt_bench" in proc.stdout


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("csv", "contains"),
    [
        (DOWNSTREAM + "omega,0.5,6\n", ["down.csv", "omega have a row but no --bench file", "--bench omega.json"]),
        (DOWNSTREAM.replace("0.47", "n/a"), ["down.csv:3", "field 'win_rate'", "'n/a' is not a finite number"]),
        (DOWNSTREAM.replace("0.47,5.2", "0.47,"), ["down.csv:3", "field 'mt_bench'", "is missing"]),
        (DOWNSTREAM.replace("0.47", "nan"), ["down.csv:3", "'nan' is not a finite number"]),
        (DOWNSTREAM + "alpha,0.5,6\n", ["down.csv:8", "field 'name'", "'alpha' is also on line 2"]),
        ("rm,win\nalpha,0.5\n", ["down.csv:1", "needs a 'name' column"]),
    ],
    ids=["csv-only", "non-numeric", "missing-cell", "nan", "duplicate", "no-name-column"],
)
def test_user_errors_are_one_line(inputs, tmp_path, monkeypatch, capsys, csv, contains):
    files, _ = inputs
    path = write(tmp_path, "down.csv", csv)
    args = [a for f in files for a in ("--bench", f)]
    proc = run_main("correlate", *args, "--downstream", path, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, *contains)


def test_a_bench_file_without_a_row_is_named(inputs, tmp_path, monkeypatch, capsys):
    files, _ = inputs
    path = write(tmp_path, "down.csv", DOWNSTREAM.replace("zeta,0.45,5.9\n", ""))
    args = [a for f in files for a in ("--bench", f)]
    proc = run_main("correlate", *args, "--downstream", path, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "down.csv", f"--bench {files[-1]}", "RM(s) zeta without a row here")


def test_two_bench_files_with_one_stem_and_too_few_rms(inputs, tmp_path):
    files, csv = inputs
    other = tmp_path / "sub"
    other.mkdir()
    twin = other / "alpha.json"
    twin.write_text(files[0].read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InputError, match="two --bench files are both named 'alpha'"):
        load_rm_table([*files, twin], csv)
    two = write(tmp_path, "two.csv", "name,w\nalpha,0.1\nbeta,0.2\n")
    with pytest.raises(InputError, match="2 RM\\(s\\): a correlation needs at least 3"):
        load_rm_table(files[:2], two)


def test_a_malformed_eval_json_is_refused_as_the_leaderboard_refuses_it(inputs, tmp_path, monkeypatch, capsys):
    files, csv = inputs
    broken = json.loads(files[0].read_text(encoding="utf-8"))
    broken["overall"] = 1.5
    files[0].write_text(json.dumps(broken), encoding="utf-8")
    args = [a for f in files for a in ("--bench", f)]
    proc = run_main("correlate", *args, "--downstream", csv, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "alpha.json:1", "field 'overall'")


def test_the_real_command_refuses_to_overwrite_an_input(inputs, tmp_path):
    files, csv = inputs
    args = [a for f in files for a in ("--bench", f)]
    proc = run_cheems("correlate", *args, "--downstream", csv, "--output-json", files[0], timeout=60)
    assert_user_error(proc, "--output-json", "is also the input --bench")
    assert math.isclose(json.loads(files[0].read_text(encoding="utf-8"))["overall"], BENCH["alpha"][0])


def test_eval_jsons_of_another_metric_are_refused_as_the_leaderboard_refuses_them(inputs, monkeypatch, capsys):
    files, csv = inputs
    other = json.loads(files[-1].read_text(encoding="utf-8"))
    files[-1].write_text(json.dumps({**other, "metric": "rmbench"}), encoding="utf-8")
    args = [a for f in files for a in ("--bench", f)]
    proc = run_main("correlate", *args, "--downstream", csv, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{files[-1]}: field 'metric': metric rmbench differs from metric cheems of {files[0]}")
    assert proc.stdout == ""


def test_the_table_fits_an_80_column_terminal(inputs):
    from rich.cells import cell_len

    files, csv = inputs
    args = [a for f in files for a in ("--bench", f)]
    proc = run_cheems("correlate", *args, "--downstream", csv, "--resamples", 100, env={"COLUMNS": "80"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(cell_len(line) <= 80 for line in lines) and "…" not in proc.stdout, proc.stdout
    row = next(i for i, line in enumerate(lines) if "human.exact_match" in line and "mt_bench" in line)
    r = stats.pearsonr(column("human.exact_match"), MT)[0]
    assert f"{r:+.2f}" in lines[row]  # the coefficient, its interval whole on the next line
    assert lines[row + 1].split()[0].startswith("[") and lines[row + 1].split()[0].endswith("]")
