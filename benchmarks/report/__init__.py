"""The benchmark result tables, generated from the results files: benchmarks/RESULTS.md
in full, and one headline table per suite in README.md.

Owns:
- benchmarks/RESULTS.md, written whole: a short header, then per suite (masks, cfg,
  tools, engine, engine-gpu, constrained, serve) a heading and, between `<!-- results:SUITE -->`
  and `<!-- /results:SUITE -->`, the suite's tables, a line saying which machine, versions
  and commit the figures come from, the command that reproduces them, and the suite's
  PNG plots;
- in README.md, the markdown between `<!-- headline:SUITE -->` and
  `<!-- /headline:SUITE -->`: a short table of the suite's main figures (no commit, no
  command) and links to its section of RESULTS.md and to its plots;
- the names and captions of those PNGs (FIGURES; plots.py draws them) and the reading of
  the results files, which plots.py shares.

Reads benchmarks/results/*.json; must not measure anything, and must not touch README.md
outside the markers: the prose around them is written by hand (what the figures mean is
docs/performance.md's). A figure that the results file does not hold is left out, never
filled in; a suite whose results are missing keeps the block it had.

    python -m benchmarks.report            # rewrite RESULTS.md and README.md's headline blocks
    python -m benchmarks.report --check    # exit 1 (and say which) when either is out of date

The package, one concept per module (each module's docstring says what it owns):
  layout       the documents' paths, sections, header, markers and figure names
  results      reading the results files, and the machine and commit they record
  formats      number formats and markdown tables
  provenance   the line under each suite's tables: where the figures come from, and
               the command that reproduces them
  masks, cfg, tools, engine, engine_gpu, constrained, serve, scale_out, startup, robustness
               one suite's (or a few related suites') block and headline each
  documents    RESULTS.md written whole, README.md's headline blocks, staleness
  cli          `python -m benchmarks.report [--check]`
"""

from __future__ import annotations

from benchmarks.report.cli import main
from benchmarks.report.documents import (
    HEADLINES,
    RENDERERS,
    SHARED_HEADLINES,
    render,
    render_headline,
    results_text,
    stale,
    stale_texts,
    update,
    updated_text,
)
from benchmarks.report.layout import FIGURES, README_MD, RESULTS_MD, TITLES
from benchmarks.report.provenance import data_option
from benchmarks.report.results import CONSTRAINED_GPU_FILE, read_results, run_label

__all__ = [
    "main", "update", "stale", "stale_texts", "results_text", "updated_text", "render", "render_headline",
    "RENDERERS", "HEADLINES", "SHARED_HEADLINES", "README_MD", "RESULTS_MD", "TITLES", "FIGURES",
    "CONSTRAINED_GPU_FILE", "read_results", "run_label", "data_option",
]
