#!/usr/bin/env python3
"""Scale-out on Ray Serve (`structgen serve --replicas N`), measured against
`structgen serve` alone on the same machine and the same seeded workload.

Three parts, each with servers it starts and stops itself:
- overhead: one engine, then Ray Serve with 1 replica given every core (as the one
  engine has them: a replica's torch threads are its reserved CPUs) and with 2 replicas
  sharing them, under the same closed-loop load; throughput and TTFT, medians of
  `--runs` passes after a warm-up. The per-replica overhead is 1 - (Ray, 1 replica) /
  (one engine).
- routing: 40 maskbench-dev schemas requested with a Zipf distribution, against 2
  replicas under the grammar-affinity router and under Ray's power-of-two router, each
  from cold caches. Reported: the grammar cache hit rate over all requests, and over
  the repeat requests (a schema the cluster has already been sent: the ones routing can
  make hit), and TTFT p50/p90.
- chaos: 64 clients against 2 replicas; one replica's process is killed mid-run. Every
  request must complete or get a clear error (an error event or an error body): none may
  be lost to a transport error or a hang. Reported: outcomes, retries, and the seconds
  until a new replica has served its first request.

    python -m benchmarks.scale_out --quick
    python -m benchmarks.scale_out --parts routing --requests 300
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx

from benchmarks.serve import CHAT_PROMPTS, DATA, Job, Record, Server, load_schemas, pct, send

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "scale_out.json"
REPLICA_PROCESS = "ServeReplica:structgen:EngineReplica"
START_TIMEOUT_S = 600.0


class ZipfWorkload:
    """Seeded requests: a schema drawn with probability ~ 1/rank^s (or a chat prompt)."""

    def __init__(self, schemas: list[dict], args, seed: int, constrained_share: float = 1.0):
        self.schemas, self.args, self.constrained_share = schemas, args, constrained_share
        self.rng = random.Random(seed)
        self.weights = [1 / (rank ** args.zipf) for rank in range(1, len(schemas) + 1)]
        self.count = 0

    def next_job(self) -> Job:
        self.count += 1
        body = {"messages": [], "max_tokens": self.args.max_tokens, "temperature": 0.7,
                "seed": self.rng.randrange(1 << 30), "stream": True, "stream_options": {"include_usage": True}}
        if self.rng.random() >= self.constrained_share:
            body["messages"] = [{"role": "user", "content": self.rng.choice(CHAT_PROMPTS)}]
            return Job(self.count, "chat", body)
        entry = self.rng.choices(self.schemas, self.weights)[0]
        body["messages"] = [{"role": "user", "content": "Reply with a JSON document for this schema: "
                                                        + json.dumps(entry["schema"])[:600]}]
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "out", "schema": entry["schema"]}}
        return Job(self.count, "constrained", body, entry["name"])


async def closed_loop(url: str, workload: ZipfWorkload, schemas: dict, requests: int | None, clients: int,
                      seconds: float | None = None, timeout_s: float = 300.0) -> tuple[list[Record], float]:
    records: list[Record] = []
    t0 = time.perf_counter()
    sent = 0

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal sent
        while (requests is not None and sent < requests) or (seconds is not None and time.perf_counter() - t0 < seconds):
            sent += 1
            job = workload.next_job()
            records.append(await send(client, job, schemas.get(job.schema_name), t0))

    async with httpx.AsyncClient(base_url=url, timeout=timeout_s,
                                 limits=httpx.Limits(max_connections=clients + 4)) as client:
        await asyncio.gather(*[client_loop(client) for _ in range(clients)])
    return records, time.perf_counter() - t0


def throughput(records: list[Record], wall: float) -> dict:
    done = [r for r in records if r.outcome in ("ok", "invalid")]
    ttfts = [r.ttft for r in done if r.ttft is not None]
    return {"requests": len(records), "completed": len(done), "wall_s": round(wall, 2),
            "tokens_per_s": round(sum(r.completion_tokens or 0 for r in done) / wall, 2),
            "requests_per_s": round(len(done) / wall, 3), "ttft_p50_s": pct(ttfts, 50), "ttft_p90_s": pct(ttfts, 90),
            "errors": sum(r.outcome in ("http_error", "stream_error") for r in records),
            "invalid": sum(r.outcome == "invalid" for r in records)}


def started(server_args: str, env: dict | None = None):
    return Server(SimpleNamespace(url=None, server_args=server_args), start_timeout_s=START_TIMEOUT_S, env=env)


# -- parts -------------------------------------------------------------------------------

ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # torch's threads; a Ray replica gets its reserved CPUs
OVERHEAD_SERVERS = (  # label, `structgen serve` arguments, environment
    ("one engine", "", None),
    ("ray, 1 replica", "--replicas 1 --replica-cpus 2 --drain-seconds 5", None),
    ("one engine, 1 thread", "", ONE_THREAD),
    ("ray, 1 replica of 1 CPU", "--replicas 1 --replica-cpus 1 --drain-seconds 5", None),
    ("ray, 2 replicas", "--replicas 2 --drain-seconds 5", None),
)
OVERHEAD_PAIRS = (  # (ray, its baseline): each pass of one against the same seeded pass of the other
    ("ray, 1 replica", "one engine"),
    ("ray, 1 replica of 1 CPU", "one engine, 1 thread"),
    ("ray, 2 replicas", "one engine"),
)


def overhead(args, schemas: list[dict]) -> dict:
    """Each server under the same passes (pass i has seed 100 + i everywhere). A ratio is
    the median over passes of (Ray's tok/s) / (its baseline's tok/s in the same pass);
    the pass-to-pass spread of one server here is about +-10%, so pairing by pass matters.

    Two pairs measure the per-replica overhead. One gives the replica and the engine
    every core: on a machine with no core to spare, the engine's two threads then share
    them with Ray's own processes (~20% of a core under this load). The other gives each
    one thread, leaving a core for Ray, as any machine with cores beyond its replicas'
    does; on this load a lone engine serves the same with one thread as with two."""
    by_name = {s["name"]: s["schema"] for s in schemas}
    rows = {}
    for label, server_args, env in OVERHEAD_SERVERS:
        with started(f"{server_args} --compile-workers 1", env) as server:
            warm = ZipfWorkload(schemas, args, seed=1, constrained_share=0.5)
            asyncio.run(closed_loop(server.url, warm, by_name, args.requests // 2, args.clients))
            passes = []
            for run in range(args.runs):
                workload = ZipfWorkload(schemas, args, seed=100 + run, constrained_share=0.5)
                passes.append(throughput(*asyncio.run(closed_loop(server.url, workload, by_name, args.requests,
                                                                  args.clients))))
        rows[label] = {"passes": passes, "tokens_per_s": statistics.median(p["tokens_per_s"] for p in passes),
                       "ttft_p90_s": statistics.median(p["ttft_p90_s"] for p in passes if p["ttft_p90_s"])}
        print(f"{label:24} {rows[label]['tokens_per_s']:7.1f} tok/s  TTFT p90 "
              f"{rows[label]['ttft_p90_s'] * 1e3:6.0f} ms", flush=True)
    ratios = [paired_ratio(rows, ray, base) for ray, base in OVERHEAD_PAIRS]
    for ratio in ratios:
        print(f"{ratio['server']} vs {ratio['baseline']}: {ratio['median']:.3f}x "
              f"(passes {', '.join(f'{r:.3f}' for r in ratio['passes'])})")
    return {"rows": rows, "ratios": ratios}


def paired_ratio(rows: dict, server: str, baseline: str) -> dict:
    per_pass = [round(p["tokens_per_s"] / b["tokens_per_s"], 3)
                for p, b in zip(rows[server]["passes"], rows[baseline]["passes"])]
    return {"server": server, "baseline": baseline, "median": statistics.median(per_pass), "passes": per_pass}


def routing(args, schemas: list[dict]) -> dict:
    """`--routing-runs` passes, each from cold caches and on its own seeded workload, the
    same for both routers; which router goes first alternates from pass to pass. Each
    figure is the median over the passes."""
    by_name = {s["name"]: s["schema"] for s in schemas}
    passes: dict[str, list[dict]] = {"grammar": [], "power_of_two": []}
    for run in range(args.routing_runs):
        order = ("grammar", "power_of_two") if run % 2 == 0 else ("power_of_two", "grammar")
        for router in order:
            passes[router].append(routing_pass(args, schemas, by_name, router, seed=7 + run))
    rows = {router: {**{key: statistics.median(p[key] for p in runs) for key in ROUTING_MEDIANS},
                     "passes": runs} for router, runs in passes.items()}
    return {"rows": rows, "runs": args.routing_runs, "ttft_p90_grammar_vs_power_of_two":
            round(rows["grammar"]["ttft_p90_s"] / rows["power_of_two"]["ttft_p90_s"], 3)}


ROUTING_MEDIANS = ("hit_rate", "repeat_hit_rate", "ttft_p50_s", "ttft_p90_s", "tokens_per_s")


def routing_pass(args, schemas: list[dict], by_name: dict, router: str, seed: int) -> dict:
    with started(f"--replicas 2 --router {router} --compile-workers 1 --drain-seconds 5") as server:
        workload = ZipfWorkload(schemas, args, seed=seed)
        records, wall = asyncio.run(closed_loop(server.url, workload, by_name, args.requests, args.clients))
        routed_by = routed_counts(httpx.get(server.url + "/metrics", timeout=30).text)
    row = {**throughput(records, wall), **hit_rates(records), "routed_by": routed_by}
    print(f"router {router:12} hit rate {row['hit_rate']:.1%} (repeats {row['repeat_hit_rate']:.1%}), "
          f"TTFT p50 {row['ttft_p50_s'] * 1e3:.0f} ms p90 {row['ttft_p90_s'] * 1e3:.0f} ms", flush=True)
    return row


def hit_rates(records: list[Record]) -> dict:
    """Over all constrained requests, and over those whose schema was sent before (in
    the order the requests started)."""
    seen, hits, repeats, repeat_hits, looked_up = set(), 0, 0, 0, 0
    for rec in sorted(records, key=lambda r: r.start):
        if rec.grammar_cache is None:
            continue
        looked_up += 1
        hits += rec.grammar_cache == "hit"
        if rec.schema in seen:
            repeats += 1
            repeat_hits += rec.grammar_cache == "hit"
        seen.add(rec.schema)
    return {"lookups": looked_up, "hit_rate": hits / max(1, looked_up), "repeats": repeats,
            "repeat_hit_rate": repeat_hits / max(1, repeats), "distinct_schemas": len(seen),
            "replicas_used": len({r.replica for r in records if r.replica})}


def chaos(args, schemas: list[dict]) -> dict:
    by_name = {s["name"]: s["schema"] for s in schemas}
    with started("--replicas 2 --compile-workers 1 --drain-seconds 5") as server:
        workload = ZipfWorkload(schemas, args, seed=11, constrained_share=0.5)

        async def run_with_kill():
            loop = asyncio.create_task(closed_loop(server.url, workload, by_name, None, args.chaos_clients,
                                                   seconds=args.chaos_seconds, timeout_s=args.chaos_timeout))
            await asyncio.sleep(args.chaos_seconds / 3)
            before = served_replicas(httpx.get(server.url + "/metrics", timeout=30).text)
            os.kill(replica_pids()[0], signal.SIGKILL)
            killed_at = time.perf_counter()
            back_after = await replica_back(server.url, killed_at, before)
            records, wall = await loop
            return records, wall, back_after

        records, wall, back_after = asyncio.run(run_with_kill())
        retries = metric(server.url, "structgen_replica_retries_total")
        cut = metric(server.url, "structgen_replica_cut_streams_total")
    lost = [r for r in records if r.outcome == "stream_error" and not r.detail.startswith("{")
            or r.outcome == "http_error" and not r.detail.startswith("{")]
    outcomes = {}
    for rec in records:
        outcomes[rec.outcome] = outcomes.get(rec.outcome, 0) + 1
    result = {"clients": args.chaos_clients, "requests": len(records), "outcomes": outcomes,
              "clear_errors": sum(r.outcome in ("stream_error", "http_error") for r in records) - len(lost),
              "lost": len(lost), "lost_details": [r.detail for r in lost[:5]], "retried": retries,
              "streams_cut": cut, "replica_back_after_s": back_after, "wall_s": round(wall, 1)}
    print(f"chaos: {len(records)} requests, outcomes {outcomes}, {result['clear_errors']} clear errors, "
          f"{len(lost)} lost, {retries:.0f} retried, {cut:.0f} streams cut; a replica serving again after "
          f"{back_after if back_after is None else round(back_after, 1)} s", flush=True)
    return result


def replica_pids() -> list[int]:
    found = subprocess.run(["pgrep", "-f", REPLICA_PROCESS], capture_output=True, text=True).stdout.split()
    return sorted(int(pid) for pid in found)


async def replica_back(url: str, killed_at: float, before: set[str], limit_s: float = 180.0) -> float | None:
    """Seconds until a replica that was not there before the kill has served a request."""
    async with httpx.AsyncClient(timeout=30) as client:
        while time.perf_counter() - killed_at < limit_s:
            if served_replicas((await client.get(url + "/metrics")).text) - before:
                return time.perf_counter() - killed_at
            await asyncio.sleep(0.5)
    return None


def routed_counts(metrics_text: str) -> dict[str, int]:
    """Requests by how the router sent them (grammar, prefix, spill, load), all replicas."""
    counts: dict[str, int] = {}
    for line in metrics_text.splitlines():
        if line.startswith("structgen_replica_requests_total{"):
            how = line.split('routed_by="', 1)[1].split('"', 1)[0]
            counts[how] = counts.get(how, 0) + int(float(line.rsplit(" ", 1)[1]))
    return counts


def served_replicas(metrics_text: str) -> set[str]:
    return {line.split('replica="', 1)[1].split('"', 1)[0] for line in metrics_text.splitlines()
            if line.startswith("structgen_replica_requests_total{")}


def metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


# -- main --------------------------------------------------------------------------------


PARTS = {"overhead": overhead, "routing": routing, "chaos": chaos}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="overhead,routing,chaos")
    p.add_argument("--requests", type=int, default=240, help="requests per pass (overhead, routing)")
    p.add_argument("--clients", type=int, default=8, help="concurrent clients (overhead, routing)")
    p.add_argument("--runs", type=int, default=3, help="measured passes per server (overhead)")
    p.add_argument("--routing-runs", type=int, default=3, help="passes per router, each from cold caches (routing)")
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--schemas", type=int, default=40)
    p.add_argument("--schema-max-chars", type=int, default=1200)
    p.add_argument("--zipf", type=float, default=1.1, help="the Zipf exponent of schema popularity")
    p.add_argument("--chaos-clients", type=int, default=64)
    p.add_argument("--chaos-seconds", type=float, default=60.0)
    p.add_argument("--chaos-timeout", type=float, default=300.0, help="a request's timeout in the chaos run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="fewer requests and a shorter chaos run")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.runs, args.chaos_seconds, args.chaos_clients = 60, 1, 30.0, 16
        args.routing_runs = 1
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    schemas = load_schemas(args.schemas, args.schema_max_chars, args.seed)
    if not schemas:
        print(f"scale_out: no maskbench-dev schemas under {DATA}; every part sends schemas from it",
              file=sys.stderr)
        return 2
    results = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "machine": {"cpu_count": os.cpu_count(), "loadavg": os.getloadavg()}}
    for part in args.parts.split(","):
        results[part] = PARTS[part](args, schemas)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1, default=str))
    print(f"wrote {args.output}")
    chaos_result = results.get("chaos")
    return 1 if chaos_result is not None and chaos_result["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
