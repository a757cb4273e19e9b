"""Does one request's grammar compile stall the others? Measured on the real server.

Starts `structgen serve` (the embedded model) unless `--url` names one, then, several
times each:
- **stream gaps**: an unconstrained stream runs alone (its median and largest gap
  between two chunks), then again while a fresh 20,000-value `enum` compiles; the
  figure is the largest gap during the compile over the median gap alone (the target:
  at most 2x);
- **queued compile**: a small fresh schema's request alone, then sent just after such an
  enum; the figure is how much later it answers than alone (the target: at most
  100 ms beyond its own time).
Prints medians over the runs and writes them to JSON.

    python benchmarks/isolation.py --runs 3      (or: structgen bench isolation)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import string
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.serve import Server  # noqa: E402

ENUM_VALUES = 20_000
STREAM_TOKENS = 160


def big_enum(rng: random.Random) -> dict:
    """A fresh schema (never cached): an object whose one property is a 20,000-value enum."""
    values = sorted({"".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 16))) for _ in range(ENUM_VALUES)})
    return {"type": "object", "properties": {"pick": {"enum": values}}, "required": ["pick"]}


def small_schema(rng: random.Random) -> dict:
    """A fresh small schema: an integer with a bound never asked before."""
    return {"type": "object", "properties": {"n": {"type": "integer", "maximum": rng.randrange(10**6, 10**9)}},
            "required": ["n"]}


def constrained(schema: dict) -> dict:
    return {"messages": [{"role": "user", "content": "Pick one."}], "max_tokens": 4, "temperature": 0.0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}


async def stream_gaps(client: httpx.AsyncClient, started: asyncio.Event | None = None) -> list[tuple[float, float]]:
    """(arrival time, gap before it) of each chunk of an unconstrained stream after its first."""
    body = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse."}],
            "max_tokens": STREAM_TOKENS, "temperature": 0.0, "stream": True, "ignore_eos": True}
    arrivals = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                arrivals.append(time.perf_counter())
                if started is not None and len(arrivals) == 8:
                    started.set()
    return [(b, b - a) for a, b in zip(arrivals[1:], arrivals[2:])]  # the first gap holds the prefill


async def timed(client: httpx.AsyncClient, body: dict) -> tuple[float, float, float]:
    """(sent, answered, seconds) of one non-streamed request, which must succeed."""
    sent = time.perf_counter()
    resp = await client.post("/v1/chat/completions", json=body)
    if resp.status_code != 200:
        raise SystemExit(f"a request failed with {resp.status_code}: {resp.text[:500]}")
    answered = time.perf_counter()
    return sent, answered, answered - sent


async def gap_run(client: httpx.AsyncClient, rng: random.Random) -> dict:
    alone = [gap for _, gap in await stream_gaps(client)]
    started = asyncio.Event()
    stream = asyncio.create_task(stream_gaps(client, started))
    await started.wait()
    sent, answered, compile_request_s = await timed(client, constrained(big_enum(rng)))
    during = [gap for at, gap in await stream if sent <= at <= answered + max(alone)]
    median_alone = statistics.median(alone)
    return {"median_gap_alone_ms": 1e3 * median_alone, "max_gap_alone_ms": 1e3 * max(alone),
            "max_gap_during_compile_ms": 1e3 * max(during), "enum_request_s": compile_request_s,
            "gap_ratio": max(during) / median_alone}


async def queue_run(client: httpx.AsyncClient, rng: random.Random) -> dict:
    _, _, small_alone_s = await timed(client, constrained(small_schema(rng)))
    big = asyncio.create_task(timed(client, constrained(big_enum(rng))))
    await asyncio.sleep(0.3)
    _, _, small_queued_s = await timed(client, constrained(small_schema(rng)))
    _, _, big_s = await big
    return {"small_alone_s": small_alone_s, "small_behind_enum_s": small_queued_s, "enum_request_s": big_s,
            "delay_ms": 1e3 * (small_queued_s - small_alone_s)}


def medians(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


async def measure(args, url: str) -> dict:
    rng = random.Random(args.seed)
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        await timed(client, constrained(small_schema(rng)))  # warm: the first request's one-off costs
        await stream_gaps(client)
        gaps, queues = [], []
        for run in range(args.runs):
            gaps.append(await gap_run(client, rng))
            queues.append(await queue_run(client, rng))
            print(f"run {run + 1}: {json.dumps({**gaps[-1], **queues[-1]}, default=lambda x: round(x, 3))}")
    return {"runs": {"gaps": gaps, "queue": queues}, "gaps": medians(gaps), "queue": medians(queues)}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running server (default: start structgen serve)")
    parser.add_argument("--server-args", default="", help="extra arguments for structgen serve")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "isolation.json"))
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    with Server(args) as server:
        result = asyncio.run(measure(args, server.url))
    gaps, queue = result["gaps"], result["queue"]
    print(f"stream gap while a {ENUM_VALUES:,}-value enum compiles: max {gaps['max_gap_during_compile_ms']:.0f} ms "
          f"vs median {gaps['median_gap_alone_ms']:.0f} ms alone: {gaps['gap_ratio']:.2f}x (target <= 2x)")
    print(f"small compile behind it: {queue['small_behind_enum_s']:.2f} s vs {queue['small_alone_s']:.2f} s alone: "
          f"+{queue['delay_ms']:.0f} ms (target <= 100 ms)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
