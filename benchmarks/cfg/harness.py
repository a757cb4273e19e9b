"""The harness of a CFGBench run (`Harness`): one worker per engine, set up and warmed up
(untimed) before any measurement, a task's timeouts from the options, and the tokenizer's
`encode`; and the progress bar of a section (`progress`).

Must not know the sections: each runs its tasks through `Harness.run`.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cfg.worker import CfgWorker


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
