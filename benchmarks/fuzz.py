"""Fuzz the real server with generated hostile input for a few minutes.

Starts `structgen serve` (the embedded model) unless `--url` names one, then sends, in
turn: generated JSON Schemas (`benchmarks.hostile`, every keyword, deep and wide, invalid
ones too), real MaskBench-dev schemas, random regexes, random lark and GBNF grammars,
and random request bodies. For each it checks that:
- the status is 200 or 4xx, never 5xx, and the answer comes within the compile budget
  plus a margin (no hang);
- a 200 whose `finish_reason` is "stop" validates against its schema (`jsonschema`), or
  fully matches its regex;
- an error is an OpenAI error body;
- the server is still healthy after it.
Prints the counts by outcome and the slowest inputs, and writes them to JSON.

    python benchmarks/fuzz.py --minutes 30      (or: structgen bench fuzz --minutes 30)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.hostile import DEEP_SCHEMAS, REGEXES, SCHEMAS, gbnf_grammars, lark_grammars, request_bodies  # noqa: E402
from benchmarks.serve import Server  # noqa: E402
from structgen.grammar.nesting import make_room_for_deep_input  # noqa: E402

MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench-dev"
COMPILE_BUDGET_S = 10.0  # the server's compile timeout (compiler.DEFAULT_TIMEOUT_S)
MARGIN_S = 60.0  # decoding max_tokens on a busy 2-core machine, and queueing
KINDS = ("schema", "deep schema", "maskbench", "regex", "lark", "gbnf", "body")
SHOW_SLOWEST = 8


def draw(strategy):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hypothesis: .example() is meant for interactive use
        return strategy.example()


def make_input(kind: str, rng: random.Random, maskbench: list[Path]) -> tuple[dict, object]:
    """(request body, what its output must satisfy: a schema, a regex, or None)."""
    base = {"messages": [{"role": "user", "content": "Answer."}], "max_tokens": rng.choice([4, 16, 48]),
            "temperature": rng.choice([0.0, 0.7, 1.0]), "seed": rng.randrange(1000)}
    if kind in ("schema", "deep schema", "maskbench"):
        if kind == "maskbench":
            schema = json.loads(rng.choice(maskbench).read_text())["schema"]
        else:
            schema = draw(SCHEMAS if kind == "schema" else DEEP_SCHEMAS)
        format_ = {"type": "json_schema", "json_schema": {"name": "fuzz", "schema": schema}}
        return {**base, "response_format": format_}, ("schema", schema)
    if kind == "regex":
        pattern = draw(REGEXES)
        return {**base, "structured_outputs": {"regex": pattern}}, ("regex", pattern)
    if kind in ("lark", "gbnf"):
        text = draw(lark_grammars() if kind == "lark" else gbnf_grammars())
        return {**base, "structured_outputs": {"grammar": text}}, None
    return draw(request_bodies()), None


def check_output(expect, text: str) -> str | None:
    """None when a complete output satisfies what it had to, else what is wrong."""
    import jsonschema
    import regex

    if expect is None:
        return None
    what, source = expect
    if what == "regex":
        if "{," in source:
            return None  # ECMA-262 reads "{,3}" as text, Python as a repetition: no common reading
        try:
            compiled = regex.compile(source)
        except regex.error:
            return None  # a pattern Python reads otherwise than ECMA-262: nothing to check against
        return None if compiled.fullmatch(text) else f"output {text!r} does not match {source!r}"
    try:
        jsonschema.Draft202012Validator.check_schema(source)
    except jsonschema.SchemaError:
        return None  # not a schema jsonschema can check outputs against
    try:
        jsonschema.validate(json.loads(text), source, cls=jsonschema.Draft202012Validator,
                            format_checker=jsonschema.FormatChecker())
    except (ValueError, jsonschema.ValidationError) as err:
        return f"output {text[:120]!r} is invalid: {str(err)[:200]}"
    except jsonschema.exceptions.RefResolutionError:
        return None
    return None


def _healthy(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(url + "/health").status_code == 200
    except httpx.TransportError:
        return False


def classify(response: httpx.Response, expect) -> tuple[str, str | None]:
    """(outcome, problem or None)."""
    status = response.status_code
    if status >= 500:
        return f"{status}", response.text[:300]
    if status >= 400:
        try:
            error = response.json()["error"]
            assert set(error) >= {"message", "type", "param", "code"}
        except Exception:
            return f"{status} (not an OpenAI error)", response.text[:300]
        return f"{status}", None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return "200 streamed", None  # a generated body that asked for "stream": true
    choice = response.json()["choices"][0]
    if choice["finish_reason"] != "stop":
        return "200 cut by max_tokens", None
    problem = check_output(expect, choice["message"]["content"] or "")
    return ("200 INVALID", problem) if problem else ("200 valid", None)


def fuzz(url: str, minutes: float, seed: int) -> dict:
    rng = random.Random(seed)
    maskbench = sorted(MASKBENCH.glob("*.json"))
    outcomes: Counter = Counter()
    by_kind: dict[str, Counter] = {kind: Counter() for kind in KINDS}
    problems, timings = [], []
    deadline = time.monotonic() + minutes * 60
    client = httpx.Client(timeout=COMPILE_BUDGET_S + MARGIN_S)
    while time.monotonic() < deadline:
        kind = rng.choice(KINDS)
        body, expect = make_input(kind, rng, maskbench)
        started = time.monotonic()
        try:
            # json.dumps writes NaN and Infinity, which are not JSON: hostile input too
            response = client.post(url + "/v1/chat/completions", content=json.dumps(body),
                                   headers={"content-type": "application/json"})
            outcome, problem = classify(response, expect)
        except httpx.TimeoutException:
            outcome, problem = "timeout", f"no answer within {COMPILE_BUDGET_S + MARGIN_S:.0f} s"
        except httpx.TransportError as err:
            outcome, problem = "connection lost", f"{type(err).__name__}: {err}"
        elapsed = time.monotonic() - started
        healthy = _healthy(client, url)
        if not healthy:
            outcome, problem = "server unhealthy after", problem or "/health failed"
        outcomes[outcome] += 1
        by_kind[kind][outcome] += 1
        timings.append((elapsed, kind, outcome, json.dumps(body)[:300]))
        if problem is not None and (outcome.startswith("5") or "INVALID" in outcome or "not an OpenAI" in outcome
                                    or outcome in ("timeout", "connection lost", "server unhealthy after")):
            problems.append({"kind": kind, "outcome": outcome, "problem": problem, "body": json.dumps(body)[:2000]})
            print(f"PROBLEM [{kind}] {outcome}: {problem[:200]}", flush=True)
        if not healthy:
            break
    timings.sort(reverse=True)
    return {"inputs": sum(outcomes.values()), "outcomes": dict(outcomes),
            "by_kind": {k: dict(v) for k, v in by_kind.items()}, "problems": problems,
            "slowest": [{"seconds": round(t, 2), "kind": k, "outcome": o, "body": b}
                        for t, k, o, b in timings[:SHOW_SLOWEST]]}


def report(result: dict, minutes: float) -> None:
    print(f"\n{result['inputs']} inputs in {minutes:g} min")
    print("| outcome | count |\n|---|---:|")
    for outcome, count in sorted(result["outcomes"].items()):
        print(f"| {outcome} | {count} |")
    print("\n| input | " + " | ".join(sorted(result["outcomes"])) + " |")
    print("|---|" + "---:|" * len(result["outcomes"]))
    for kind, counts in result["by_kind"].items():
        print(f"| {kind} | " + " | ".join(str(counts.get(o, 0)) for o in sorted(result["outcomes"])) + " |")
    print("\nslowest inputs:")
    for row in result["slowest"]:
        print(f"  {row['seconds']:7.2f} s  {row['kind']:12} {row['outcome']:22} {row['body'][:110]}")
    bad = len(result["problems"])
    print(f"\n{bad} problem{'s' if bad != 1 else ''} (5xx, invalid output accepted, hang, non-OpenAI error body)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", default=None, help="a running server (default: start structgen serve)")
    parser.add_argument("--server-args", default="", help="options for the structgen serve it starts")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "fuzz.json")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    make_room_for_deep_input()  # this side writes the deep schemas as JSON too
    with Server(args) as server:
        result = fuzz(server.url, args.minutes, args.seed)
    report(result, args.minutes)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"minutes": args.minutes, "seed": args.seed, **result}, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
