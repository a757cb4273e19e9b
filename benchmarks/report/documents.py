"""The two files: RESULTS.md, written whole, and README.md's headline blocks. Owns which
renderer serves each suite (`RENDERERS`, `HEADLINES`, `SHARED_HEADLINES`), a suite's
block with its plot links (`render`, `render_headline`), every marked block of a text
rendered anew (`updated_text`, `results_text`), and what is out of date (`stale`,
`stale_texts`) or rewritten (`update`).

Must not render a suite's figures itself (each suite's module does), and must not touch
README.md outside the markers.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from benchmarks.report.cfg import headline_cfg, render_cfg
from benchmarks.report.constrained import headline_constrained, render_constrained
from benchmarks.report.engine import headline_engine, render_engine
from benchmarks.report.engine_gpu import headline_engine_gpu, render_engine_gpu
from benchmarks.report.layout import FIGURES, MARKED_BLOCK, README_MD, RESULTS_HEADER, RESULTS_MD, TITLES
from benchmarks.report.masks import headline_masks, render_masks
from benchmarks.report.robustness import render_fuzz, render_isolation, render_soak
from benchmarks.report.scale_out import render_scale_out
from benchmarks.report.serve import headline_serve, render_serve
from benchmarks.report.startup import headline_startup, render_startup
from benchmarks.report.tools import render_tools
from benchmarks.catalog import REPO, RESULTS

RENDERERS = {"masks": render_masks, "cfg": render_cfg, "tools": render_tools, "engine": render_engine,
             "engine-gpu": render_engine_gpu, "constrained": render_constrained, "serve": render_serve,
             "startup": render_startup, "isolation": render_isolation, "fuzz": render_fuzz, "soak": render_soak,
             "scale-out": render_scale_out}
HEADLINES = {"masks": headline_masks, "cfg": headline_cfg, "engine": headline_engine,
             "engine-gpu": headline_engine_gpu, "constrained": headline_constrained, "serve": headline_serve,
             "startup": headline_startup}
# Suites whose headline is another suite's: start-up's table also holds the robustness suites,
# MaskBench's intro the tool-call grammars' line.
SHARED_HEADLINES = {"isolation": "startup", "fuzz": "startup", "soak": "startup", "scale-out": "serve",
                    "tools": "masks"}


def render(suite: str, results_dir: Path = RESULTS, document: Path = RESULTS_MD) -> str | None:
    """The markdown of one suite's block in RESULTS.md, or None when its results are missing
    or of a shape this module does not know. `document` is the file the links are written for."""
    results_dir = Path(results_dir)
    parts = rendered_parts(RENDERERS, suite, results_dir)
    if not parts:
        return None
    links = [f"![{caption}]({link(results_dir / name, document)})" for name, caption in figures(suite, results_dir)]
    if links:
        parts.append(" ".join(links))
    return "\n\n".join(parts)


def render_headline(suite: str, results_dir: Path = RESULTS, document: Path = README_MD) -> str | None:
    """The markdown of one suite's headline block in README.md (or None, as `render`): its
    main figures, then links to its section of RESULTS.md and to its plots."""
    results_dir = Path(results_dir)
    parts = rendered_parts(HEADLINES, suite, results_dir)
    if not parts:
        return None
    more = f"All figures, the machine and the command: [RESULTS.md]({link(RESULTS_MD, document)}" \
           f"#{anchor(TITLES[suite])})"
    plots = [f"[{caption}]({link(results_dir / name, document)})"
             for name, caption in figures(suite, results_dir)]
    if plots:
        more += "; plots: " + ", ".join(plots)
    return "\n\n".join([*parts, more + "."])


def rendered_parts(renderers: dict, suite: str, results_dir: Path) -> list[str]:
    try:
        return renderers[suite](Path(results_dir))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        print(f"{suite}: results not rendered ({type(error).__name__}: {error})", file=sys.stderr)
        return []


def figures(suite: str, results_dir: Path) -> list[tuple[str, str]]:
    """(file name, caption) of the suite's plots that exist in the results folder."""
    return [(name, caption) for name, caption in FIGURES[suite].items() if (Path(results_dir) / name).exists()]


