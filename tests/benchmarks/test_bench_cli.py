"""`structgen bench`: the suites behind one command, on real parts (a real MaskBench run of
structgen on a user's own schemas), and the generated result tables (benchmarks/RESULTS.md,
README's headlines) in step with the committed results."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.paths import REPO


def run_structgen(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "structgen.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_bench_help_lists_every_suite():
    result = run_structgen("bench", "--help")
    assert result.returncode == 0, result.stderr
    for suite in ("masks", "cfg", "engine", "engine-gpu", "constrained", "serve", "all"):
        assert f"\n  {suite} " in result.stdout


def test_an_unknown_option_of_a_suite_is_a_usage_error():
    result = run_structgen("bench", "masks", "--no-such-option", "--no-plots")
    assert result.returncode != 0
    assert "--no-such-option" in result.stderr


def test_bench_masks_on_my_own_schemas(tmp_path):
    schemas = tmp_path / "mine"
    schemas.mkdir()
    (schemas / "plain.json").write_text(json.dumps(
        {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}))
    (schemas / "with_tests.json").write_text(json.dumps({
        "schema": {"type": "array", "items": {"enum": ["red", "green"]}, "maxItems": 2},
        "tests": [{"data": ["red", "green"], "valid": True}, {"data": ["blue"], "valid": False}]}))
    (schemas / "refused.json").write_text(json.dumps({"type": "string", "maxLenght": 3}))
    results = tmp_path / "results"
    result = run_structgen("bench", "masks", "--schemas", str(schemas), "--engines", "structgen",
                           "--results", str(results), "--no-plots")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads((results / "maskbench.json").read_text())
    by_id = {row["id"]: row["engines"]["structgen"] for row in report["schemas"]}
    assert by_id["plain.json"]["status"] == "ok" and by_id["plain.json"]["passing"]
    assert by_id["with_tests.json"]["status"] == "ok" and by_id["with_tests.json"]["passing"]
    assert by_id["with_tests.json"]["tokens"] > 0
    assert by_id["refused.json"]["status"] == "compile_error"
    assert "maxLenght" in by_id["refused.json"]["error"]
    histogram = report["engines"]["structgen"]["tbm_hist"]
    assert sum(histogram["counts"]) == report["engines"]["structgen"]["tbm_us"]["n"] > 0
    assert "| structgen |" in result.stdout  # the markdown table


def test_results_md_and_readme_headlines_match_the_results():
    from benchmarks.report import (HEADLINES, README_MD, RENDERERS, RESULTS_MD, SHARED_HEADLINES, results_text,
                                   updated_text)

    results_dir = REPO / "benchmarks" / "results"
    results_md = RESULTS_MD.read_text()
    assert results_text(results_md, results_dir) == results_md, (
        "benchmarks/RESULTS.md is stale: run `python -m benchmarks.report`")
    readme = README_MD.read_text()
    regenerated, suites = updated_text(readme, results_dir, README_MD)
    assert regenerated == readme, (f"README.md's headline tables are stale for {suites}: "
                                   "run `python -m benchmarks.report`")
    headlines = re.findall(r"<!-- headline:([\w-]+) -->", readme)
    assert sorted(headlines) == sorted(HEADLINES), "README.md has one headline table per suite"
    assert set(RENDERERS) == set(HEADLINES) | set(SHARED_HEADLINES), "every suite has a headline, own or shared"
    assert "<!-- results:" not in readme, "the full tables belong in benchmarks/RESULTS.md"


def test_the_check_catches_a_stale_block():
    # A block edited by hand (or left behind by new results) must be caught, in either file.
    from benchmarks.report import README_MD, RESULTS_MD, stale_texts

    results_dir = REPO / "benchmarks" / "results"
    results_md, readme = RESULTS_MD.read_text(), README_MD.read_text()
    assert stale_texts(results_md, readme, results_dir) == []
    for opening in ("<!-- results:masks -->\n", "<!-- headline:serve -->\n"):
        assert opening in results_md + readme
    stale_results = results_md.replace("<!-- results:masks -->\n", "<!-- results:masks -->\n| a stale row |\n", 1)
    stale_readme = readme.replace("<!-- headline:serve -->\n", "<!-- headline:serve -->\n| a stale row |\n", 1)
    assert stale_texts(stale_results, readme, results_dir) == [f"{RESULTS_MD}: masks"]
    assert stale_texts(results_md, stale_readme, results_dir) == [f"{README_MD}: serve"]
    assert stale_texts(None, readme, results_dir) == [f"{RESULTS_MD}: missing"]
    result = subprocess.run([sys.executable, "-m", "benchmarks.report", "--check"], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_reproduce_commands_do_not_depend_on_where_the_checkout_lies():
    # Results written in one checkout are rendered in another (CI clones afresh): the
    # default data directory is left out of the command wherever it lay, a chosen one kept.
    from benchmarks.report import data_option

    assert data_option("/work/shared/data/maskbench-dev") == {}
    assert data_option("/tmp/ci/shared/data/maskbench-dev") == {}
    assert data_option("/home/me/my-schemas") == {"data": "/home/me/my-schemas"}


def test_mask_ab_runs_two_revisions_side_by_side():
    """benchmarks/mask_ab.py imports two exported revisions into one process; the same
    revision twice must walk exactly the same tokens."""
    result = subprocess.run([sys.executable, "benchmarks/mask_ab.py", "--base", "HEAD", "--new", "HEAD",
                             "--schemas", "3"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in result.stdout.splitlines()
            if line.startswith("| base |") or line.startswith("| new |")}
    assert set(rows) == {"base", "new"}
    assert rows["base"] == rows["new"] and int(rows["base"].replace(",", "")) > 0
    assert "| new / base |" in result.stdout
