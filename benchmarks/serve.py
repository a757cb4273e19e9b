#!/usr/bin/env python3
"""Load generator for a running structgen server (`structgen serve`): latency, throughput,
goodput and structured-output validity under concurrent streaming traffic.

Owns: the workload (chat prompts mixed with `response_format: json_schema` requests whose
schemas come from ../shared/data/maskbench-dev), the HTTP client (`httpx.AsyncClient`,
SSE parsed here), closed-loop concurrency levels and open-loop Poisson rates, the chaos
mode (clients that disconnect mid-stream, invalid schemas that must be refused with a
400), the overfill burst (more requests at once than the server admits: the excess must
be shed quickly with 429/503 and Retry-After, the admitted ones must complete), the
post-run checks (the server's /metrics back to idle: KV blocks, running and waiting at 0;
the server's resident memory flat from the first level to the last), and the report (markdown on stdout, JSON in benchmarks/results/serve.json).

Without --url it starts `structgen serve` on a free port itself and stops it at the end.

    python benchmarks/serve.py --quick                    # levels 1,4, a few requests each
    python benchmarks/serve.py --quick --chaos            # + disconnects and invalid schemas
    python benchmarks/serve.py --quick --overfill 48      # + a burst of 48 against a small queue
    python benchmarks/serve.py --concurrency 1,4,16,64 --duration 60 --rates 0.5,1
    python benchmarks/serve.py --url http://127.0.0.1:8000 --requests 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
from tqdm import tqdm

from structgen import validation

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "maskbench-dev"
RESULTS = ROOT / "benchmarks" / "results" / "serve.json"
INVALID_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}}
CHAT_PROMPTS = [
    "Write a haiku about the sea.", "Explain what a hash table is in two sentences.",
    "Give three tips for learning a new language.", "What is the capital of France, and why is it famous?",
    "Summarize the plot of Romeo and Juliet.", "Describe a sunrise to someone who has never seen one.",
    "List some healthy breakfast ideas.", "How does a bicycle stay upright?",
    "Write a short thank-you note to a colleague.", "What are the benefits of regular exercise?",
]
SHOW_PROBLEMS = 5  # problems printed per kind; all are in the JSON


# -- workload ----------------------------------------------------------------------------


def load_schemas(count: int, max_chars: int, seed: int) -> list[dict]:
    """A seeded sample of `count` maskbench-dev schemas no longer than `max_chars` as JSON
    (small schemas give the model a chance to finish within max_tokens)."""
    entries = []
    for path in sorted(DATA.glob("*.json")):
        schema = json.loads(path.read_text())["schema"]
        if len(json.dumps(schema)) <= max_chars:
            entries.append({"name": path.stem, "schema": schema})
    random.Random(seed).shuffle(entries)
    return entries[:count]


@dataclass
class Job:
    """One request to send: `kind` is chat, constrained, disconnect (chaos: the client
    closes the stream after the first content chunk) or bad_schema (chaos: must get 400)."""

    index: int
    kind: str
    body: dict
    schema_name: str | None = None


class Workload:
    def __init__(self, args, schemas: list[dict]):
        self.args, self.schemas = args, schemas
        self.refused: dict[str, str] = {}  # schema name -> the server's 400 message
        self.rng = random.Random(args.seed)
        self.count = 0

    def next_job(self) -> Job:
        self.count += 1
        rng, a = self.rng, self.args
        body = {"messages": [], "max_tokens": a.max_tokens, "temperature": 0.7,
                "seed": rng.randrange(1 << 30), "stream": True, "stream_options": {"include_usage": True}}
        if a.chaos and self.count % 20 == 7:  # 5% of requests, spread evenly
            return self._constrained(body, {"name": "invalid", "schema": INVALID_SCHEMA}, "bad_schema")
        kind = "disconnect" if a.chaos and self.count % 10 == 3 else None  # 10%
        usable = [s for s in self.schemas if s["name"] not in self.refused]
        if usable and rng.random() < a.constrained_share:
            return self._constrained(body, rng.choice(usable), kind or "constrained")
        body["messages"] = [{"role": "user", "content": rng.choice(CHAT_PROMPTS)}]
        return Job(self.count, kind or "chat", body)

    def _constrained(self, body: dict, entry: dict, kind: str) -> Job:
        shown = json.dumps(entry["schema"])[:600]
        body["messages"] = [{"role": "user", "content": f"Reply with a JSON document for this schema: {shown}"}]
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "out", "schema": entry["schema"]}}
        return Job(self.count, kind, body, entry["name"])


# -- one request -------------------------------------------------------------------------


@dataclass
class Record:
    index: int
    kind: str
    schema: str | None
    start: float = 0.0
    status: int | None = None
    ttft: float | None = None
    e2e: float | None = None
    tpot: float | None = None
    chunk_gaps: list[float] = field(default_factory=list)
    completion_tokens: int | None = None
    finish_reason: str | None = None
    text: str = ""
    outcome: str = "ok"  # ok, refused, shed, expected_400, disconnected, http_error, stream_error, invalid
    detail: str = ""
    replica: str | None = None  # x-structgen-replica: which replica served it (scale-out)
    grammar_cache: str | None = None  # x-structgen-grammar-cache: "hit" or "miss"


async def send(client: httpx.AsyncClient, job: Job, schema: dict | None, t0: float) -> Record:
    rec = Record(job.index, job.kind, job.schema_name, start=time.perf_counter() - t0)
    began = time.perf_counter()
    try:
        async with client.stream("POST", "/v1/chat/completions", json=job.body) as resp:
            rec.status = resp.status_code
            rec.replica = resp.headers.get("x-structgen-replica")
            rec.grammar_cache = resp.headers.get("x-structgen-grammar-cache")
            if resp.status_code != 200:
                classify_refusal(rec, job, (await resp.aread()).decode(errors="replace"), resp.headers)
                rec.e2e = time.perf_counter() - began
                return rec
            await read_sse(resp, rec, began, disconnect=job.kind == "disconnect")
    except (httpx.HTTPError, OSError, ValueError) as exc:  # ValueError: an SSE line that is not JSON
        rec.outcome, rec.detail = "stream_error", f"{type(exc).__name__}: {exc}"
        return rec
    finish(rec, began, schema)
    return rec


def classify_refusal(rec: Record, job: Job, body: str, headers) -> None:
    """A 400 for a schema is not a failure: `bad_schema` expects it, a maskbench schema the
    server does not support is "refused"; a 429/503 with Retry-After is load shedding
    ("shed"). Everything else that is not a 200 is an error."""
    rec.detail = body[:500]
    try:
        param = json.loads(body)["error"]["param"] or ""
    except (ValueError, KeyError, TypeError):
        param = ""
    if rec.status == 400 and job.kind == "bad_schema":
        rec.outcome = "expected_400"
    elif rec.status == 400 and job.schema_name is not None and param.startswith("response_format"):
        rec.outcome = "refused"
    elif rec.status in (429, 503) and "retry-after" in headers:
        rec.outcome = "shed"
    else:
        rec.outcome = "http_error"


async def read_sse(resp: httpx.Response, rec: Record, began: float, disconnect: bool) -> None:
    last_chunk = None
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        event = json.loads(data)
        if "error" in event:
            rec.outcome, rec.detail = "stream_error", json.dumps(event["error"])[:500]
            return
        if event.get("usage"):
            rec.completion_tokens = event["usage"]["completion_tokens"]
        for choice in event.get("choices", []):
            delta = choice.get("delta") or {}
            if delta.get("content") or delta.get("tool_calls"):
                now = time.perf_counter()
                rec.text += delta.get("content") or ""
                if rec.ttft is None:
                    rec.ttft = now - began
                else:
                    rec.chunk_gaps.append(now - last_chunk)
                last_chunk = now
                if disconnect:
                    rec.outcome = "disconnected"
                    return  # leaving `client.stream` closes the connection mid-stream
            rec.finish_reason = choice.get("finish_reason") or rec.finish_reason
    if rec.outcome == "ok":
        rec.outcome, rec.detail = "stream_error", "stream ended without [DONE]"


def finish(rec: Record, began: float, schema: dict | None) -> None:
    rec.e2e = time.perf_counter() - began
    if rec.outcome != "ok":
        return
    if rec.completion_tokens is None:
        rec.outcome, rec.detail = "stream_error", "no usage chunk"
        return
    if rec.ttft is not None:
        rec.tpot = (rec.e2e - rec.ttft) / max(1, rec.completion_tokens - 1)
    if rec.kind == "constrained" and rec.finish_reason == "stop":
        error = validation.schema_error(rec.text, schema)
        if error is not None and error.startswith("could not validate"):  # jsonschema cannot use the schema
            rec.detail = f"not validated: {error[:200]}"
        elif error is not None:
            rec.outcome, rec.detail = "invalid", error


# -- load patterns -----------------------------------------------------------------------


class Runner:
    def __init__(self, client: httpx.AsyncClient, workload: Workload, args):
        self.client, self.workload, self.args = client, workload, args
        self.schemas = {s["name"]: s["schema"] for s in workload.schemas}
        self.schemas["invalid"] = INVALID_SCHEMA

    async def one(self, t0: float, bar: tqdm, records: list) -> None:
        job = self.workload.next_job()
        rec = await send(self.client, job, self.schemas.get(job.schema_name), t0)
        if rec.outcome == "refused":
            self.workload.refused[job.schema_name] = rec.detail
        records.append(rec)
        bar.update(1)

    async def closed_loop(self, concurrency: int, label: str) -> tuple[list, float]:
        a, records, t0 = self.args, [], time.perf_counter()
        total = a.requests
        bar = tqdm(total=total, desc=label, unit="req", leave=False)
        started = 0

        async def worker():
            nonlocal started
            while (total is None and time.perf_counter() - t0 < a.duration) or (total is not None and started < total):
                started += 1
                await self.one(t0, bar, records)

        await asyncio.gather(*[worker() for _ in range(concurrency)])
        bar.close()
        return records, time.perf_counter() - t0

    async def burst(self, count: int, label: str) -> tuple[list, float]:
        """`count` requests sent at the same moment (the overfill check)."""
        records, t0 = [], time.perf_counter()
        bar = tqdm(total=count, desc=label, unit="req", leave=False)
        await asyncio.gather(*[self.one(t0, bar, records) for _ in range(count)])
        bar.close()
        return records, time.perf_counter() - t0

    async def open_loop(self, rate: float, label: str) -> tuple[list, float]:
        a, records, t0 = self.args, [], time.perf_counter()
        rng = random.Random(a.seed + int(rate * 1000))
        bar = tqdm(total=a.requests, desc=label, unit="req", leave=False)
        tasks, sent = [], 0
        while (a.requests is None and time.perf_counter() - t0 < a.duration) or (a.requests is not None and sent < a.requests):
            tasks.append(asyncio.create_task(self.one(t0, bar, records)))
            sent += 1
            await asyncio.sleep(rng.expovariate(rate))
        await asyncio.gather(*tasks)
        bar.close()
        return records, time.perf_counter() - t0


# -- statistics and report ---------------------------------------------------------------


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(label: str, records: list[Record], wall: float, args) -> dict:
    def count(outcome: str) -> int:
        return sum(r.outcome == outcome for r in records)

    done = [r for r in records if r.outcome in ("ok", "invalid")]
    good = [r for r in done if r.ttft is not None and r.ttft <= args.slo_ttft
            and (r.tpot or 0.0) <= args.slo_tpot]
    measured = [r for r in records if r.outcome not in ("refused", "shed", "expected_400", "disconnected")]
    constrained_stop = [r for r in done if r.kind == "constrained" and r.finish_reason == "stop"]
    out = {"level": label, "requests": len(records), "wall_s": wall,
           "errors": count("http_error") + count("stream_error"), "invalid": count("invalid"),
           "refused": count("refused"), "shed": count("shed"), "expected_400": count("expected_400"),
           "disconnected": count("disconnected"), "completed": len(done),
           "statuses": {str(s): sum(r.status == s for r in records) for s in sorted({r.status for r in records}, key=str)},
           "constrained_valid": sum(r.outcome == "ok" for r in constrained_stop),
           "constrained_invalid": sum(r.outcome == "invalid" for r in constrained_stop),
           "constrained_length": sum(r.kind == "constrained" and r.finish_reason == "length" for r in done),
           "req_s": len(done) / wall, "output_tok_s": sum(r.completion_tokens or 0 for r in done) / wall,
           "slo_share": len(good) / len(measured) if measured else None, "goodput_req_s": len(good) / wall}
    for name in ("ttft", "tpot", "e2e"):
        values = [getattr(r, name) for r in done if getattr(r, name) is not None]
        out[name] = {f"p{q}": pct(values, q) for q in (50, 90, 99)}
    out["shed_latency_p99"] = pct([r.e2e for r in records if r.outcome == "shed" and r.e2e is not None], 99)
    return out


def ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.0f}"


def table(rows: list[dict]) -> str:
    lines = [("| level | req | err | refused | shed | 400 ok | disc | TTFT p50/p90/p99 ms | TPOT p50/p90/p99 ms "
              "| e2e p50/p90/p99 ms | req/s | out tok/s | SLO met | goodput req/s | JSON valid/invalid/length |"),
             "|---|" + "---|" * 14]
    for r in rows:
        lat = [" / ".join(ms(r[n][f"p{q}"]) for q in (50, 90, 99)) for n in ("ttft", "tpot", "e2e")]
        share = "-" if r["slo_share"] is None else f"{100 * r['slo_share']:.0f}%"
        lines.append(f"| {r['level']} | {r['requests']} | {r['errors']} | {r['refused']} | {r.get('shed', 0)} "
                     f"| {r['expected_400']} "
                     f"| {r['disconnected']} | {lat[0]} | {lat[1]} | {lat[2]} | {r['req_s']:.2f} "
                     f"| {r['output_tok_s']:.1f} | {share} | {r['goodput_req_s']:.2f} "
                     f"| {r['constrained_valid']} / {r['constrained_invalid']} / {r['constrained_length']} |")
    return "\n".join(lines)


def print_problems(label: str, records: list[Record], jobs: dict[int, Job]) -> None:
    for outcome in ("http_error", "stream_error", "invalid"):
        bad = [r for r in records if r.outcome == outcome]
        for r in bad[:SHOW_PROBLEMS]:
            body = json.dumps(jobs[r.index].body)[:400] if r.index in jobs else "?"
            print(f"[{label}] {outcome}: status={r.status} schema={r.schema} finish={r.finish_reason} "
                  f"detail={r.detail!r} text={r.text[:200]!r}\n    request: {body}")
        if len(bad) > SHOW_PROBLEMS:
            print(f"[{label}] ... {len(bad) - SHOW_PROBLEMS} more {outcome} (see the JSON)")


# -- server ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`structgen serve` as a subprocess (output to a temporary log), or a given URL."""

    def __init__(self, args, root: Path = ROOT, start_timeout_s: float = 180.0, env: dict | None = None):
        """root: the source tree whose `structgen` runs (another revision's worktree, say);
        env: variables set for the server on top of this process's environment."""
        self.args, self.proc, self.log = args, None, None
        self.url = args.url
        self.root, self.start_timeout_s, self.env = root, start_timeout_s, env

    def __enter__(self):
        if self.url:
            return self
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="structgen-serve-", suffix=".log", delete=False)
        cmd = [sys.executable, "-c", "import sys; from structgen.cli import main; sys.exit(main())",
               "serve", "--port", str(port), *self.args.server_args.split()]
        self.proc = subprocess.Popen(cmd, cwd=self.root, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **self.env} if self.env else None)
        self.wait_healthy(self.start_timeout_s)
        return self

    def wait_healthy(self, timeout: float = 180.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"structgen serve exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"structgen serve not healthy after {timeout:.0f} s:\n{self.tail()}")

    def rss_mb(self) -> float | None:
        """The server process's resident memory (Linux, a server started here), else None."""
        if self.proc is None:
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None

    def tail(self, n: int = 4000) -> str:
        return Path(self.log.name).read_text(errors="replace")[-n:] if self.log else ""

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.log.close()
        return False


def parse_metrics(text: str) -> dict[str, float]:
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


async def check_idle(client: httpx.AsyncClient, wait_s: float = 15.0) -> dict:
    """The server's gauges once the load is over: KV blocks used, running and waiting must
    all return to 0 (cancelled streams free their blocks asynchronously: poll a while)."""
    names = {"kv_blocks_used": "structgen_kv_blocks_used", "kv_blocks_total": "structgen_kv_blocks_total",
             "running": "structgen_running_sequences", "waiting": "structgen_queue_depth"}
    deadline = time.perf_counter() + wait_s
    while True:
        values = parse_metrics((await client.get("/metrics")).text)
        state = {k: values.get(v) for k, v in names.items()}
        idle = state["kv_blocks_used"] == 0 and state["running"] == 0 and state["waiting"] == 0
        if idle or time.perf_counter() > deadline:
            state["idle"] = idle
            return state
        await asyncio.sleep(0.5)


# -- main --------------------------------------------------------------------------------


def environment(args, server_url: str) -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=False,
                            capture_output=True, text=True).stdout.strip()
    return {"commit": commit, "python": platform.python_version(), "httpx": httpx.__version__,
            "machine": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "loadavg": os.getloadavg(), "time": time.strftime("%Y-%m-%d %H:%M:%S"), "server": server_url,
            "settings": {k: v for k, v in vars(args).items()}}


