"""CFGBench's worker process: MaskBench's (benchmarks/masks/worker.py: start, set-up
wait, kill on a timeout, restart) with repeated cold compiles, mask-only times and a walk
budget (`cfg_worker_main`, `CfgWorker`).

Owns the messages of a CFGBench task. Must not summarize results.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.cfg.adapters import CFG_ENGINES
from benchmarks.masks.worker import Worker, start_worker
from benchmarks.walk import first_mask, walk_instances


def cfg_worker_main(conn, engine, state, tok_dir, mem_limit_gb, log_path):
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
    """MaskBench's Worker (start, set-up wait, kill on timeout, restart) running
    cfg_worker_main: the message carries a spec, the instances, a repeat count and the
    walk budget."""

    process_main = staticmethod(cfg_worker_main)

    def run(self, spec, tests, repeats, timeout, walk_timeout, walk_budget):
        return self.restarting(self._run_cfg, spec, tests, repeats, timeout, walk_timeout, walk_budget)

    def _run_cfg(self, spec, tests, repeats, timeout, walk_timeout, walk_budget):
        err = self._send(spec, tests, repeats, walk_budget)
        if err is not None:
            return err
        ctimeout = timeout * max(1, repeats)
        msg = self._recv(ctimeout)
        failed = self._compile_failure(msg, timeout)
        if failed is not None:
            return failed
        _, ttfm_ns, compile_ns = msg
        out = {"status": "ok", "ttfm_us": [x / 1e3 for x in ttfm_ns], "compile_us": [x / 1e3 for x in compile_ns]}
        msg = self._recv(walk_timeout)
        if self._walk_failed(msg, out, walk_timeout):
            return out
        _, samples, fills, outcomes, mismatches, n_mismatch, cpu_s = msg
        out.update(samples_us=np.frombuffer(samples, dtype=np.int64) / 1e3,
                   fill_us=np.frombuffer(fills, dtype=np.int64) / 1e3,
                   outcomes=outcomes, mismatches=mismatches, n_mismatch=n_mismatch, cpu_s=cpu_s)
        if len(outcomes) < len(tests):
            out["truncated"] = f"walk budget ({walk_budget:g} s) spent after {len(outcomes)} of {len(tests)} instances"
        return out
