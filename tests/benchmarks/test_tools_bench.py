"""The tools suite (benchmarks/tools.py) in a tiny run: 1 and 3 tools, one tool set each,
every engine installed here. The results file holds a row per engine, tool_choice and
size, structgen's grammars accept their valid call token by token, and the one-replaced
reuse rows are there; the script also runs by its path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.paths import MASKBENCH, REPO

pytestmark = pytest.mark.skipif(not MASKBENCH.is_dir(), reason="needs MaskBench-dev")


def test_a_tiny_run_writes_every_row_and_structgen_accepts_its_calls(tmp_path):
    out = tmp_path / "tools.json"
    result = subprocess.run([sys.executable, "-m", "benchmarks.tools", "--sizes", "1,3", "--samples", "1",
                             "--reuse-size", "3", "--output", str(out)], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(out.read_text())
    settings = report["settings"]
    assert report["suite"] == "tools" and settings["sizes"] == [1, 3] and settings["seeds"] == [0]
    assert {"cpu", "cores", "loadavg_1min_start_end"} <= set(report["machine"])
    assert report["versions"]["structgen"] and "structgen" in settings["engines"]
    rows = {(row["engine"], row["tool_choice"], row["tools"]): row for row in report["cold"]}
    assert set(rows) == {(engine, choice, size) for engine in settings["engines"]
                         for choice in ("required", "auto") for size in (1, 3)}
    for (engine, _, _), row in rows.items():
        if engine == "structgen":
            assert row["errors"] == [] and row["valid_call_accepted"] == 1, row
            assert 0 < row["compile_ms"] <= row["ttfm_ms"], row
    assert [row["tool_choice"] for row in report["reuse"]] == ["required", "auto"]
    for row in report["reuse"]:
        assert row["tools"] == 3 and row["errors"] == [], row
        for key in ("cold_ttfm_ms", "one_replaced_cache_kept_ttfm_ms", "one_replaced_cold_ttfm_ms"):
            assert row[key] > 0, row
    assert "| tools | structgen compile | structgen TTFM |" in result.stdout


def test_the_script_runs_by_its_path():
    result = subprocess.run([sys.executable, "benchmarks/tools.py", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--sizes" in result.stdout and "--reuse-size" in result.stdout
