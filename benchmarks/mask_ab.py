"""A/B of structgen's mask times between two versions, interleaved in one process.

Owns the before/after measurement of a change to the grammar layer. Whole MaskBench runs
on these shared machines move by 15-100% between runs (the same code's TBM p50 moved
5.2 -> 7.1 us from one run to the next), far more than most changes do. Here both
versions are imported side by side into one process -- each git revision exported into
a temporary folder as its own package (`sg_base`, `sg_new`), its Cython kernels built
there -- and every schema is
compiled cold and walked by each version in turn, the order alternating per schema, so
that a slow minute of the machine falls on both. Token times are read from the thread's
CPU clock, which time spent descheduled does not advance.

    python benchmarks/mask_ab.py --base HEAD~1                 # HEAD~1 vs the working tree
    python benchmarks/mask_ab.py --base 3c87a63 --new HEAD --schemas 300 --seed 1
    python benchmarks/mask_ab.py --base HEAD --new HEAD --new-env STRUCTGEN_AUTOMATON=flat

Prints, per version: tokens, TBM mean/p50/p90/p99/p99.9 and total (us, s), and TTFM
p50/p90 (ms); then the new/base ratios. Reads ../shared/data/maskbench-dev; must not
write anything outside its temporary folder.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import glob
import importlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "maskbench-dev"
VERSIONS = ("base", "new")


SOURCES = (".py", ".pyx", ".pxd", ".h")  # what a version's package is made of (.pyx, .h: compiled kernels)


def export(rev: str | None, name: str, into: Path) -> None:
    """The `structgen` package of git revision `rev` (None: the working tree) as package
    `name` under `into`, its own imports renamed and its kernels built."""
    target = into / name
    if rev is None:
        files = {p.relative_to(REPO / "structgen"): p.read_bytes() for p in (REPO / "structgen").rglob("*")
                 if p.suffix in SOURCES}
    else:
        tar = subprocess.run(["git", "archive", rev, "structgen"], cwd=REPO, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            files = {Path(m.name).relative_to("structgen"): archive.extractfile(m).read()
                     for m in archive.getmembers() if m.isfile() and m.name.endswith(SOURCES)}
    for rel, data in files.items():
        text = re.sub(r"\bstructgen(?=[.\s])", name, data.decode())
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    build_kernels(target)


# Builds the extensions named on its command line as setup.py does (run in the folder
# that holds the package; a kernel's C headers sit beside its .pyx).
_BUILD = """
import sys, numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
modules, sys.argv[1:] = sys.argv[1:], ["build_ext", "--inplace"]
setup(script_args=sys.argv[1:], ext_modules=cythonize(
    [Extension(m, [m.replace(".", "/") + ".pyx"], extra_compile_args=["-O3"],
               include_dirs=[numpy.get_include(), m.rsplit(".", 1)[0].replace(".", "/")])
     for m in modules], include_path=["."], quiet=True))
"""


def build_kernels(package: Path) -> None:
    """Compile the Cython kernels (.pyx) of an exported package in place, if it has any."""
    modules = [".".join(p.relative_to(package.parent).with_suffix("").parts) for p in sorted(package.rglob("*.pyx"))]
    if modules:
        subprocess.run([sys.executable, "-c", _BUILD, *modules], cwd=package.parent, check=True, capture_output=True)


def load_instances(tokenizer, count: int, seed: int) -> list[tuple[dict, list[list[int]]]]:
    files = sorted(glob.glob(str(DATA / "*.json")))
    if not files:
        raise SystemExit(f"mask_ab: no MaskBench schemas in {DATA} (../shared beside the checkout)")
    random.Random(seed).shuffle(files)
    out = []
    for path in files[:count]:
        record = json.loads(Path(path).read_text())
        tests = [tokenizer.encode(json.dumps(t["data"]), add_special_tokens=False) + [tokenizer.eos_token_id]
                 for t in record["tests"]]
        out.append((record["schema"], tests))
    return out


@contextlib.contextmanager
def environment(settings: dict[str, str]):
    """Environment variables set for the duration (a version's settings, `--new-env`)."""
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def warm_up(sg, vocab, tokenizer) -> None:
    """Build the vocabulary's token trie and load (or compile) the compiled code a walk
    uses, outside the timings."""
    mask = sg.allocate_bitmask(1, vocab.vocab_size)
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 80}}}
    grammar = sg.compile_json_schema(schema, vocab, timeout_s=600)  # compiled code may build now
    matcher = grammar.matcher()
    for token in tokenizer.encode('{"a": "warm up", "b": [1, 2.5, null]}', add_special_tokens=False):
        matcher.fill_bitmask(mask, 0)
        matcher.accept_token(token)
    sg.clear_cache()