def link(path: Path, document: Path) -> str:
    """`path` as `document` links it: relative to the document's folder."""
    return Path(os.path.relpath(Path(path).resolve(), Path(document).resolve().parent)).as_posix()


def anchor(heading: str) -> str:
    """The fragment a markdown renderer (GitHub's) gives a heading: lower case, punctuation
    dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def updated_text(text: str, results_dir: Path, document: Path) -> tuple[str, list[str]]:
    """`text` (the file `document`) with every marked block re-rendered -- results blocks with
    the full tables, headline blocks with the headlines -- and the suites whose block changed.
    A block whose suite is unknown or has no results is left as it is."""
    changed = []

    def replace(match: re.Match) -> str:
        kind, suite = match["kind"], match["suite"]
        renderer = render if kind == "results" else render_headline
        body = renderer(suite, results_dir, document) if suite in RENDERERS else None
        if body is None:
            return match[0]
        # Results blocks have blank lines inside their markers; a headline, kept short,
        # has none (a comment line ends its own block, so markdown still sees the tables).
        new_body = "\n" + body.strip() + "\n\n" if kind == "results" else body.strip() + "\n"
        if new_body != match["body"]:
            changed.append(suite)
        return match[1] + new_body + match[5]

    return MARKED_BLOCK.sub(replace, text), changed


def results_text(old: str | None, results_dir: Path, document: Path = RESULTS_MD) -> str:
    """RESULTS.md as it should read: the header, then a heading and a results block per
    suite. A suite without results keeps the block `old` (the file as it is) has, if any."""
    kept = {m["suite"]: m["body"] for m in MARKED_BLOCK.finditer(old or "") if m["kind"] == "results"}
    sections = [RESULTS_HEADER]
    for suite, title in TITLES.items():
        about = (f"`structgen bench {suite}`; what it measures: "
                 f"[docs/performance.md]({link(REPO / 'docs' / 'performance.md', document)}#{anchor(title)}).")
        block = f"<!-- results:{suite} -->\n{kept.get(suite, chr(10))}<!-- /results:{suite} -->"
        sections.append(f"## {title}\n\n{about}\n\n{block}\n")
    text, _ = updated_text("\n".join(sections), results_dir, document)
    return text


def stale(results_dir: Path = RESULTS, readme: Path = README_MD, results_md: Path = RESULTS_MD) -> list[str]:
    """What is out of date, one entry per file: "FILE: suite, suite" (or "FILE: missing")."""
    return stale_texts(results_md.read_text() if results_md.exists() else None, readme.read_text(), results_dir,
                       readme, results_md)


def stale_texts(results_md_text: str | None, readme_text: str, results_dir: Path = RESULTS,
                readme: Path = README_MD, results_md: Path = RESULTS_MD) -> list[str]:
    """`stale` on the two files' texts (RESULTS.md's None when it does not exist)."""
    found = []
    if results_md_text is None:
        found.append(f"{results_md}: missing")
    elif results_text(results_md_text, results_dir, results_md) != results_md_text:
        _, suites = updated_text(results_md_text, results_dir, results_md)
        found.append(f"{results_md}: " + (", ".join(suites) or "headings or header"))
    _, suites = updated_text(readme_text, results_dir, readme)
    if suites:
        found.append(f"{readme}: " + ", ".join(suites))
    return found


def update(results_dir: Path = RESULTS, readme: Path = README_MD, results_md: Path = RESULTS_MD) -> list[str]:
    """Rewrite RESULTS.md and README.md's headline blocks from the results; what changed, as
    `stale` says it. A file is not written when nothing in it changed."""
    changed = stale(results_dir, readme, results_md)
    old = results_md.read_text() if results_md.exists() else None
    new = results_text(old, results_dir, results_md)
    if new != old:
        results_md.write_text(new)
    text = readme.read_text()
    new_readme, _ = updated_text(text, results_dir, readme)
    if new_readme != text:
        readme.write_text(new_readme)
    return changed
