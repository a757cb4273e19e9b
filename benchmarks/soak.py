"""A long run of mixed and hostile traffic against the real server: memory stays flat, no 5xx.

Starts `structgen serve` (the embedded model) unless `--url` names one, then keeps
`--clients` (default 32) requests in flight for `--minutes` (default 60). Each client
sends, in turn, one of:
- **cached**: one of a few MaskBench-dev schemas, asked again and again;
- **fresh**: a MaskBench-dev schema made new to the cache (a `$comment` never sent before);
- **hostile**: a generated schema, deep schema, regex, lark or GBNF grammar, or request
  body (`benchmarks.hostile`, as the fuzz suite draws them).
Every answer is classified as the fuzz suite does (a 200 that stops validates; an error
is an OpenAI error body), and the resident memory of the server and its compile workers
is sampled every `--sample-s` seconds. The targets: no 5xx, and memory at the end and at
its peak at most 5% above the sample at ten minutes (`--settle-minutes`). Prints the
figures, writes them (with the memory curve) to JSON; `structgen bench soak` also plots it.

    python benchmarks/soak.py --minutes 60      (or: structgen bench soak --minutes 60)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fuzz import COMPILE_BUDGET_S, MASKBENCH, classify, make_input  # noqa: E402
from benchmarks.serve import Server  # noqa: E402
from structgen.grammar.nesting import make_room_for_deep_input  # noqa: E402

MIX = {"cached": 5, "fresh": 3, "hostile": 2}  # relative weights
HOSTILE_KINDS = ("schema", "deep schema", "regex", "lark", "gbnf", "body")
CACHED_SCHEMAS = 16
TIMEOUT_S = 600.0  # 32 clients share 2 cores: a request may queue for minutes, but never hangs
GROWTH_LIMIT = 0.05


def server_and_workers_rss_mb(pid: int) -> tuple[float | None, float]:
    """Resident memory of `pid`, and of its children together, in MB (Linux)."""
    workers = sum(_rss_mb(child) or 0.0 for child in _children(pid))
    return _rss_mb(pid), workers


def _rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class Traffic:
    """Draws the soak's requests: (kind, body, what the output must satisfy)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.maskbench = sorted(MASKBENCH.glob("*.json"))
        self.cached = [json.loads(path.read_text())["schema"] for path in self.maskbench[:CACHED_SCHEMAS]]
        self.fresh_count = 0

    def next(self) -> tuple[str, dict, object]:
        kind = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if kind == "hostile":
            body, expect = make_input(self.rng.choice(HOSTILE_KINDS), self.rng, self.maskbench)
            return kind, body, expect
        if kind == "cached":
            schema = self.rng.choice(self.cached)
        else:
            self.fresh_count += 1
            schema = json.loads(self.rng.choice(self.maskbench).read_text())["schema"]
            if isinstance(schema, dict):
                schema = {**schema, "$comment": f"soak {self.fresh_count}"}
        body = {"messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": self.rng.choice([16, 48]),
                "temperature": 0.7, "seed": self.rng.randrange(1000),
                "response_format": {"type": "json_schema", "json_schema": {"name": "soak", "schema": schema}}}
        return kind, body, ("schema", schema)


async def client_loop(http: httpx.AsyncClient, traffic: Traffic, deadline: float, tally: dict) -> None:
    while time.monotonic() < deadline:
        kind, body, expect = traffic.next()
        try:
            response = await http.post("/v1/chat/completions", content=json.dumps(body),
                                       headers={"content-type": "application/json"})
            outcome, problem = classify(response, expect)
        except httpx.TimeoutException:
            outcome, problem = "timeout", f"no answer within {TIMEOUT_S:.0f} s"
        except httpx.TransportError as err:
            outcome, problem = "connection lost", f"{type(err).__name__}: {err}"
        tally["outcomes"][f"{kind}: {outcome}"] += 1
        if problem is not None:
            tally["problems"].append({"kind": kind, "outcome": outcome, "problem": problem[:300],
                                      "body": json.dumps(body)[:1000]})
            print(f"PROBLEM [{kind}] {outcome}: {problem[:200]}", flush=True)