def measure(packages: dict, vocabs: dict, data: list, envs: dict | None = None,
            options: dict | None = None) -> dict[str, dict[str, list[int]]]:
    """Per version: every token's mask + advance time and every schema's TTFM, in ns.
    `envs`: environment variables set while a version compiles; `options`: keyword
    arguments of compile_json_schema, for both."""
    clock = time.thread_time_ns
    times = {v: {"tbm": [], "ttfm": []} for v in packages}
    masks = {v: packages[v].allocate_bitmask(1, vocabs[v].vocab_size) for v in packages}
    envs = envs or {}
    for i, (schema, tests) in enumerate(data):
        for v in (VERSIONS if i % 2 == 0 else VERSIONS[::-1]):
            sg, vocab, mask = packages[v], vocabs[v], masks[v]
            sg.clear_cache()
            start = clock()
            try:
                with environment(envs.get(v, {})):
                    grammar = sg.compile_json_schema(schema, vocab, **(options or {}))
                grammar.matcher().fill_bitmask(mask, 0)
            except Exception:  # refused schemas: both versions should agree; not timed
                continue
            times[v]["ttfm"].append(clock() - start)
            for tokens in tests:
                matcher = grammar.matcher()
                for token in tokens:
                    t0 = clock()
                    matcher.fill_bitmask(mask, 0)
                    accepted = matcher.accept_token(token)
                    times[v]["tbm"].append(clock() - t0)
                    if not accepted:
                        break
    return times


def table(times: dict) -> str:
    rows = ["| version | tokens | TBM mean | p50 | p90 | p99 | p99.9 (us) | token time (s) | TTFM p50 | p90 (ms) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    figures = {}
    for v in VERSIONS:
        tbm, ttfm = np.asarray(times[v]["tbm"]) / 1e3, np.asarray(times[v]["ttfm"]) / 1e6
        f = figures[v] = [tbm.mean(), *np.percentile(tbm, [50, 90, 99, 99.9]), tbm.sum() / 1e6,
                          *np.percentile(ttfm, [50, 90])]
        rows.append(f"| {v} | {tbm.size:,} | " + " | ".join(f"{x:,.1f}" for x in f[:5]) +
                    f" | {f[5]:.2f} | {f[6]:.1f} | {f[7]:.1f} |")
    ratios = [n / b if b else float("nan") for n, b in zip(figures["new"], figures["base"])]
    rows.append("| new / base | | " + " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--base", required=True, help="git revision measured as 'base'")
    ap.add_argument("--new", default=None, help="git revision measured as 'new' (default: the working tree)")
    ap.add_argument("--schemas", type=int, default=150, help="maskbench-dev schemas (seeded random sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--new-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment variable set while 'new' compiles (repeatable)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=JSON",
                    help='compile_json_schema option for both versions, e.g. property_order=\'"any"\' (repeatable)')
    args = ap.parse_args(argv)
    options = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.option)}

    from structgen.default_model import load_default_tokenizer

    tokenizer = load_default_tokenizer()
    with tempfile.TemporaryDirectory(prefix="mask_ab_") as tmp:
        export(args.base, "sg_base", Path(tmp))
        export(args.new, "sg_new", Path(tmp))
        sys.path.insert(0, tmp)
        packages = {v: importlib.import_module("sg_" + v) for v in VERSIONS}
        vocabs = {v: packages[v].Vocabulary.from_tokenizer(tokenizer) for v in VERSIONS}
        envs = {"new": dict(item.split("=", 1) for item in args.new_env)}
        data = load_instances(tokenizer, args.schemas, args.seed)
        for v in VERSIONS:  # per-vocabulary setup (token trie, compiled code), untimed
            with environment(envs.get(v, {})):
                warm_up(packages[v], vocabs[v], tokenizer)
        gc.collect()
        gc.freeze()
        times = measure(packages, vocabs, data, envs, options)
    print(f"{args.schemas} maskbench-dev schemas (seed {args.seed}); base = {args.base}, "
          f"new = {args.new or 'working tree'}; thread CPU time, interleaved per schema"
          + (f"; options {options}" if options else ""))
    print(table(times))
    print("schemas compiled: " + ", ".join(f"{v} {len(times[v]['ttfm'])}" for v in VERSIONS)
          + " (a schema one version refuses is walked by the other only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
