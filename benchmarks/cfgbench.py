#!/usr/bin/env python3
"""CFGBench: context-free grammars -- compile time and per-token mask time of structgen
and its peers (llguidance, xgrammar), a sibling of maskbench.py.

Three sections, each running every engine in the same run on the same instances, with the
SmolLM2 tokenizer (as maskbench.py loads it):

  json_object  "any JSON object": structgen compile_json_schema({"type": "object"}),
               llguidance grammar_from_json_schema({"type": "object"}), xgrammar
               compile_json_schema('{"type":"object"}', any_whitespace=False) and
               compile_builtin_json_grammar(); instances: every valid MaskBench-dev test
               instance whose data is a JSON object, text = json.dumps(data).
  recursive    the MaskBench-dev schemas that structgen compiles to recursive rules
               (schema_to_ir(schema) refers to rules other than "any JSON value"); every
               test instance, valid and invalid, as maskbench.py does.
  grammars     every grammars/*.lark file: structgen compile_grammar(lark) and (for a
               .gbnf twin) compile_grammar(gbnf, syntax="gbnf"), llguidance
               LLMatcher.grammar_from_lark(lark), xgrammar compile_grammar(gbnf twin).
               Sentences: realistic samples (tests/test_grammars.py's lists when it exists,
               built-in pools, random sentences from the grammar as a fallback) and
               corrupted/truncated variants; lark's own Earley parser labels each one
               valid or invalid, and every engine's verdict is compared with lark's.

Measurements follow maskbench.py, in the same loop (walk.py): TTFM = cold compile
(structgen.clear_cache(); xgrammar cache disabled) + new matcher + first mask; TBM = per
token, fill the mask + check the token's bit + advance the matcher (the fill alone is
reported too as "mask"); at the end one more mask, where EOS must be allowed and the
matcher accepting. Each engine runs in a worker process (maskbench.py's Worker) that is
killed and restarted when it exceeds the compile or walk timeout or crashes; engines run
one at a time. See benchmarks/README.md.

    python benchmarks/cfgbench.py                       # all sections
    python benchmarks/cfgbench.py --quick
    python benchmarks/cfgbench.py --sections grammars --limit 20
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import multiprocessing as mp
import os
import platform
import random
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.maskbench import (
    StructgenAdapter,
    Worker,
    cpu_info,
    fmt,
    load_tokenizer,
    start_worker,
    stats,
    structgen_source_hash,
)
from benchmarks.peers import LLGuidanceAdapter, XGrammarAdapter, _pkg_version
from benchmarks.walk import first_mask, walk_instances

SECTIONS = ["json_object", "recursive", "grammars"]
ANY_JSON_VALUE = "any JSON value"
TBM_Q = [50, 90, 99]
TTFM_Q = [50, 90]


# --------------------------------------------------------------------------------------
# adapters: compile(spec) where spec = {"kind": ..., ...}


class SGCfg(StructgenAdapter):
    """structgen: compile_json_schema(schema, vocab) (default whitespace) or
    compile_grammar(text, vocab, syntax=...)."""

    @classmethod
    def settings(cls):
        return {"json_schema": "compile_json_schema(schema, vocab) (whitespace='default')",
                "grammar": "compile_grammar(text, vocab, syntax='lark'|'gbnf') (default limits)",
                "cache": "structgen.clear_cache() before each compile"}

    def compile(self, spec):
        if "kind" not in spec:  # a bare schema (maskbench's probe)
            spec = {"kind": "json_schema", "schema": spec}
        k = spec["kind"]
        if k == "json_schema":
            return self.sg.compile_json_schema(spec["schema"], self.vocab)
        if k in ("lark", "gbnf"):
            kw = {"max_states": spec["max_states"]} if "max_states" in spec else {}
            return self.sg.compile_grammar(spec["text"], self.vocab, syntax=k, **kw)
        raise ValueError(f"structgen: no {k!r}")


class LLGCfg(LLGuidanceAdapter):
    @classmethod
    def settings(cls):
        return {"json_schema": "LLMatcher.grammar_from_json_schema(schema) (default options)",
                "grammar": "LLMatcher.grammar_from_lark(text)", "limits": "default",
                "matcher": "deep_copy() of the compiled LLMatcher per instance"}

    def compile(self, spec):
        LLMatcher = self.llg.LLMatcher
        k = spec["kind"]
        if k == "json_schema":
            g = LLMatcher.grammar_from_json_schema(spec["schema"])
        elif k == "lark":
            g = LLMatcher.grammar_from_lark(spec["text"])
        else:
            raise ValueError(f"llguidance: no {k!r}")
        m = LLMatcher(self.tok, g)
        if m.is_error():
            raise ValueError(m.get_error())
        return m


class XGRCfg(XGrammarAdapter):
    @classmethod
    def settings(cls):
        return {"json_schema": "compile_json_schema(json.dumps(schema), **options) (section 2: defaults "
                               "any_whitespace=True, strict_mode=True)",
                "builtin_json": "compile_builtin_json_grammar()",
                "grammar": "compile_grammar(gbnf twin text) (xgrammar EBNF, root rule `root`)",
                "GrammarCompiler": "max_threads=8 (default), cache_enabled=False (cold compiles)"}

    def compile(self, spec):
        k = spec["kind"]
        if k == "json_schema":
            return self.compiler.compile_json_schema(json.dumps(spec["schema"]), **spec.get("options", {}))
        if k == "builtin_json":
            return self.compiler.compile_builtin_json_grammar()
        if k == "gbnf":
            return self.compiler.compile_grammar(spec["text"])
        raise ValueError(f"xgrammar: no {k!r}")


CFG_ENGINES = {"structgen": SGCfg, "llguidance": LLGCfg, "xgrammar": XGRCfg}


# --------------------------------------------------------------------------------------
# worker: like maskbench's, plus repeated cold compiles and mask-only times


def _cfg_worker_main(conn, engine, state, tok_dir, mem_limit_gb, log_path):
    ad = start_worker(conn, CFG_ENGINES, engine, state, tok_dir, mem_limit_gb, log_path)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        spec, tests, repeats, walk_budget_s = msg
        cpu0 = time.process_time()
        ttfm, comp = [], []
        try:
            for r in range(max(1, repeats)):
                compiled = None
                before = getattr(ad, "before_compile", None)
                if before is not None:
                    before()
                compiled, ttfm_ns, compile_ns = first_mask(ad, spec)
                ttfm.append(ttfm_ns)
                comp.append(compile_ns)
        except BaseException as e:  # noqa: BLE001 - engines raise anything (incl. pyo3 panics)
            conn.send(("compile_error", f"{type(e).__name__}: {e}"[:2000], type(e).__name__))
            continue
        conn.send(("compiled", ttfm, comp))
        walk = walk_instances(ad, compiled, tests, time_fill=True, budget_s=walk_budget_s)
        conn.send(("done", np.asarray(walk.samples, dtype=np.int64).tobytes(),
                   np.asarray(walk.fills, dtype=np.int64).tobytes(),
                   walk.outcomes, walk.mismatches, walk.n_mismatch, time.process_time() - cpu0))


class CfgWorker(Worker):
    """maskbench's Worker (start, set-up wait, kill on timeout, restart) running
    _cfg_worker_main: the message carries a spec, the instances and a repeat count."""

    def ensure(self):
        if self.proc is None or not self.proc.is_alive():
            self.starts += 1
            parent, child = self.ctx.Pipe()
            self.proc = self.ctx.Process(target=_cfg_worker_main, args=(child, self.engine, self.state, self.tok_dir,
                                                                        self.mem_limit_gb, self.log_path), daemon=True)
            self.proc.start()
            child.close()
            self.conn = parent
            self.up = False

    def run(self, spec, tests, repeats, timeout, walk_timeout, walk_budget):
        try:
            out = self._run_cfg(spec, tests, repeats, timeout, walk_timeout, walk_budget)
        except Exception:
            self.kill()
            raise
        if self.proc is None:
            self.ensure()
        return out

    def _run_cfg(self, spec, tests, repeats, timeout, walk_timeout, walk_budget):
        self.ensure()
        err = self.wait_up()
        if err is not None:
            return err
        self.conn.send((spec, tests, repeats, walk_budget))
        ctimeout = timeout * max(1, repeats)
        msg = self._recv(ctimeout)
        if msg is None:
            self.kill()
            return {"status": "timeout", "error": f"compile exceeded {timeout:g} s"}
        if msg[0] == "crash":
            return {"status": "compile_crash", "error": "engine crashed while compiling: " + msg[1]}
        if msg[0] == "compile_error":
            return {"status": "compile_error", "error": msg[1], "error_type": msg[2]}
        _, ttfm_ns, compile_ns = msg
        out = {"status": "ok", "ttfm_us": [x / 1e3 for x in ttfm_ns], "compile_us": [x / 1e3 for x in compile_ns]}
        msg = self._recv(walk_timeout)
        if msg is None:
            self.kill()
            out.update(status="test_timeout", error=f"instances exceeded {walk_timeout:g} s")
            return out
        if msg[0] == "crash":
            out.update(status="test_crash", error="engine crashed on the instances: " + msg[1])
            return out
        _, samples, fills, outcomes, mismatches, n_mismatch, cpu_s = msg
        out.update(samples_us=np.frombuffer(samples, dtype=np.int64) / 1e3,
                   fill_us=np.frombuffer(fills, dtype=np.int64) / 1e3,
                   outcomes=outcomes, mismatches=mismatches, n_mismatch=n_mismatch, cpu_s=cpu_s)
        if len(outcomes) < len(tests):
            out["truncated"] = f"walk budget ({walk_budget:g} s) spent after {len(outcomes)} of {len(tests)} instances"
        return out


# --------------------------------------------------------------------------------------
# harness


class Harness:
    def __init__(self, args, tokenizer, active, states):
        self.args = args
        self.tok = tokenizer
        self.active = active
        self.states = states
        self.tok_dir = tempfile.mkdtemp(prefix="cfgbench-tok-")
        tokenizer.save_pretrained(self.tok_dir)
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = str(out.with_name(out.stem + "-workers.log"))
        open(self.log_path, "w").close()
        self.ctx = mp.get_context("spawn")
        self.workers = {}
        for e in active:
            self.workers[e] = CfgWorker(e, states.get(e), self.ctx, self.tok_dir, args.mem_limit_gb, self.log_path)
        for e, w in list(self.workers.items()):
            err = w.wait_up()
            if err is not None:
                print(f"note: {e} could not be set up: {err['error']}", file=sys.stderr)
        # untimed warm-up, so that no first measurement pays for lazy imports (lark, ...)
        tiny = [(True, self.encode('{"a": 1}'))]
        warm = {"structgen": [{"kind": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
                              {"kind": "lark", "text": 'start: "a" NUMBER\nNUMBER: /[0-9]+/'},
                              {"kind": "gbnf", "text": 'root ::= "a" [0-9]+'}],
                "llguidance": [{"kind": "json_schema", "schema": {"type": "object"}},
                               {"kind": "lark", "text": 'start: "a" NUMBER\nNUMBER: /[0-9]+/'}],
                "xgrammar": [{"kind": "json_schema", "schema": {"type": "object"}},
                             {"kind": "gbnf", "text": 'root ::= "a" [0-9]+'}]}
        for e in active:
            for spec in warm.get(e, []):
                self.workers[e].run(spec, tiny, 1, 30.0, 60.0, 0)

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False)

    def run(self, engine, spec, tests, repeats):
        n_tok = sum(len(t) for _, t in tests)
        # the worker stops walking new instances after --walk-budget s; the hard timeout
        # (kill) covers one instance that never ends
        walk_timeout = self.args.walk_budget + self.args.test_timeout + n_tok * 200e-6
        t0 = time.monotonic()
        try:
            r = self.workers[engine].run(spec, tests, repeats, self.args.timeout, walk_timeout, self.args.walk_budget)
        except Exception as ex:  # noqa: BLE001 - record any failure and go on
            r = {"status": "init_error", "error": f"harness: {type(ex).__name__}: {ex}"}
        r["task_s"] = time.monotonic() - t0
        return r

    def close(self):
        for w in self.workers.values():
            w.close()

    def restarts(self, prefix=""):
        return sum(w.starts - 1 for e, w in self.workers.items() if e.startswith(prefix))


def progress(total, desc, disable):
    if disable:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="task", dynamic_ncols=True, mininterval=1.0, file=sys.stderr)


def failure_record(tok, valid, toks, o, text=None):
    at = o["at"]
    rec = {"valid": valid, "at_token": at, "of": len(toks), "reason": o["reason"]}
    if at is not None:
        rec["before"] = tok.decode(toks[max(0, at - 12):at])[-60:]
        rec["token"] = tok.decode(toks[at:at + 1]) if at < len(toks) else "<EOS>"
    if text is not None:
        rec["text"] = text if len(text) <= 300 else text[:300] + "..."
    return rec


def summarize_walk(tok, tests, r, texts=None):
    """Per-run outcome counts (instances) and failure records."""
    out = {"valid_ok": 0, "valid": 0, "invalid_ok": 0, "invalid": 0, "exceptions": 0,
           "validation_errors": [], "invalidation_errors": []}
    for ti, ((valid, toks), o) in enumerate(zip(tests, r.get("outcomes", []))):
        out["exceptions"] += bool(o.get("exception"))
        text = texts[ti] if texts else None
        if valid:
            out["valid"] += 1
            if o["accepted"]:
                out["valid_ok"] += 1
            else:
                out["validation_errors"].append({"test": ti, **failure_record(tok, valid, toks, o, text)})
        else:
            out["invalid"] += 1
            if not o["accepted"]:
                out["invalid_ok"] += 1
            else:
                out["invalidation_errors"].append({"test": ti, **({"text": text} if text else {})})
    return out


def tstats(a, qs=TBM_Q):
    return stats(np.asarray(a, dtype=np.float64), qs)


# ---------------------------------------------------------------- section 1: json_object


def section_json_object(h: Harness, files, limit, repeats, no_progress):
    rng = random.Random(0)
    texts = []
    for p in files:
        d = json.loads(p.read_text())
        for t in d.get("tests", []):
            if t.get("valid") and isinstance(t.get("data"), dict):
                texts.append(json.dumps(t["data"]))
    rng.shuffle(texts)
    if limit:
        texts = texts[:limit]
    tests = [(True, h.encode(t)) for t in texts]
    rows = [
        ("structgen", "structgen", {"kind": "json_schema", "schema": {"type": "object"}}),
        ("llguidance", "llguidance", {"kind": "json_schema", "schema": {"type": "object"}}),
        ("xgrammar", "xgrammar json_schema(any_whitespace=False)",
         {"kind": "json_schema", "schema": {"type": "object"}, "options": {"any_whitespace": False}}),
        ("xgrammar", "xgrammar builtin JSON", {"kind": "builtin_json"}),
    ]
    rows = [r for r in rows if r[0] in h.active]
    bar = progress(len(rows), "json_object", no_progress)
    res = []
    for engine, label, spec in rows:
        if bar is not None:
            bar.set_postfix_str(label, refresh=True)
        r = h.run(engine, spec, tests, repeats)
        rec = {"engine": engine, "label": label, "status": r["status"], "task_s": round(r["task_s"], 2)}
        for k in ("error", "truncated"):
            if k in r:
                rec[k] = r[k]
        if "ttfm_us" in r:
            rec["ttfm_us"] = {"runs": [round(x, 1) for x in r["ttfm_us"]], "median": float(np.median(r["ttfm_us"])),
                              "compile_median": float(np.median(r["compile_us"]))}
        if "outcomes" in r:
            w = summarize_walk(h.tok, tests, r, texts)
            rec.update(tbm_us=tstats(r["samples_us"]), mask_us=tstats(r["fill_us"]),
                       passed=w["valid_ok"], failed=w["valid"] - w["valid_ok"], exceptions=w["exceptions"],
                       failures=w["validation_errors"][:30], mask_mismatches=r["n_mismatch"],
                       mismatch_examples=r["mismatches"])
        res.append(rec)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return {"instances": len(tests), "tokens": sum(len(t) for _, t in tests), "ttfm_repeats": repeats, "rows": res}


def print_json_object(s):
    print(f"### 1. json_object: any JSON object ({s['instances']:,} instances, {s['tokens']:,} tokens)")
    print()
    print(f"TTFM = cold compile (compile cache cleared) + first mask: median of {s['ttfm_repeats']} compiles, and the "
          "first of them; TBM = mask + bit check + advance per token; mask = fill_bitmask alone (µs).")
    print()
    print("| engine | TTFM µs | TTFM 1st | TBM p50 | p90 | p99 | max | mean | mask p50 | mask p99 | passed | failed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in s["rows"]:
        if "tbm_us" not in r:
            t = fmt(r["ttfm_us"]["median"]) if "ttfm_us" in r else "–"
            print(f"| {r['label']} | {t} | | {r['status']}: {r.get('error', '')[:80]} | | | | | | | | |")
            continue
        a, b = r["tbm_us"], r["mask_us"]
        print(f"| {r['label']} | {fmt(r['ttfm_us']['median'])} | {fmt(r['ttfm_us']['runs'][0])} "
              f"| {fmt(a['p50'], 1)} | {fmt(a['p90'], 1)} "
              f"| {fmt(a['p99'], 1)} | {fmt(a['max'], 1)} | {fmt(a['avg'], 1)} | {fmt(b['p50'], 1)} "
              f"| {fmt(b['p99'], 1)} | {r['passed']:,} | {r['failed']:,} |")
    for r in s["rows"]:
        if r.get("truncated"):
            print(f"\n- {r['label']}: {r['truncated']}")
        if r.get("failures") or r.get("mask_mismatches"):
            print(f"\n- {r['label']}: {r.get('failed', 0)} failed, {r.get('mask_mismatches', 0)} mask/matcher mismatches")
            for f in r.get("failures", [])[:5]:
                print(f"  - test {f['test']}: at token {f['at_token']}/{f['of']} ({f['reason']}): "
                      f"...{f.get('before', '')!r} + {f.get('token', '')!r}")


# ---------------------------------------------------------------- section 2: recursive


def find_recursive(files, limit, per_schema_s=20.0):
    """Schemas whose structgen IR has rules other than "any JSON value" (as /tmp/probe/rec.py).
    schema_to_ir runs in this process under signal.alarm."""
    from structgen.grammar import ir
    from structgen.automata.languages import AUTOMATA
    from structgen.grammar.json_schema import schema_to_ir

    class _Timeout(Exception):
        pass

    def _alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, _alarm)
    found, errors = [], {}
    try:
        for p in files:
            d = json.loads(p.read_text())
            signal.setitimer(signal.ITIMER_REAL, per_schema_s)
            try:
                node = schema_to_ir(d["schema"], languages=AUTOMATA)
                names = {r.name for r in ir.refs_in(node)} - {ANY_JSON_VALUE}
            except _Timeout:
                errors[p.name] = f"schema_to_ir exceeded {per_schema_s:g} s"
                continue
            except Exception as e:  # noqa: BLE001 - record any failure and go on
                errors[p.name] = f"{type(e).__name__}: {e}"[:200]
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if names:
                found.append((p, d, sorted(names)))
                if limit and len(found) >= limit:
                    break
    finally:
        signal.signal(signal.SIGALRM, old)
    return found, errors


def section_recursive(h: Harness, files, limit, no_progress):
    t0 = time.monotonic()
    found, ir_errors = find_recursive(files, limit)
    scan_s = time.monotonic() - t0
    schemas = []
    for p, d, names in found:
        texts, tests = [], []
        for t in d.get("tests", []):
            text = json.dumps(t["data"])
            texts.append(text)
            tests.append((bool(t["valid"]), h.encode(text)))
        schemas.append({"id": p.name, "schema": d["schema"], "tests": tests, "texts": texts, "rules": names})
    engines = [e for e in ("structgen", "llguidance", "xgrammar") if e in h.active]
    bar = progress(len(schemas) * len(engines), "recursive", no_progress)
    per_schema = [{"id": s["id"], "rules": s["rules"][:10], "n_valid": sum(v for v, _ in s["tests"]),
                   "n_invalid": sum(not v for v, _ in s["tests"]), "engines": {}} for s in schemas]
    samples = {e: {} for e in engines}
    fills = {e: {} for e in engines}
    ttfm = {e: {} for e in engines}
    for e in engines:  # one engine at a time
        for si, s in enumerate(schemas):
            if bar is not None:
                bar.set_postfix_str(f"{e} {s['id'][:28]}", refresh=False)
            r = h.run(e, {"kind": "json_schema", "schema": s["schema"]}, s["tests"], 1)
            rec = {"status": r["status"], "task_s": round(r["task_s"], 2)}
            for k in ("error", "error_type", "truncated"):
                if k in r:
                    rec[k] = r[k]
            if "ttfm_us" in r:
                rec["ttfm_us"] = round(r["ttfm_us"][0], 1)
                rec["compile_us"] = round(r["compile_us"][0], 1)
                ttfm[e][si] = r["ttfm_us"][0]
            if "outcomes" in r:
                w = summarize_walk(h.tok, s["tests"], r, s["texts"])
                samples[e][si] = r["samples_us"]
                fills[e][si] = r["fill_us"]
                rec.update(tokens=len(r["samples_us"]),
                           tbm_avg_us=round(float(r["samples_us"].mean()), 2) if len(r["samples_us"]) else None,
                           tbm_max_us=round(float(r["samples_us"].max()), 1) if len(r["samples_us"]) else None,
                           valid_ok=w["valid_ok"], invalid_ok=w["invalid_ok"],
                           validation_errors=w["validation_errors"], invalidation_errors=w["invalidation_errors"],
                           exceptions=w["exceptions"], mask_mismatches=r["n_mismatch"],
                           mismatch_examples=r["mismatches"])
                rec["passing"] = not w["validation_errors"] and not w["invalidation_errors"]
            per_schema[si]["engines"][e] = rec
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    summary = {}
    for e in engines:
        recs = [ps["engines"][e] for ps in per_schema if e in ps["engines"]]
        walked = [r for r in recs if "valid_ok" in r]
        allsamp = np.concatenate(list(samples[e].values())) if samples[e] else np.zeros(0)
        allfill = np.concatenate(list(fills[e].values())) if fills[e] else np.zeros(0)
        summary[e] = {
            "schemas": len(recs),
            "compiled": sum(1 for r in recs if r["status"] in ("ok", "test_timeout", "test_crash")),
            "compile_errors": sum(1 for r in recs if r["status"] in ("compile_error", "compile_crash", "init_error")),
            "timeouts": sum(1 for r in recs if r["status"] in ("timeout", "test_timeout")),
            "passing_schemas": sum(1 for r in walked if r["passing"]),
            "instances": sum(r["valid_ok"] + r["invalid_ok"] + len(r["validation_errors"]) +
                             len(r["invalidation_errors"]) for r in walked),
            "instances_passed": sum(r["valid_ok"] + r["invalid_ok"] for r in walked),
            "validation_errors": sum(len(r["validation_errors"]) for r in walked),
            "invalidation_errors": sum(len(r["invalidation_errors"]) for r in walked),
            "exceptions": sum(r["exceptions"] for r in walked),
            "mask_mismatches": sum(r["mask_mismatches"] for r in walked),
            "compile_error_examples": [(ps["id"], ps["engines"][e].get("error", "")[:200]) for ps in per_schema
                                       if ps["engines"].get(e, {}).get("status") in
                                       ("compile_error", "compile_crash", "timeout", "init_error")][:60],
            "ttfm_us": stats(list(ttfm[e].values()), TTFM_Q),
            "tbm_us": tstats(allsamp),
            "mask_us": tstats(allfill),
        }
    common = [si for si in range(len(schemas)) if all(si in samples[e] for e in engines)]
    cmp = {"schemas": len(common), "engines": {}}
    for e in engines:
        sm = np.concatenate([samples[e][si] for si in common]) if common else np.zeros(0)
        cmp["engines"][e] = {"ttfm_us": stats([ttfm[e][si] for si in common], TTFM_Q), "tbm_us": tstats(sm)}
    return {"schemas_found": len(schemas), "scan_s": round(scan_s, 1), "limit": limit,
            "schema_to_ir_errors": len(ir_errors), "schema_to_ir_error_examples": dict(list(ir_errors.items())[:20]),
            "instances": sum(len(s["tests"]) for s in schemas),
            "tokens": sum(len(t) for s in schemas for _, t in s["tests"]),
            "engines": summary, "common_subset": cmp, "schemas": per_schema}


def print_recursive(s):
    print(f"### 2. recursive: {s['schemas_found']} MaskBench-dev schemas that structgen compiles to recursive rules "
          f"({s['instances']} instances, {s['tokens']:,} tokens)")
    print()
    print("TTFM over schemas (one cold compile + first mask each), TBM over all tokens, µs; "
          "instances = valid accepted + invalid rejected.")
    print()
    print("| engine | compiled | compile errors | timeouts | TTFM p50 | p90 | max | TBM p50 | p99 | mask p50 | mask p99 "
          "| passing schemas | instances passed | validation errors | invalidation errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for e, r in s["engines"].items():
        a, b, c = r["ttfm_us"], r["tbm_us"], r["mask_us"]
        print(f"| {e} | {r['compiled']}/{r['schemas']} | {r['compile_errors']} | {r['timeouts']} | {fmt(a['p50'])} "
              f"| {fmt(a['p90'])} | {fmt(a['max'])} | {fmt(b['p50'], 1)} | {fmt(b['p99'], 1)} | {fmt(c['p50'], 1)} "
              f"| {fmt(c['p99'], 1)} | {r['passing_schemas']} | {r['instances_passed']}/{r['instances']} "
              f"| {r['validation_errors']} | {r['invalidation_errors']} |")
    c = s["common_subset"]
    if len(c["engines"]) > 1:
        print()
        print(f"Like for like, the {c['schemas']} schemas every engine compiled and walked (µs):")
        print()
        print("| engine | TTFM p50 | p90 | max | TBM p50 | p90 | p99 | max |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for e, r in c["engines"].items():
            a, b = r["ttfm_us"], r["tbm_us"]
            print(f"| {e} | {fmt(a['p50'])} | {fmt(a['p90'])} | {fmt(a['max'])} | {fmt(b['p50'], 1)} "
                  f"| {fmt(b['p90'], 1)} | {fmt(b['p99'], 1)} | {fmt(b['max'], 1)} |")
    for e, r in s["engines"].items():
        lines = []
        for ps in s["schemas"]:
            rec = ps["engines"].get(e)
            if not rec:
                continue
            for ie in rec.get("invalidation_errors", []):
                lines.append(f"  - INVALIDATION {ps['id']} test {ie['test']}: {ie.get('text', '')[:150]!r}")
            for ve in rec.get("validation_errors", []):
                lines.append(f"  - validation {ps['id']} test {ve['test']}: token {ve['at_token']}/{ve['of']} "
                             f"({ve['reason']}) ...{ve.get('before', '')!r} + {ve.get('token', '')!r}")
            if rec.get("mask_mismatches"):
                lines.append(f"  - MASK MISMATCH {ps['id']}: {rec['mismatch_examples'][:3]}")
            if rec.get("truncated"):
                lines.append(f"  - {ps['id']}: {rec['truncated']}")
            if rec["status"] not in ("ok",):
                lines.append(f"  - {rec['status']} {ps['id']}: {rec.get('error', '')[:160]}")
        if lines:
            print(f"\n- {e}:")
            print("\n".join(lines[:60]) + (f"\n  - ... {len(lines) - 60} more (see the JSON)" if len(lines) > 60 else ""))


# ---------------------------------------------------------------- section 3: grammars


def _arith_expr(rng, depth=0):
    def num():
        return str(rng.randint(0, 999)) if rng.random() < 0.75 else f"{rng.randint(0, 99)}.{rng.randint(0, 99):d}"

    if depth > 2 or rng.random() < 0.3:
        x = num()
        return ("-" + x) if rng.random() < 0.1 else x
    a, b = _arith_expr(rng, depth + 1), _arith_expr(rng, depth + 1)
    op = rng.choice("+-*/")
    sp = rng.choice([" ", " ", ""])
    e = f"{a}{sp}{op}{sp}{b}"
    return f"({e})" if rng.random() < 0.3 else e


SQL_POOL = [
    "SELECT * FROM users",
    "SELECT id, name, email FROM users WHERE active = TRUE;",
    "SELECT name FROM employees WHERE salary > 50000 ORDER BY salary DESC LIMIT 10",
    "SELECT DISTINCT country FROM customers ORDER BY country",
    "SELECT COUNT(*) FROM orders WHERE status = 'shipped'",
    "SELECT department, AVG(salary) AS avg_salary FROM employees GROUP BY department HAVING AVG(salary) > 60000",
    "SELECT u.name, o.total FROM users u JOIN orders o ON u.id = o.user_id WHERE o.total >= 100.50",
    ("SELECT c.name, COUNT(o.id) AS n FROM customers AS c LEFT JOIN orders AS o ON o.customer_id = c.id "
    "GROUP BY c.name ORDER BY n DESC"),
    "SELECT p.title, a.name FROM posts p INNER JOIN authors a ON p.author_id = a.id WHERE p.published IS NOT NULL",
    "SELECT * FROM products WHERE price BETWEEN 10 AND 20 AND category IN ('books', 'music')",
    "SELECT name FROM users WHERE email LIKE '%@example.com' OR name LIKE 'A%'",
    "SELECT id FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE country = 'FR')",
    "SELECT LOWER(name) AS lname, COALESCE(nickname, name) FROM people",
    "select id, created_at from events where type != 'click' order by created_at asc limit 50 offset 100",
    "SELECT COUNT(DISTINCT user_id) FROM sessions WHERE duration > 30",
    "SELECT t.* FROM transactions t WHERE t.amount < 0",
    "SELECT year, SUM(revenue) - SUM(cost) AS profit FROM finance.yearly GROUP BY year ORDER BY year",
    "SELECT \"first name\", `last name` FROM contacts",
    "SELECT name FROM users WHERE NOT (age < 18 OR banned = TRUE)",
    "SELECT id, price * quantity AS total FROM order_items WHERE order_id = 42;",
    "SELECT MAX(score), MIN(score) FROM results WHERE game_id = 7 AND deleted_at IS NULL",
    "SELECT e.name, d.name FROM employees e RIGHT OUTER JOIN departments d ON e.dept_id = d.id",
    "SELECT name\nFROM users\nWHERE id = 1\n",
    "SELECT a.id FROM a FULL OUTER JOIN b ON a.id = b.id WHERE b.id IS NULL",
    "SELECT title FROM books WHERE author NOT IN ('Smith', 'O''Brien') ORDER BY title",
    "SELECT city, COUNT(*) AS n FROM stores GROUP BY city HAVING COUNT(*) >= 3 ORDER BY n DESC, city ASC",
    "SELECT id FROM logs WHERE level = 'ERROR' AND (service = 'api' OR service = 'web') LIMIT 5",
    "SELECT -balance AS debt FROM accounts WHERE balance < 0",
    "SELECT ROUND(AVG(rating), 2) FROM reviews WHERE product_id = 3",
    "SELECT id FROM tasks WHERE due_date NOT BETWEEN '2024-01-01' AND '2024-12-31'",
    # invalid
    "SELECT FROM users",
    "SELECT name FROM",
    "SELECT name FROM users WHERE",
    "SELECT nameFROM users",
    "SELECT * FROM users LIMIT ten",
    "SELECT * FROM users ORDER name",
    "SELECT id, FROM users",
    "SELECT * FROM users WHERE id = 1;;",
    "SELECT * FROM t UNION SELECT * FROM u",
    "WITH x AS (SELECT 1 FROM t) SELECT * FROM x",
    "SELECT name FROM users WHERE name = \"bob' ",
]

JSON_EXTRA = ['[1, 2, 3]', '"hello"', '-0.5e10', 'true', 'null', '[]', '{}', ' {"a": 1} \n',
              '[{"id": 1, "tags": ["x", "y"]}, {"id": 2, "tags": []}]', '{"nested": {"deep": {"deeper": [null, false]}}}',
              '{"a": 1,}', "{'a': 1}", '[1, 2', '{"a": 01}', 'NaN', '{"a": "line\nbreak"}', '{"a" 1}', '[1 2]',
              '{"a": tru}', '{"a": 1}}', '{"x": "\\q"}', '// comment\n{}']

ARITH_EXTRA = ["2 - -3", "(1 + 2) * 3.5", "42", "--1", "10 / 4 / 2", "((7))", "3.14159 * 2 * 10",
               ".5", "5.", "1e3", "+1", "2(3)", "2 ^ 3", "1 +", "(1 + 2", "3 ** 2", "1 + 2)", "", "4 /", "a + 1"]


def _csv_pool(rng):
    names = ["Alice", "Bob", "Chloé", "Dmitri", "Eve", "Frank O'Hara", "Smith, John", 'say "hi"']
    out = []
    for k in range(26):
        ncol = rng.randint(2, 5)
        header = ",".join(["id", "name", "email", "age", "city"][:ncol])
        rows = []
        for i in range(rng.randint(1, 6)):
            vals = [str(i + 1)]
            for c in range(1, ncol):
                v = rng.choice(names) if c == 1 else rng.choice(["x@example.com", str(rng.randint(18, 90)), "Paris", ""])
                if any(ch in v for ch in ',"') or (rng.random() < 0.15 and v):
                    v = '"' + v.replace('"', '""') + '"'
                vals.append(v)
            rows.append(",".join(vals))
        eol = "\r\n" if k % 5 == 4 else "\n"
        text = eol.join([header] + rows) + (eol if k % 3 else "")
        out.append(text)
    out += ["a,b\n1,2\n", "a\n1\n", 'name,quote\nx,"unterminated\n', 'a,b\n"x"y,2\n', "a,b\n1,2\n\n\n"]
    return out


TOOL_CALL_POOL = [
    'get_weather(city="Paris", unit="celsius")',
    'get_weather(city="San Francisco, CA")',
    'search(query="best pizza near me", max_results=5)',
    '[get_weather(city="Paris"), get_time(timezone="Europe/Paris")]',
    'send_email(to="alice@example.com", subject="Meeting", body="See you at 3pm.\\nThanks!")',
    'calendar.create_event(title="Standup", start="2024-05-01T09:00:00Z", duration_min=15, attendees=[])',
    'get_stock_price(symbol="AAPL")',
    'book_flight(origin="JFK", destination="LHR", date="2024-07-14", passengers=2, class="economy")',
    'set_thermostat(temperature=21.5, mode="heat")',
    'lookup_order(order_id=123456)',
    'translate(text="Good morning", source="en", target="fr")',
    '[search(query="weather Tokyo"), search(query="weather Osaka")]',
    'update_user(id=7, fields={"email": "new@example.com", "newsletter": false})',
    'list_files()',
    'run_sql(query="SELECT count(*) FROM users", timeout=null)',
    'math.evaluate(expression="2 + 2 * 3")',
    'create_ticket(title="Login fails", priority="high", tags=["auth", "bug"], assignee=null)',
    'get_directions(from_location={"lat": 48.8566, "lon": 2.3522}, to_location={"lat": 51.5074, "lon": -0.1278})',
    '[\n  get_weather(city="Rome"),\n  get_weather(city="Milan")\n]',
    'play_music(artist="Miles Davis", shuffle=true)',
    # other tool-call styles (not this grammar's language, unless it is JSON-based)
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    '{"name": "search", "arguments": {"query": "structured generation", "max_results": 5}}',
    '{"name": "send_email", "arguments": {"to": ["a@example.com"], "subject": "Hi", "body": "See you at 5."}}',
    '{"name": "get_time", "arguments": {}}',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>',
    '<tool_call>{"name": "lookup", "arguments": {"id": 42}}</tool_call>',
    '[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": true}}]',
    'get_weather(city="Paris", unit="celsius")',
    'search(query="llm grammars", max_results=3)',
    '{"tool": "calculator", "input": "2 + 2"}',
    '{"name": "create_event", "arguments": {"title": "Standup", "start": "2024-05-01T09:00:00Z", "duration_min": 15}}',
    '{"name": "get_weather", "parameters": {"city": "Berlin"}}',
    # likely invalid
    '{"name": "get_weather", "arguments": {"city": "Paris"}',
    '{"arguments": {"city": "Paris"}}',
    'get_weather(',
    '<tool_call>{"name": "x"}',
]


def _regex_sample(rng, pattern, flags=()):
    """A random string matching a Python regex (the subset lark terminals use)."""
    import re._parser as sp  # Python >= 3.11
    from re import _constants as C

    printable = [chr(c) for c in range(32, 127)] + ["é", "\n"]

    def in_class(items, ch):
        neg = False
        hit = False
        for op, av in items:
            if op is C.NEGATE:
                neg = True
            elif op is C.LITERAL:
                hit |= ord(ch) == av
            elif op is C.RANGE:
                hit |= av[0] <= ord(ch) <= av[1]
            elif op is C.CATEGORY:
                name = str(av)
                base = {"DIGIT": ch.isdigit(), "SPACE": ch.isspace(), "WORD": ch.isalnum() or ch == "_"}
                for k, v in base.items():
                    if k in name:
                        hit |= (not v) if "NOT" in name else v
        return hit != neg

    def gen(seq):
        out = []
        for op, av in seq:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.NOT_LITERAL:
                out.append(rng.choice([c for c in printable if ord(c) != av and c != "\n"]))
            elif op is C.ANY:
                out.append(rng.choice(printable[:-1]))
            elif op is C.IN:
                cands = [c for c in printable if in_class(av, c)]
                nice = [c for c in cands if c.isalnum() or c in " _-.,"] or cands
                out.append(rng.choice(nice) if nice else "")
            elif op is C.BRANCH:
                out.append(gen(rng.choice(av[1])))
            elif op is C.SUBPATTERN:
                out.append(gen(av[-1]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                lo, hi, item = av
                hi = lo + 4 if hi is C.MAXREPEAT else min(hi, lo + 4)
                out.append("".join(gen(item) for _ in range(rng.randint(lo, hi))))
            elif op is C.AT:
                pass
            else:
                raise ValueError(f"regex op {op} not supported by the sampler")
        return "".join(out)

    return gen(sp.parse(pattern))


def random_sentences(lark_text, n, rng, parser, max_depth=8, tries=400):
    """Random sentences of a lark grammar, kept when lark parses them (fallback pool)."""
    from lark import Lark

    g = Lark(lark_text, parser="earley")
    terms = {t.name: t for t in g.terminals}
    rules: dict[str, list] = {}
    for r in g.rules:
        rules.setdefault(r.origin.name, []).append(r.expansion)
    height = {k: 10 ** 9 for k in rules}
    changed = True
    while changed:
        changed = False
        for k, exps in rules.items():
            best = min(1 + max([height.get(s.name, 0) if not s.is_term else 0 for s in e] or [0]) for e in exps)
            if best < height[k]:
                height[k], changed = best, True
    ignore = bool(g.ignore_tokens)

    def expand(sym, depth, out):
        if sym.is_term:
            t = terms[sym.name]
            out.append(t.pattern.value if t.pattern.type == "str" else _regex_sample(rng, t.pattern.value))
            return
        exps = rules[sym.name]
        if depth >= max_depth:
            exps = [min(exps, key=lambda e: max([height.get(s.name, 0) if not s.is_term else 0 for s in e] or [0]))]
        for s in rng.choice(exps):
            expand(s, depth + 1, out)

    from lark.grammar import NonTerminal

    start = g.options.start[0] if isinstance(g.options.start, list) else g.options.start
    out, seen = [], set()
    for _ in range(tries):
        if len(out) >= n:
            break
        parts: list[str] = []
        try:
            expand(NonTerminal(start), 0, parts)
        except (RecursionError, ValueError):
            continue
        text = ""
        for p in parts:
            if text and p and ignore and (text[-1].isalnum() and p[0].isalnum() or rng.random() < 0.3):
                text += " "
            text += p
        if text in seen or len(text) > 400:
            continue
        seen.add(text)
        if lark_accepts(parser, text):
            out.append(text)
    return out


def lark_accepts(parser, text):
    try:
        parser.parse(text)
        return True
    except Exception:  # noqa: BLE001 - record any failure and go on
        return False


def test_grammars_samples(stem):
    """tests/test_grammars.py's SAMPLES[stem] ("valid" and "near_misses" lists) when it has
    them; else strings from its module-level lists/dicts whose name mentions the grammar."""
    path = REPO / "tests" / "test_grammars.py"
    if not path.exists():
        return [], None
    try:
        spec = importlib.util.spec_from_file_location("_cfgbench_test_grammars", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - record any failure and go on
        return [], f"tests/test_grammars.py not importable: {type(e).__name__}: {e}"[:200]
    samples = getattr(mod, "SAMPLES", None)
    if isinstance(samples, dict) and isinstance(samples.get(stem), dict):
        out = [t for k in ("valid", "near_misses") for t in samples[stem].get(k, []) if isinstance(t, str)]
        return list(dict.fromkeys(out)), None
    keys = {stem.lower(), stem.lower().split("_")[0]}
    out = []

    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, (list, tuple, set, frozenset)):
            for x in v:
                yield from strings(x)
        elif isinstance(v, dict):
            for x in v.values():
                yield from strings(x)

    for name, val in vars(mod).items():
        if name.startswith("__"):
            continue
        if isinstance(val, dict):
            for k, v in val.items():
                if isinstance(k, str) and any(x == k.lower() or x in k.lower() for x in keys):
                    out.extend(strings(v))
        if isinstance(val, (list, tuple, dict)) and any(x in name.lower() for x in keys):
            out.extend(strings(val))
    return list(dict.fromkeys(out)), None


def build_sentences(stem, lark_text, json_texts, limit, seed=0):
    """(sentences [(text, lark_valid)], notes)."""
    from lark import Lark

    rng = random.Random(f"{seed}-{stem}")
    parser = Lark(lark_text, parser="earley", lexer="dynamic_complete")  # as tests/test_grammars.py
    notes = []
    pool, note = test_grammars_samples(stem)
    src = {}
    if note:
        notes.append(note)
    for t in pool:
        src.setdefault(t, "tests/test_grammars.py")
    own = []
    if stem == "json":
        js = list(json_texts)
        rng.shuffle(js)
        own = js[:60] + [json.dumps(json.loads(t), indent=2) for t in js[60:75]] + JSON_EXTRA
    elif stem == "arithmetic":
        own = [_arith_expr(rng) for _ in range(45)] + ARITH_EXTRA
    elif stem.startswith("sql"):
        own = SQL_POOL
    elif stem == "csv":
        own = _csv_pool(rng)
    elif "tool" in stem:
        own = TOOL_CALL_POOL
    for t in own:
        src.setdefault(t, "built-in pool")
    labelled = [(t, lark_accepts(parser, t)) for t in src]
    valid = [t for t, ok in labelled if ok]
    n_tests = sum(1 for v in src.values() if v == "tests/test_grammars.py")
    if n_tests:
        notes.append(f"{n_tests} samples from tests/test_grammars.py")
    if len(valid) < 20:
        extra = random_sentences(lark_text, 30 - len(valid), rng, parser)
        notes.append(f"{len(valid)} valid samples in the pools; added {len(extra)} random sentences generated "
                     "from the grammar")
        for t in extra:
            if t not in src:
                src[t] = "random from grammar"
                labelled.append((t, True))
                valid.append(t)
    # corrupted variants: truncation and one-character edits (lark labels them)
    invalid = [t for t, ok in labelled if not ok]
    mutants = []
    for t in valid:
        if len(t) >= 2:
            mutants.append(t[: rng.randint(1, len(t) - 1)])
            i = rng.randrange(len(t))
            mutants.append(t[:i] + t[i + 1:] if rng.random() < 0.5 else t[:i] + rng.choice('{}()[],;:"\'+*x ') + t[i:])
    rng.shuffle(mutants)
    for t in mutants:
        if len(invalid) >= max(len(valid), 10) or t in src:
            continue
        ok = lark_accepts(parser, t)
        src[t] = "mutant"
        labelled.append((t, ok))
        if not ok:
            invalid.append(t)
    labelled = list(dict.fromkeys(labelled))
    if limit:
        v = [x for x in labelled if x[1]][:limit]
        iv = [x for x in labelled if not x[1]][:limit]
        labelled = v + iv
    return [(t, ok, src[t]) for t, ok in labelled], notes


def _grammar_record(h, r, tests, texts) -> dict:
    """The result record of one engine on one grammar: status, TTFM, TBM and verdicts."""
    rec = {"status": r["status"], "task_s": round(r["task_s"], 2)}
    for k in ("error", "truncated"):
        if k in r:
            rec[k] = r[k]
    if "ttfm_us" in r:
        rec["ttfm_us"] = {"runs": [round(x, 1) for x in r["ttfm_us"]], "median": float(np.median(r["ttfm_us"])),
                          "compile_median": float(np.median(r["compile_us"]))}
    if "outcomes" in r:
        w = summarize_walk(h.tok, tests, r, texts)
        rec.update(tbm_us=tstats(r["samples_us"]), mask_us=tstats(r["fill_us"]),
                   valid_ok=w["valid_ok"], valid=w["valid"], invalid_ok=w["invalid_ok"], invalid=w["invalid"],
                   exceptions=w["exceptions"], mask_mismatches=r["n_mismatch"],
                   mismatch_examples=r["mismatches"], verdicts=[o["accepted"] for o in r["outcomes"]],
                   validation_errors=w["validation_errors"], invalidation_errors=w["invalidation_errors"])
    return rec


def section_grammars(h: Harness, json_texts, limit, repeats, no_progress):
    files = sorted(glob.glob(str(REPO / "grammars" / "*.lark")))
    grammars = []
    for f in files:
        stem = Path(f).stem
        text = Path(f).read_text()
        twin = Path(f).with_suffix(".gbnf")
        gbnf = twin.read_text() if twin.exists() else None
        try:
            sents, notes = build_sentences(stem, text, json_texts, limit)
        except Exception as e:  # noqa: BLE001 - record any failure and go on
            sents, notes = [], [f"no sentences: lark could not load the grammar: {type(e).__name__}: {e}"[:300]]
        grammars.append({"name": stem, "lark": text, "gbnf": gbnf, "sentences": sents, "notes": notes})
    rows = [("structgen", "structgen (lark)", "lark"), ("structgen", "structgen (gbnf)", "gbnf"),
            ("llguidance", "llguidance (lark)", "lark"), ("xgrammar", "xgrammar (gbnf)", "gbnf")]
    rows = [r for r in rows if r[0] in h.active]
    tasks = [(ri, gi) for ri in range(len(rows)) for gi in range(len(grammars))]
    bar = progress(len(tasks), "grammars", no_progress)
    results = {g["name"]: {"sentences": len(g["sentences"]), "lark_valid": sum(ok for _, ok, _ in g["sentences"]),
                           "has_gbnf": g["gbnf"] is not None, "notes": g["notes"], "engines": {},
                           "sentence_list": [{"text": t, "lark_valid": ok, "source": s} for t, ok, s in g["sentences"]]}
               for g in grammars}
    for ri, gi in tasks:  # one engine (row) at a time
        engine, label, syntax = rows[ri]
        g = grammars[gi]
        if bar is not None:
            bar.set_postfix_str(f"{label} {g['name']}", refresh=False)
        text = g[syntax]
        if text is None:
            results[g["name"]]["engines"][label] = {"status": "skipped", "error": f"no {g['name']}.gbnf twin"}
        elif not g["sentences"]:
            results[g["name"]]["engines"][label] = {"status": "skipped", "error": "no sentences"}
        else:
            texts = [t for t, _, _ in g["sentences"]]
            tests = [(ok, h.encode(t)) for t, ok, _ in g["sentences"]]
            r = h.run(engine, {"kind": syntax, "text": text}, tests, repeats)
            rec = _grammar_record(h, r, tests, texts)
            results[g["name"]]["engines"][label] = rec
            if engine == "structgen" and "GrammarTooLargeError" in r.get("error", ""):
                # the default budget refused it: measure it anyway with a raised max_states
                r = h.run(engine, {"kind": syntax, "text": text, "max_states": 10 ** 12}, tests, repeats)
                rec2 = {**_grammar_record(h, r, tests, texts), "max_states": 10 ** 12}
                results[g["name"]]["engines"][label.replace(")", ", max_states=1e12)")] = rec2
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    for gr in results.values():
        verd = [r["verdicts"] for r in gr["engines"].values() if "verdicts" in r]
        n = min((len(v) for v in verd), default=0)
        gr["all_engines_agree"] = sum(1 for i in range(n) if len({v[i] for v in verd}) == 1) if verd else None
        gr["sentences_walked_by_all"] = n
        gr["engines_walked"] = len(verd)
    return {"grammars": results, "ttfm_repeats": repeats, "limit": limit}


def print_grammars(s):
    print("### 3. grammars: grammars/*.lark (and .gbnf twins)")
    print()
    print(f"TTFM = cold compile + first mask, median of {s['ttfm_repeats']} compiles and the first of them (µs); TBM "
          "over every token of every sentence (µs); verdicts compared with lark's Earley parser "
          "(lexer='dynamic_complete', as tests/test_grammars.py): valid sentences accepted, invalid rejected.")
    print()
    print("| grammar | engine | TTFM | TTFM 1st | TBM p50 | p90 | p99 | max | mask p50 | valid accepted "
          "| invalid rejected | disagree with lark |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, g in s["grammars"].items():
        for label, r in g["engines"].items():
            if "tbm_us" not in r:
                t = fmt(r["ttfm_us"]["median"]) if "ttfm_us" in r else "–"
                print(f"| {name} | {label} | {t} | | {r['status']}: {r.get('error', '')[:90].replace('|', '/')} "
                      f"| | | | | | | |")
                continue
            a, b = r["tbm_us"], r["mask_us"]
            dis = (r["valid"] - r["valid_ok"]) + (r["invalid"] - r["invalid_ok"])
            print(f"| {name} | {label} | {fmt(r['ttfm_us']['median'])} | {fmt(r['ttfm_us']['runs'][0])} "
                  f"| {fmt(a['p50'], 1)} | {fmt(a['p90'], 1)} "
                  f"| {fmt(a['p99'], 1)} | {fmt(a['max'], 1)} | {fmt(b['p50'], 1)} | {r['valid_ok']}/{r['valid']} "
                  f"| {r['invalid_ok']}/{r['invalid']} | {dis} |")
    print()
    for name, g in s["grammars"].items():
        agree = (f"; the {g['engines_walked']} engines that walked it agree with each other on "
                 f"{g['all_engines_agree']}/{g['sentences_walked_by_all']}" if g["all_engines_agree"] is not None else "")
        print(f"- {name}: {g['sentences']} sentences ({g['lark_valid']} valid per lark), gbnf twin: "
              f"{'yes' if g['has_gbnf'] else 'no'}{agree}" + ("; " + "; ".join(g["notes"]) if g["notes"] else ""))
        for label, r in g["engines"].items():
            if r.get("truncated"):
                print(f"  - {label}: {r['truncated']}")
            for ve in r.get("validation_errors", [])[:4]:
                print(f"  - {label}: valid rejected: {ve.get('text', '')[:90]!r} at token {ve['at_token']}/{ve['of']} "
                      f"({ve['reason']}; ...{ve.get('before', '')!r} + {ve.get('token', '')!r})")
            for ie in r.get("invalidation_errors", [])[:4]:
                print(f"  - {label}: INVALID ACCEPTED: {ie.get('text', '')[:120]!r}")
            if r.get("mask_mismatches"):
                print(f"  - {label}: {r['mask_mismatches']} MASK/MATCHER MISMATCHES {r['mismatch_examples'][:3]}")


# --------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated from: " + ", ".join(SECTIONS))
    ap.add_argument("--engines", default="structgen,llguidance,xgrammar")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "maskbench-dev"))
    ap.add_argument("--limit", type=int, default=0,
                    help="json_object: instances; recursive: schemas; grammars: valid and invalid sentences per "
                         "grammar (each); 0 = all")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: --limit 200 instances / 8 schemas / 15 sentences, 2 TTFM repeats")
    ap.add_argument("--ttfm-repeats", type=int, default=5,
                    help="cold compiles per grammar in json_object and grammars (the median is reported)")
    ap.add_argument("--timeout", type=float, default=10.0, help="compile timeout per grammar/schema and repeat (s)")
    ap.add_argument("--walk-budget", type=float, default=60.0,
                    help="per grammar/schema and engine: stop walking further instances after this many seconds "
                         "(the figures then cover the instances walked; reported as truncated)")
    ap.add_argument("--test-timeout", type=float, default=60.0,
                    help="hard walk timeout (worker killed) = walk budget + this + 200 µs per token")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0)
    ap.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "cfgbench.json"))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    for x in sections:
        if x not in SECTIONS:
            ap.error(f"unknown section {x!r}")
    repeats = args.ttfm_repeats
    lim = {"json_object": args.limit, "recursive": args.limit, "grammars": args.limit}
    if args.quick:
        repeats = min(repeats, 2)
        lim = {"json_object": args.limit or 200, "recursive": args.limit or 8, "grammars": args.limit or 15}

    t_wall = time.monotonic()
    src_hash_start = structgen_source_hash()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    skipped, active = {}, []
    for e in engines:
        if e not in CFG_ENGINES:
            ap.error(f"unknown engine {e!r}")
        ok, note = CFG_ENGINES[e].available()
        (active.append(e) if ok else skipped.__setitem__(e, note))
    tokenizer, tok_source = load_tokenizer()
    states = {}
    for e in list(active):
        try:
            states[e] = CFG_ENGINES[e].prepare(tokenizer)
            probe = getattr(CFG_ENGINES[e], "probe", None)
            ok, note = probe(states[e]) if probe is not None else (True, "")
        except Exception as ex:  # noqa: BLE001 - record any failure and go on
            ok, note = False, f"setup failed: {type(ex).__name__}: {ex}"[:500]
        if not ok:
            active.remove(e)
            skipped[e] = note
    for e, note in skipped.items():
        print(f"note: skipping {e}: {note}", file=sys.stderr)
    if not active:
        sys.exit("no engine available")
    if "structgen" in active and not hasattr(__import__("structgen"), "compile_grammar"):
        print("note: structgen has no compile_grammar: its grammars rows will be compile errors", file=sys.stderr)

    files = sorted(Path(args.data).glob("*.json"))
    load_start = os.getloadavg()
    h = Harness(args, tokenizer, active, states)
    report = {"sections": {}}
    section_s = {}
    try:
        json_texts = None
        if "json_object" in sections or "grammars" in sections:
            json_texts = []
            for p in files:
                for t in json.loads(p.read_text()).get("tests", []):
                    if t.get("valid") and isinstance(t.get("data"), dict):
                        json_texts.append(json.dumps(t["data"]))
        for sec in sections:
            t0 = time.monotonic()
            if sec == "json_object":
                report["sections"][sec] = section_json_object(h, files, lim[sec], repeats, args.no_progress)
            elif sec == "recursive":
                rng = random.Random(0)
                shuffled = list(files)
                rng.shuffle(shuffled)
                report["sections"][sec] = section_recursive(h, shuffled if lim[sec] else files, lim[sec],
                                                            args.no_progress)
            elif sec == "grammars":
                report["sections"][sec] = section_grammars(h, json_texts, lim[sec], repeats, args.no_progress)
            section_s[sec] = round(time.monotonic() - t0, 1)
    except KeyboardInterrupt:
        print("\ninterrupted: reporting what finished", file=sys.stderr)
    finally:
        h.close()
    wall_s = time.monotonic() - t_wall

    machine = cpu_info()
    machine["loadavg_1min_start_end"] = [round(load_start[0], 2), round(os.getloadavg()[0], 2)]
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("transformers", "tokenizers", "torch", "lark"):
        versions[dist] = _pkg_version(dist)
    for e in engines:
        versions[e] = CFG_ENGINES[e].version() if e not in skipped else None
    src_hash_end = structgen_source_hash()
    versions["structgen_sources_sha256"] = src_hash_start
    if src_hash_end != src_hash_start:
        versions["structgen_sources_changed_during_run"] = {"sha256_end": src_hash_end,
                                                            "structgen_worker_restarts": h.restarts("structgen")}
    report.update(machine=machine, versions=versions, wall_s=round(wall_s, 1), section_s=section_s)
    report["settings"] = {
        "data": args.data, "sections": sections, "limits": lim, "quick": args.quick, "ttfm_repeats": repeats,
        "timeout_s": args.timeout, "walk_budget_s": args.walk_budget,
        "test_timeout_s": f"walk budget + {args.test_timeout:g} s + 200 µs per token",
        "mem_limit_gb": args.mem_limit_gb, "tokenizer": f"SmolLM2-135M-Instruct ({tok_source})",
        "vocab_size": len(tokenizer), "serialization": "json.dumps(data) (', ' and ': ', ensure_ascii)",
        "engines": {e: CFG_ENGINES[e].settings() for e in active}, "skipped": skipped,
        "worker_processes_started": sum(w.starts for w in h.workers.values()), "worker_log": h.log_path,
        "order": "sections in turn; within a section one engine at a time; one worker process per engine",
    }
    out_path = Path(args.output)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o))
    print_report(report)
    print(f"\nresults: {out_path}   wall time: {wall_s:.0f} s "
          f"({', '.join(f'{k} {v:.0f} s' for k, v in section_s.items())})")


def print_report(rep):
    m, v, s = rep["machine"], rep["versions"], rep["settings"]
    print()
    print("## CFGBench")
    print()
    print(f"- machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gib']} GiB, "
          f"{m['platform']}, Python {m['python']}; load average {m['loadavg_1min_start_end'][0]} at start, "
          f"{m['loadavg_1min_start_end'][1]} at end")
    print("- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()
                                     if val and k != "structgen_sources_changed_during_run"))
    ch = v.get("structgen_sources_changed_during_run")
    if ch:
        print(f"- note: structgen's sources changed during the run ({ch['structgen_worker_restarts']} structgen "
              "worker restarts; a restarted worker imports the new code)")
    print(f"- tokenizer: {s['tokenizer']}, vocab {s['vocab_size']:,}; JSON instances: {s['serialization']}")
    print(f"- settings: sections {', '.join(s['sections'])}; limits {s['limits']}; TTFM repeats {s['ttfm_repeats']}; "
          f"compile timeout {s['timeout_s']:g} s per compile, walk budget {s['walk_budget_s']:g} s (then "
          f"stop, report what was walked), hard walk timeout {s['test_timeout_s']}; {s['order']}")
    for e, st in s["engines"].items():
        print(f"  - {e}: " + "; ".join(f"{k}: {val}" for k, val in st.items()))
    for e, note in s["skipped"].items():
        print(f"- skipped {e}: {note}")
    secs = rep["sections"]
    for name, fn in (("json_object", print_json_object), ("recursive", print_recursive),
                     ("grammars", print_grammars)):
        if name in secs:
            print()
            fn(secs[name])


if __name__ == "__main__":
    main()