async def run_levels(args, server: Server, workload: Workload) -> tuple[list, dict, list]:
    timeout = httpx.Timeout(args.request_timeout, connect=10.0)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=server.url, timeout=timeout, limits=limits) as client:
        runner = Runner(client, workload, args)
        jobs: dict[int, Job] = {}
        original = workload.next_job

        def remembered() -> Job:  # keep each request body to print it with its problem
            job = original()
            jobs[job.index] = job
            return job

        workload.next_job = remembered
        rows, all_records = [], []
        levels = [("c", c) for c in args.concurrency] + [("r", r) for r in args.rates]
        levels += [("b", args.overfill)] if args.overfill else []
        for mode, value in levels:
            label = {"c": f"concurrency {value}", "r": f"rate {value}/s", "b": f"overfill {value}"}[mode]
            run = {"c": runner.closed_loop, "r": runner.open_loop, "b": runner.burst}[mode]
            records, wall = await run(value, label)
            rows.append(summarize(label, records, wall, args))
            rows[-1]["server_rss_mb"] = server.rss_mb()
            print_problems(label, records, jobs)
            all_records += [dict(asdict(r), level=label) for r in records]
        return rows, await check_idle(client), all_records


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    def floats(text: str) -> list[float]:
        return [float(x) for x in text.split(",") if x]

    p.add_argument("--url", help="a running server (default: start structgen serve on a free port)")
    p.add_argument("--server-args", default="", help="extra options for the server started here")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 4, 16, 64])
    p.add_argument("--rates", type=floats, default=[], help="open-loop Poisson arrival rates, requests/s")
    p.add_argument("--duration", type=float, default=60.0, help="seconds per level (unless --requests)")
    p.add_argument("--requests", type=int, default=None, help="requests per level instead of --duration")
    p.add_argument("--constrained-share", type=float, default=0.5)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--schemas", type=int, default=40, help="maskbench-dev schemas in the pool")
    p.add_argument("--schema-max-chars", type=int, default=1200, help="largest schema (JSON chars) in the pool")
    p.add_argument("--slo-ttft", type=float, default=1.0)
    p.add_argument("--slo-tpot", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--request-timeout", type=float, default=300.0)
    p.add_argument("--chaos", action="store_true", help="10%% disconnect mid-stream, 5%% invalid schemas")
    p.add_argument("--quick", action="store_true", help="levels 1,4 with a few requests each, short outputs")
    p.add_argument("--overfill", type=int, default=0,
                   help="after the levels, send this many requests at once; a server started here gets "
                        "--max-num-seqs 4 --max-waiting 4 (unless --server-args set them) so most are shed")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.quick:
        args.concurrency, args.rates, args.requests, args.max_tokens = [1, 4], [], args.requests or 20, 32
    if args.overfill and not args.url:
        for option in ("--max-num-seqs", "--max-waiting"):
            if option not in args.server_args:
                args.server_args += f" {option} 4"
    return args


def memory_check(rows: list[dict]) -> dict | None:
    """Resident memory flat across the run: after the last level at most 20% + 64 MB above
    what it was after the first (which has loaded the model and warmed the caches)."""
    samples = [r["server_rss_mb"] for r in rows if r.get("server_rss_mb") is not None]
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    return {"first_mb": first, "last_mb": last, "samples_mb": samples, "flat": last <= first * 1.2 + 64}


SHED_WITHIN_S = 2.0  # a shed request must be answered at least this fast (p99)


def overfill_check(row: dict, args) -> dict:
    """The burst: some requests shed (429/503 + Retry-After) quickly, every admitted one
    completed, nothing else failed."""
    shed_p99 = row["shed_latency_p99"]
    ok = (row["shed"] > 0 and row["errors"] == 0 and row["invalid"] == 0
          and shed_p99 is not None and shed_p99 <= SHED_WITHIN_S
          and row["shed"] + row["completed"] + row["refused"] + row["expected_400"] + row["disconnected"]
          == row["requests"])
    return {"shed": row["shed"], "completed": row["completed"], "errors": row["errors"],
            "shed_p99_s": shed_p99, "ok": ok}


def main(argv=None) -> int:
    args = parse_args(argv)
    schemas = load_schemas(args.schemas, args.schema_max_chars, args.seed)
    if args.constrained_share > 0 and not schemas:
        print(f"serve: no maskbench-dev schemas under {DATA} for --constrained-share {args.constrained_share}; "
              "pass --constrained-share 0 to run without constrained requests", file=sys.stderr)
        return 2
    workload = Workload(args, schemas)
    with Server(args) as server:
        env = environment(args, server.url)
        print(f"machine: {env['machine']}, {env['cpu_count']} cores, load {env['loadavg']}; python {env['python']}, "
              f"httpx {env['httpx']}; commit {env['commit']}; server {server.url}")
        print(f"settings: max_tokens={args.max_tokens} constrained_share={args.constrained_share} "
              f"chaos={args.chaos} slo ttft<={args.slo_ttft}s tpot<={args.slo_tpot}s "
              f"{'requests/level=' + str(args.requests) if args.requests else 'duration/level=' + str(args.duration) + 's'}")
        rows, idle, records = asyncio.run(run_levels(args, server, workload))
        server_tail = server.tail(2000)
    print("\n" + table(rows))
    print(f"\nrefused schemas ({len(workload.refused)}): " + ", ".join(sorted(workload.refused)) if workload.refused else "\nrefused schemas: none")
    print(f"server after the run: KV blocks used {idle['kv_blocks_used']} of {idle['kv_blocks_total']}, "
          f"running {idle['running']}, waiting {idle['waiting']} -> {'idle' if idle['idle'] else 'NOT IDLE'}")
    memory = memory_check(rows)
    if memory is not None:
        print(f"server memory: {memory['first_mb']:.0f} MB after the first level, {memory['last_mb']:.0f} MB after "
              f"the last -> {'flat' if memory['flat'] else 'GROWING'}")
    overfill = overfill_check(rows[-1], args) if args.overfill else None
    if overfill is not None:
        print(f"overfill: {overfill['shed']} of {args.overfill} shed with 429/503 (p99 {ms(overfill['shed_p99_s'])} ms), "
              f"{overfill['completed']} admitted and completed, {overfill['errors']} errors -> "
              f"{'ok' if overfill['ok'] else 'FAILED'}")
    failures = (sum(r["errors"] + r["invalid"] for r in rows) + (not idle["idle"])
                + (memory is not None and not memory["flat"]) + (overfill is not None and not overfill["ok"]))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"environment": env, "levels": rows, "server_after": idle,
                                       "memory": memory, "overfill": overfill,
                                       "refused_schemas": workload.refused, "server_log_tail": server_tail,
                                       "records": records}, indent=1, default=str))
    print(f"wrote {args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
