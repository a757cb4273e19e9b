#!/usr/bin/env python3
"""Where a cold compile's time to first mask goes, schema by schema, over MaskBench-dev.

For each schema, from a cold compile cache, in the serving process (no compile workers):
- schema -> IR;
- the rest of the front: the IR's size check, the NFA and its flattening;
- the automaton: the compiled DFA and its tables over the vocabulary;
- warm-up: the masks computed ahead along an example document (`warm_s` default);
- the first mask: a new matcher's first `fill_bitmask`.
The phases are read from the compiled grammar's own `stats` where it keeps them.
Printed: each phase's p50/p90/p99 and its share of the summed TTFM, over all schemas
and over the slowest tenth. Schemas that do not compile are counted and left out. The
heap loaded at setup is frozen first (`gc.freeze()`), as in the server and MaskBench.

    python -m benchmarks.ttfm_breakdown --limit 300
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.masks.tokenizer import load_tokenizer

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "maskbench-dev"
PHASES = ("schema_ir", "front_rest", "automaton", "warm", "first_mask")


def schemas(folder: Path, limit: int | None) -> list[tuple[str, object]]:
    out = []
    for path in sorted(folder.glob("*.json"))[:limit]:
        record = json.loads(path.read_text())
        out.append((path.stem, record["schema"] if isinstance(record, dict) and "schema" in record else record))
    return out


def phases_of(structgen, vocab, bitmask, schema) -> dict[str, float]:
    """Seconds per phase for one cold compile of `schema`."""
    structgen.clear_cache()
    t0 = time.perf_counter()
    grammar = structgen.compile_json_schema(schema, vocab)
    compiled = time.perf_counter() - t0
    t0 = time.perf_counter()
    grammar.matcher().fill_bitmask(bitmask, 0)
    first_mask = time.perf_counter() - t0
    stats = grammar.stats
    warm = stats.get("warm_s", 0.0)
    return {"schema_ir": stats["ir_s"], "front_rest": stats["front_s"] - stats["ir_s"],
            "automaton": stats["compile_s"] - stats["front_s"], "warm": warm, "first_mask": first_mask,
            "ttfm": compiled + first_mask}


def share_of(row: dict[str, float], phase: str) -> float:
    """A phase's seconds; "other": what the phases leave of TTFM (cache, parse, checks)."""
    return row[phase] if phase != "other" else row["ttfm"] - sum(row[p] for p in PHASES)


def report(rows: list[dict[str, float]]) -> None:
    ttfm = np.array([r["ttfm"] for r in rows])
    slow = [r for r in rows if r["ttfm"] >= np.percentile(ttfm, 90)]
    print(f"{len(rows)} schemas; TTFM p50 {np.percentile(ttfm, 50) * 1e3:.1f} ms, "
          f"p90 {np.percentile(ttfm, 90) * 1e3:.1f}, p99 {np.percentile(ttfm, 99) * 1e3:.1f}, "
          f"max {ttfm.max() * 1e3:.1f}")
    print(f"{'phase':12} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'share':>7} {'share, slowest 10%':>19}")
    for phase in (*PHASES, "other"):
        values = np.array([share_of(r, phase) for r in rows])
        slow_values = [share_of(r, phase) for r in slow]
        share = values.sum() / ttfm.sum()
        slow_share = sum(slow_values) / sum(r["ttfm"] for r in slow)
        print(f"{phase:12} {np.percentile(values, 50) * 1e3:8.2f} {np.percentile(values, 90) * 1e3:8.2f} "
              f"{np.percentile(values, 99) * 1e3:8.2f} {share:7.1%} {slow_share:19.1%}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--limit", type=int, default=None, help="the first N schema files, by name")
    args = p.parse_args(argv)
    import structgen

    tokenizer, _ = load_tokenizer()
    vocab = structgen.Vocabulary.from_tokenizer(tokenizer)
    bitmask = structgen.allocate_bitmask(1, vocab.vocab_size)
    structgen.compile_choice(["ready"], vocab).matcher().fill_bitmask(bitmask, 0)  # vocabulary tables, once
    # As the server and MaskBench's workers do after setup: a full collection then skips
    # what setup loaded (the tokenizer, the vocabulary), instead of adding ~200 ms to
    # whichever compile it lands in.
    gc.collect()
    gc.freeze()
    rows, failed = [], 0
    for _name, schema in schemas(args.data, args.limit):
        try:
            rows.append(phases_of(structgen, vocab, bitmask, schema))
        except structgen.StructgenError:
            failed += 1
    print(f"({failed} schemas did not compile)")
    report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
