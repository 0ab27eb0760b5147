"""Charts find a Chinese font installed after matplotlib wrote its font cache, and say once when there is none.

Real matplotlib in real subprocesses (the font list is read once per process), each with its own
``MPLCONFIGDIR``. A stale cache is made the way it happens to a user: matplotlib's first run saw no
system fonts (``MPL_IGNORE_SYSTEM_FONTS=1`` here, before ``apt-get install fonts-noto-cjk`` there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cheems.evaluate.plots import CJK_FONTS

# two charts with Chinese text; prints the font used, matplotlib's missing-glyph warnings and ours
CHART = """
import json, sys, warnings
from cheems.evaluate.plots import cjk_font, new_figure, png_bytes
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for i in range(2):
        fig, ax = new_figure(4, 3)
        ax.bar(["代码", "数学", "写作"], [0.8, 0.6, 0.7])
        ax.set_title("各类别的准确率")
        png = png_bytes(fig)
open(sys.argv[1], "wb").write(png)
print(json.dumps({
    "font": cjk_font(),
    "missing": [str(w.message) for w in caught if "missing from" in str(w.message)],
    "ours": [str(w.message) for w in caught if w.category.__name__ == "CheemsWarning"],
}))
"""


def run_python(code: str, config: Path, *args: object, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "MPL_IGNORE_SYSTEM_FONTS"}
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        env={**environ, "MPLCONFIGDIR": str(config), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def stale_cache(config: Path) -> Path:
    """matplotlib's font cache written while no system font was visible: it lists matplotlib's own fonts only."""
    proc = run_python("import matplotlib.font_manager", config, MPL_IGNORE_SYSTEM_FONTS="1")
    assert proc.returncode == 0, proc.stderr
    (cache,) = config.glob("fontlist-*.json")
    assert not any(name in cache.read_text(encoding="utf-8") for name in CJK_FONTS)
    return cache


def test_a_cjk_font_installed_after_the_cache_was_written_is_found_and_remembered(tmp_path):
    from matplotlib import font_manager

    if not any("CJK" in Path(path).name for path in font_manager.findSystemFonts()):
        pytest.skip("no CJK font installed (Debian: apt-get install fonts-noto-cjk)")
    cache = stale_cache(tmp_path / "mpl")
    png = tmp_path / "chart.png"
    proc = run_python(CHART, tmp_path / "mpl", png)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["font"] in CJK_FONTS and got["missing"] == [] and got["ours"] == [], got
    assert png.read_bytes().startswith(b"\x89PNG")
    assert got["font"] in cache.read_text(encoding="utf-8")  # saved: the next run reads it without a rescan


def test_without_any_cjk_font_one_warning_says_how_to_install_one(tmp_path):
    stale_cache(tmp_path / "mpl")
    proc = run_python(CHART, tmp_path / "mpl", tmp_path / "chart.png", MPL_IGNORE_SYSTEM_FONTS="1")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["font"] is None and got["missing"]  # the boxes the warning is about
    assert len(got["ours"]) == 1 and "apt-get install fonts-noto-cjk" in got["ours"][0], got["ours"]