async def sample_memory(http: httpx.AsyncClient, pid: int, started: float, deadline: float, every_s: float,
                        samples: list) -> None:
    """Every `every_s`: (seconds, resident MB of the server and its workers, grammar cache
    MB by its own count, the workers' resident MB, evicted grammars still in use in MB)."""
    while time.monotonic() < deadline:
        server, workers = server_and_workers_rss_mb(pid)
        if server is not None:
            cache, evicted_in_use = await cache_mb(http)
            samples.append((round(time.monotonic() - started, 1), round(server + workers, 1), cache,
                            round(workers, 1), evicted_in_use))
        await asyncio.sleep(every_s)


async def cache_mb(http: httpx.AsyncClient) -> tuple[float | None, float | None]:
    """The grammar cache's bytes, and its evicted grammars still in use, by its own count (MB)."""
    try:
        text = (await http.get("/metrics", timeout=30)).text
    except httpx.HTTPError:
        return None, None
    return (_gauge_mb(text, "structgen_grammar_cache_bytes"),
            _gauge_mb(text, "structgen_grammar_cache_evicted_in_use_bytes"))


def _gauge_mb(metrics: str, name: str) -> float | None:
    match = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
    return round(float(match.group(1)) / 2**20, 1) if match else None


async def soak(url: str, pid: int, args) -> dict:
    traffic = Traffic(args.seed)
    tally = {"outcomes": Counter(), "problems": []}
    samples: list[tuple[float, float, float | None]] = []
    started = time.monotonic()
    deadline = started + 60 * args.minutes
    limits = httpx.Limits(max_connections=args.clients + 4)
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S, limits=limits) as http:
        memory = asyncio.create_task(sample_memory(http, pid, started, deadline, args.sample_s, samples))
        await asyncio.gather(*(client_loop(http, traffic, deadline, tally) for _ in range(args.clients)))
        await memory
        healthy = (await http.get("/health")).status_code == 200
    return {"outcomes": dict(tally["outcomes"]), "problems": tally["problems"][:50], "healthy_after": healthy,
            "fresh_schemas": traffic.fresh_count, "memory_mb": samples, **growth(samples, 60 * args.settle_minutes)}


def growth(samples: list[tuple], settle_s: float) -> dict:
    """Memory at the settle time, at the end and at its peak after it, and the growth."""
    settled = [sample[1] for sample in samples if sample[0] >= settle_s]
    if not settled:
        return {"settled_mb": None, "end_mb": None, "peak_after_settle_mb": None, "growth_end": None,
                "growth_peak": None}
    base = settled[0]
    return {"settled_mb": base, "end_mb": settled[-1], "peak_after_settle_mb": max(settled),
            "growth_end": settled[-1] / base - 1, "growth_peak": max(settled) / base - 1}


def report(result: dict) -> bool:
    """Print the figures; whether every target was met."""
    requests = sum(result["outcomes"].values())
    server_errors = sum(n for outcome, n in result["outcomes"].items() if outcome.split(": ", 1)[1].startswith("5"))
    bad = result["problems"]
    print(f"\n{requests} requests, {result['fresh_schemas']} fresh schemas, {server_errors} 5xx, "
          f"{len(bad)} other problems, healthy after: {result['healthy_after']}")
    for outcome, n in sorted(result["outcomes"].items()):
        print(f"  {n:7d}  {outcome}")
    if result["settled_mb"] is not None:
        print(f"memory: {result['settled_mb']:.0f} MB at settle, {result['end_mb']:.0f} MB at the end "
              f"({100 * result['growth_end']:+.1f}%), peak {result['peak_after_settle_mb']:.0f} MB "
              f"({100 * result['growth_peak']:+.1f}%); limit +{100 * GROWTH_LIMIT:.0f}%")
    within = result["growth_peak"] is not None and result["growth_peak"] <= GROWTH_LIMIT
    return server_errors == 0 and not bad and result["healthy_after"] and within


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running server (default: start structgen serve; memory needs that)")
    parser.add_argument("--server-args", default="", help="extra arguments for structgen serve")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--settle-minutes", type=float, default=10.0, help="memory growth counts from here")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--sample-s", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "soak.json"))
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    make_room_for_deep_input()  # json.dumps of the deep hostile schemas
    with Server(args) as server:
        if server.proc is None:
            raise SystemExit("the soak measures the server's memory: let it start the server (no --url)")
        result = asyncio.run(soak(server.url, server.proc.pid, args))
    ok = report(result)
    out = {"result": result, "minutes": args.minutes, "clients": args.clients, "server_args": args.server_args,
           "compile_budget_s": COMPILE_BUDGET_S,
           "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
