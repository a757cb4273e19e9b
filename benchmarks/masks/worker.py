"""Worker processes: each serves one engine, set up once (untimed), and runs one schema
per message (`worker_main`: compile and first mask, then the instances through
benchmarks/walk.py). `Worker`, in the parent, starts one, waits for its set-up, kills it
on a timeout and starts its replacement at once; `start_worker` is the start that
CFGBench's worker shares.

Owns the processes and their messages. Must not aggregate or print results.
"""

from __future__ import annotations

import gc
import os
import signal
import time
import traceback

import numpy as np

from benchmarks.masks.engines import ENGINES
from benchmarks.walk import first_mask, walk_instances


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


def worker_main(conn, engine: str, state, tok_dir: str, mem_limit_gb: float, log_path: str):
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

    process_main = staticmethod(worker_main)  # what the process runs (a subclass names its own)

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
            args = (child, self.engine, self.state, self.tok_dir, self.mem_limit_gb, self.log_path)
            self.proc = self.ctx.Process(target=self.process_main, args=args, daemon=True)
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
        return self.restarting(self._run, schema, tests, timeout, test_timeout)

    def restarting(self, run, *task):
        """`run(*task)`; the process is killed when the harness itself fails, and replaced at
        once when it was killed or crashed."""
        try:
            out = run(*task)
        except Exception:
            self.kill()
            raise
        if self.proc is None:  # killed or crashed: start the replacement now
            self.ensure()
        return out

    def _run(self, schema, tests, timeout, test_timeout):
        err = self._send(schema, tests)
        if err is not None:
            return err
        t_start = time.monotonic()
        msg = self._recv(timeout)
        failed = self._compile_failure(msg, timeout)
        if failed is not None:
            return failed
        _, ttfm_ns, compile_ns = msg
        out = {"status": "ok", "ttfm_us": ttfm_ns / 1e3, "compile_us": compile_ns / 1e3}
        remaining = max(test_timeout, timeout - (time.monotonic() - t_start))
        msg = self._recv(remaining)
        if self._walk_failed(msg, out, remaining):
            return out
        _, samples, outcomes, mismatches, n_mismatch, cpu_s = msg
        out["cpu_s"] = cpu_s
        out["samples_ns"] = np.frombuffer(samples, dtype=np.int64)
        out["outcomes"] = outcomes
        out["mismatches"] = mismatches
        out["n_mismatch"] = n_mismatch
        return out

    def _send(self, *task):
        """Send a task once the process is set up: None, or the init_error result."""
        self.ensure()
        err = self.wait_up()
        if err is None:
            self.conn.send(task)
        return err

    def _compile_failure(self, msg, timeout):
        """The result of a task whose compile timed out (`msg` None), crashed or failed; None
        when it compiled."""
        if msg is None:
            self.kill()
            return {"status": "timeout", "error": f"compile exceeded {timeout:g} s"}
        if msg[0] == "crash":
            return {"status": "compile_crash", "error": "engine crashed while compiling: " + msg[1]}
        if msg[0] == "compile_error":
            return {"status": "compile_error", "error": msg[1], "error_type": msg[2]}
        return None

    def _walk_failed(self, msg, out, timeout) -> bool:
        """Whether the walk of the instances timed out (`msg` None) or crashed; `out` then
        says which."""
        if msg is None:
            self.kill()
            out.update(status="test_timeout", error=f"instances exceeded {timeout:g} s")
            return True
        if msg[0] == "crash":
            out.update(status="test_crash", error="engine crashed on the instances: " + msg[1])
            return True
        return False
