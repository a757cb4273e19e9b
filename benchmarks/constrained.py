#!/usr/bin/env python3
"""Constrained decoding and jump-forward in the engine, measured end to end (issue 5).

SmolLM2-135M-Instruct, float32 on CPU, one engine (`max_num_seqs=32`) for every scenario;
jump-forward is switched per request (`add_request(..., jump_forward=...)`), which is the
engine's own switch applied to that request. Prompts are chat-templated; a schema is shown
in the system prompt when its JSON is under 2,000 characters. The prefix cache is cleared
before every timed batch.

  overhead  32 concurrent requests, exactly 128 output tokens each (ignore_eos), greedy:
            unconstrained vs constrained by a string-heavy schema that cannot finish within
            128 tokens (one required string of minLength 10,500 > 128 tokens x 81 bytes, the
            longest token), with jump-forward on and off (off isolates the mask cost).
            Aggregate output tokens/s; ratio target >= 0.95. Medians over --runs "warm" runs
            (the grammar's lazily built token tables already filled by an earlier request
            with the same schema, as in a service); the first, cold run is reported apart.
  jump      single requests (batch 1, greedy), jump-forward on vs off on the same prompts:
            the profile schema {"name": string, "age": integer} (8 prompts, max_tokens 64), and
            --calls function-call schemas of maskbench-dev (Glaiveai2K and BFCL files that
            compile, random order; max_tokens 128).
            Per workload: forward passes (engine steps), wall time (sum over the prompts,
            median over runs after one warm-up pass), latency ratio (target >= 1.3x on the
            profile), fast-forwarded share of output tokens (num_forced_tokens / tokens)
            vs share of forward passes saved (they should be about equal). Canonical tokens
            can change what a greedy model writes next, so outputs on and off may differ:
            the table also gives steps saved per output token, and forced vs saved shares
            on the requests whose text came out the same. Outputs that stopped must parse
            and validate with jsonschema.
  validate  --limit maskbench-dev schemas that compile (random order, --seed), sampled at
            temperature 1.0 (seeded), max_tokens --max-tokens, 32 running at a time
            (continuous batching), with jump-forward on and off; plus 4 seeds each of regex
            (date, time, phone number, email, IPv4) and choice requests. Every output that stopped
            must validate (jsonschema with its format checker / re.fullmatch / membership),
            every output cut by length must be flagged `incomplete`, and a fresh matcher
            must accept every output's tokens (jump-forward must never leave the grammar).
            Failures are listed with their schema file names.
  baseline  the users' baseline: transformers `generate` with xgrammar's transformers
            logits processor (`xgrammar.contrib.hf.LogitsProcessor`, one compiled grammar
            per row) vs the engine, on the same 16 prompts and function-call schemas, greedy,
            128 new tokens at most. transformers runs the 16 as one left-padded batch (the
            batch decodes until its longest row ends; only each row's own tokens, up to and
            including EOS, are counted), and again one request at a time (what a service
            calling `generate` per request does). xgrammar compiles with
            any_whitespace=False and strict_mode=False, i.e. the same language as
            structgen's default (json.dumps separators, undeclared properties allowed by
            default); compiles are done before timing on both sides. Aggregate output
            tokens/s ratio (target >= 3x; the engine with jump-forward off is shown too) and
            validity of both. With --load-format dummy (a GPU run), transformers gets the
            same shape with its own random weights in bf16: throughput compares, texts not.

Prints a markdown table (and every failure), writes benchmarks/results/constrained.json
(--out). The machine's cores are shared: --threads 1 disturbs neighbours less while
developing; small sizes: --concurrency/--length (overhead), --calls, --limit,
--max-tokens, --baseline-requests.

    python benchmarks/constrained.py                          # everything, 3 runs
    python benchmarks/constrained.py --scenarios jump,baseline --runs 5
    python benchmarks/constrained.py --scenarios validate --limit 40 --max-tokens 128
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import structgen  # noqa: E402
from structgen import default_model, validation  # noqa: E402
from structgen.chat import render_chat  # noqa: E402
from structgen.engine import Engine, EngineConfig, SamplingParams  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "constrained.json"
MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench-dev"
CALL_PREFIXES = ("Glaiveai2K", "BFCL_")

PROFILE = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
           "required": ["name", "age"], "additionalProperties": False}
PROFILE_PROMPTS = ["Describe a person.", "Describe a person named Ann.", "Describe a famous scientist.",
                   "Describe your neighbour.", "Describe a retired sailor.", "Describe a young chess player.",
                   "Describe the oldest person you know.", "Describe a fictional detective."]
STRING_HEAVY = {"type": "object", "properties": {"text": {"type": "string", "minLength": 10500}},
                "required": ["text"], "additionalProperties": False}
TOPICS = ["a dragon", "the sea", "a lost key", "Mars", "a robot", "winter", "a small town", "a chef",
          "a library", "the moon", "a violin", "a storm", "a forest", "a train", "an old map", "a cat",
          "a lighthouse", "a desert", "a king", "a garden", "a bridge", "a clock", "a pirate", "snow",
          "a mountain", "a river", "a painter", "a festival", "a spaceship", "a bakery", "a wolf", "a mirror"]
REGEXES = [
    ("date", r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", "When was the Eiffel Tower finished? Date as YYYY-MM-DD."),
    ("time", r"([01]\d|2[0-3]):[0-5]\d", "What time is lunch? Answer as HH:MM."),
    ("phone", r"\(\d{3}\) \d{3}-\d{4}", "Give me a US phone number."),
    ("email", r"[a-z0-9._]+@[a-z0-9]+\.(com|org|net)", "Give me an email address for John Smith."),
    ("ipv4", r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)", "Give me the IP address of a home router."),
]
CHOICES = [
    (["positive", "negative", "neutral"], "Classify the sentiment: I loved this movie!"),
    (["yes", "no"], "Is Paris in France? Answer yes or no."),
    (["red", "green", "blue"], "What color is the sky: red, green or blue?"),
    (["Python", "JavaScript", "Rust", "Go"], "Which language is best for data science?"),
]
SEEDS_PER_PATTERN = 4


# -- prompts, schemas, checks -----------------------------------------------------------


def chat_ids(engine: Engine, text: str, schema=None) -> list[int]:
    """A chat prompt; the schema goes into the system prompt when it is short."""
    system = None
    if schema is not None:
        shown = json.dumps(schema)
        system = "Reply with JSON" + (f" following this schema: {shown}" if len(shown) < 2000 else ".")
    return engine.tokenizer.encode(render_chat(engine.tokenizer, text, system), add_special_tokens=False)


def maskbench_files(seed: int, prefixes: tuple[str, ...] = ()) -> list[Path]:
    files = sorted(p for p in MASKBENCH.glob("*.json") if not prefixes or p.name.startswith(prefixes))
    random.Random(seed).shuffle(files)
    return files


def compile_schemas(engine: Engine, files, count: int, desc: str) -> tuple[list[dict], dict]:
    """The first `count` files whose schema compiles; refusals (StructgenError) and other
    exceptions (which would be bugs) are counted."""
    picked, refused, crashed = [], 0, []
    bar = tqdm(total=count, desc=desc)
    start = time.perf_counter()
    for path in files:
        if len(picked) == count:
            break
        schema = json.loads(path.read_text())["schema"]
        try:
            grammar = structgen.compile_json_schema(schema, engine.vocab)
        except structgen.StructgenError:
            refused += 1
            continue
        except Exception as exc:  # noqa: BLE001 - a compiler bug, reported
            crashed.append(f"{path.name}: {type(exc).__name__}: {exc}"[:300])
            continue
        picked.append({"file": path.name, "schema": schema, "grammar": grammar})
        bar.update(1)
    bar.close()
    return picked, {"compiled": len(picked), "refused": refused, "crashed": crashed,
                    "seconds": time.perf_counter() - start}


def function_prompt(item: dict) -> str:
    """'Call <function>' for Glaive files (name in the file name) and BFCL (top-level keys)."""
    name = item["file"]
    if name.startswith("Glaiveai2K---"):
        fn = name.removeprefix("Glaiveai2K---").rsplit("_", 1)[0]
    else:
        fn = ", ".join(item["schema"].get("properties", {})) or "the function"
    return f"Call {fn} with realistic example arguments."


def schema_error(text: str, schema) -> str | None:
    """None when `text` is JSON that validates against `schema` (formats checked too;
    numbers read as exact decimals, see structgen.validation)."""
    return validation.schema_error(text, schema, formats=True)


def replay_error(grammar, token_ids: list[int], stopped: bool) -> str | None:
    """A fresh matcher must accept every output token (and be accepting after a stop)."""
    matcher = grammar.matcher()
    for i, token in enumerate(token_ids):
        if not matcher.accept_token(token):
            return f"token {i} ({token}) refused on replay"
    if stopped and not matcher.is_accepting():
        return "stopped but the matcher is not accepting"
    return None


# -- driving the engine -----------------------------------------------------------------


def run_requests(engine: Engine, requests: list[tuple], jump: bool, desc: str | None = None):
    """Submit (prompt ids, params, grammar) requests at once and step until all finish.
    Returns (outputs in order, seconds, engine steps)."""
    engine.blocks.reset_prefix_cache()
    steps0 = engine.stats().steps
    bar = tqdm(total=len(requests), desc=desc, leave=False) if desc else None
    start = time.perf_counter()
    ids = [engine.add_request(p, sp, grammar=g, jump_forward=jump) for p, sp, g in requests]
    final = {}
    while len(final) < len(ids):
        for out in engine.step():
            if out.finished:
                final[out.request_id] = out
                if bar:
                    bar.update(1)
    elapsed = time.perf_counter() - start
    if bar:
        bar.close()
    return [final[i] for i in ids], elapsed, engine.stats().steps - steps0


def output_tokens(outs) -> int:
    return sum(len(o.token_ids) for o in outs)


# -- overhead ---------------------------------------------------------------------------


def scenario_overhead(engine: Engine, runs: int, concurrency: int = 32, length: int = 128) -> dict:
    assert length * max(map(len, engine.vocab.token_bytes)) < STRING_HEAVY["properties"]["text"]["minLength"]
    params = SamplingParams(max_tokens=length, temperature=0.0, ignore_eos=True)
    prompts = [chat_ids(engine, f"Write a long story about {t}.", STRING_HEAVY) for t in TOPICS[:concurrency]]
    variants = {"unconstrained": (False, False), "constrained": (True, True),
                "constrained_no_jump": (True, False)}
    result = {name: {"tok_s": [], "mask_s": []} for name in variants}
    result["concurrency"], result["length"] = concurrency, length
    for run in tqdm(range(runs + 1), desc=f"overhead: {concurrency} x {length} tokens, 3 variants"):
        for name, (constrained, jump) in variants.items():
            if run == 0 and constrained:
                structgen.clear_cache()  # a cold grammar: empty token tables
            grammar = structgen.compile_json_schema(STRING_HEAVY, engine.vocab) if constrained else None
            outs, elapsed, steps = run_requests(engine, [(p, params, grammar) for p in prompts], jump)
            assert all(len(o.token_ids) == length for o in outs), f"an output is not {length} tokens long"
            assert all(o.finish_reason == "length" for o in outs)
            tok_s = output_tokens(outs) / elapsed
            mask_s = sum(o.metrics.mask_time_s for o in outs)
            if run == 0:
                result[name].update(cold_tok_s=tok_s, cold_mask_s=mask_s)
            else:
                result[name]["tok_s"].append(tok_s)
                result[name]["mask_s"].append(mask_s)
            result[name]["steps"] = steps
            if constrained:
                result[name]["forced_tokens"] = sum(o.metrics.num_forced_tokens for o in outs)
    base = statistics.median(result["unconstrained"]["tok_s"])
    for name in ("constrained", "constrained_no_jump"):
        result[name]["ratio"] = statistics.median(result[name]["tok_s"]) / base
        result[name]["cold_ratio"] = result[name]["cold_tok_s"] / result["unconstrained"]["cold_tok_s"]
    return result


# -- jump-forward -----------------------------------------------------------------------


def jump_workloads(engine: Engine, calls: int, seed: int) -> dict[str, list[dict]]:
    profile = structgen.compile_json_schema(PROFILE, engine.vocab)
    items, _ = compile_schemas(engine, maskbench_files(seed, CALL_PREFIXES), calls,
                               "compile function-call schemas")
    return {
        "profile": [{"file": "profile", "schema": PROFILE, "grammar": profile,
                     "prompt": chat_ids(engine, text, PROFILE), "max_tokens": 64} for text in PROFILE_PROMPTS],
        "function_calls": [{**it, "prompt": chat_ids(engine, function_prompt(it), it["schema"]),
                            "max_tokens": 128} for it in items],
    }


def run_single(engine: Engine, item: dict, jump: bool):
    params = SamplingParams(max_tokens=item["max_tokens"], temperature=0.0)
    outs, elapsed, steps = run_requests(engine, [(item["prompt"], params, item["grammar"])], jump)
    return outs[0], elapsed, steps


def measure_workload(engine: Engine, items: list[dict], runs: int, name: str) -> dict:
    for item in tqdm(items, desc=f"jump/{name}: warm-up", leave=False):
        run_single(engine, item, True)
        run_single(engine, item, False)
    wall = {True: [], False: []}
    last = {}
    for _ in tqdm(range(runs), desc=f"jump/{name}: {len(items)} requests, on/off"):
        total = {True: 0.0, False: 0.0}
        for i, item in enumerate(items):
            for jump in (True, False):
                out, elapsed, steps = run_single(engine, item, jump)
                total[jump] += elapsed
                last[i, jump] = (out, steps)
        for jump in (True, False):
            wall[jump].append(total[jump])
    return summarize_jump(items, wall, last)


def summarize_jump(items: list[dict], wall: dict, last: dict) -> dict:
    res = {"requests": len(items), "wall_on_s": wall[True], "wall_off_s": wall[False]}
    for jump, key in ((True, "on"), (False, "off")):
        outs = [last[i, jump][0] for i in range(len(items))]
        res[f"steps_{key}"] = sum(last[i, jump][1] for i in range(len(items)))
        res[f"tokens_{key}"] = output_tokens(outs)
        stopped = [(o, it) for o, it in zip(outs, items) if o.finish_reason == "stop"]
        res[f"stopped_{key}"] = len(stopped)
        res[f"invalid_{key}"] = [f"{it['file']}: {err}" for o, it in stopped
                                 if (err := schema_error(o.text, it["schema"]))]
    on = [last[i, True][0] for i in range(len(items))]
    res["forced_tokens"] = sum(o.metrics.num_forced_tokens for o in on)
    res["jumps"] = sum(o.metrics.num_jumps for o in on)
    res["forced_share"] = res["forced_tokens"] / max(1, res["tokens_on"])
    res["steps_saved_share"] = 1 - res["steps_on"] / max(1, res["steps_off"])
    # Outputs on and off may differ (canonical tokens change what a greedy model writes next):
    # compare per output token, and on the requests whose text came out the same.
    res["steps_saved_per_token"] = 1 - (res["steps_on"] / res["tokens_on"]) / (res["steps_off"] / res["tokens_off"])
    same = [i for i in range(len(items)) if last[i, True][0].text == last[i, False][0].text]
    res["same_text"] = len(same)
    steps_same_off = sum(last[i, False][1] for i in same)
    res["same_text_steps_saved_share"] = 1 - sum(last[i, True][1] for i in same) / max(1, steps_same_off)
    res["same_text_forced_share"] = sum(last[i, True][0].metrics.num_forced_tokens for i in same) / max(
        1, sum(len(last[i, True][0].token_ids) for i in same))
    res["latency_ratio"] = statistics.median(wall[False]) / statistics.median(wall[True])
    res["per_token_latency_ratio"] = res["latency_ratio"] * res["tokens_on"] / res["tokens_off"]
    return res


def scenario_jump(engine: Engine, runs: int, calls: int, seed: int) -> dict:
    workloads = jump_workloads(engine, calls, seed)
    result = {"files": [it["file"] for it in workloads["function_calls"]]}
    for name, items in workloads.items():
        result[name] = measure_workload(engine, items, runs, name)
    return result


# -- validate ---------------------------------------------------------------------------


def pattern_requests(engine: Engine) -> list[dict]:
    items = []
    for name, pattern, prompt in REGEXES:
        grammar = structgen.compile_regex(pattern, engine.vocab)
        items += [{"file": f"regex:{name}", "kind": "regex", "pattern": pattern, "grammar": grammar,
                   "prompt": chat_ids(engine, prompt)}] * SEEDS_PER_PATTERN
    for choices, prompt in CHOICES:
        grammar = structgen.compile_choice(choices, engine.vocab)
        items += [{"file": f"choice:{'|'.join(choices)}", "kind": "choice", "choices": choices,
                   "grammar": grammar, "prompt": chat_ids(engine, prompt)}] * SEEDS_PER_PATTERN
    return items


def check_output(item: dict, out) -> str | None:
    """Why this output breaks the contract, or None."""
    stopped = out.finish_reason == "stop"
    if out.finish_reason == "error":
        return f"finish_reason error: {out.error}"
    if not stopped:
        return None if out.incomplete else f"finish_reason {out.finish_reason} but not flagged incomplete"
    replay = replay_error(item["grammar"], out.token_ids, stopped)
    if replay:
        return replay
    kind = item.get("kind", "json")
    if kind == "regex":
        return None if re.fullmatch(item["pattern"], out.text) else f"{out.text!r} does not match"
    if kind == "choice":
        return None if out.text in item["choices"] else f"{out.text!r} is not a choice"
    return schema_error(out.text, item["schema"])


def validate_mode(engine: Engine, items: list[dict], jump: bool, max_tokens: int) -> dict:
    requests = [(it["prompt"], SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=i), it["grammar"])
                for i, it in enumerate(items)]
    outs, elapsed, steps = run_requests(engine, requests, jump,
                                        desc=f"validate, jump-forward {'on' if jump else 'off'}")
    res = {"seconds": elapsed, "steps": steps, "tokens": output_tokens(outs),
           "forced_tokens": sum(o.metrics.num_forced_tokens for o in outs)}
    for kind in ("json", "pattern"):
        checked = [(it, o, check_output(it, o)) for it, o in zip(items, outs)
                   if (it.get("kind", "json") == "json") == (kind == "json")]
        res[kind] = {"requests": len(checked),
                     "stopped": sum(o.finish_reason == "stop" for _, o, _ in checked),
                     "validated": sum(o.finish_reason == "stop" and not err for _, o, err in checked),
                     "length": sum(o.finish_reason == "length" for _, o, _ in checked),
                     "failures": [f"{it['file']}: {err}" for it, _, err in checked if err]}
    return res


def scenario_validate(engine: Engine, limit: int, max_tokens: int, seed: int) -> dict:
    schemas, compile_stats = compile_schemas(engine, maskbench_files(seed), limit, "compile maskbench-dev")
    items = [{**it, "prompt": chat_ids(engine, "Produce an example.", it["schema"])} for it in schemas]
    items += pattern_requests(engine)
    result = {"compile": compile_stats, "max_tokens": max_tokens, "files": [it["file"] for it in schemas]}
    for jump, key in ((True, "jump_on"), (False, "jump_off")):
        result[key] = validate_mode(engine, items, jump, max_tokens)
    return result


# -- baseline: transformers + xgrammar --------------------------------------------------


def xgrammar_compile(engine: Engine, vocab_size: int, schemas: list) -> list:
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(engine.tokenizer, vocab_size=vocab_size,
                                              stop_token_ids=sorted(engine.eos_token_ids))
    compiler = xgr.GrammarCompiler(info)
    return [compiler.compile_json_schema(json.dumps(s), any_whitespace=False, strict_mode=False)
            for s in schemas]


def pick_baseline_items(engine: Engine, vocab_size: int, count: int, seed: int):
    """The first `count` function-call schemas that both structgen and xgrammar compile
    (items, xgrammar grammars, xgrammar refusals)."""
    items, grammars, refused = [], [], []
    candidates, _ = compile_schemas(engine, maskbench_files(seed, CALL_PREFIXES), 3 * count,
                                    "compile baseline schemas")
    for it in candidates:
        try:
            grammars += xgrammar_compile(engine, vocab_size, [it["schema"]])
        except Exception as exc:  # noqa: BLE001 - xgrammar refuses it: not comparable
            refused.append(f"{it['file']}: {exc}"[:200])
            continue
        items.append({**it, "prompt": chat_ids(engine, function_prompt(it), it["schema"])})
        if len(items) == count:
            break
    return items, grammars, refused


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@torch.inference_mode()
def hf_padded_generate(model, prompts: list[list[int]], xg_grammars: list, max_new: int, eos: list[int]):
    """One left-padded greedy batch with xgrammar's logits processor; per-row new tokens
    (cut after the first EOS) and seconds."""
    from xgrammar.contrib.hf import LogitsProcessor

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), eos[0], dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.tensor(p)
        mask[row, width - len(p):] = 1
    ids, mask = ids.to(model.device), mask.to(model.device)
    processor = LogitsProcessor(list(xg_grammars))  # single use: a new one per generate
    synchronize()
    start = time.perf_counter()
    out = model.generate(ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                         logits_processor=[processor], eos_token_id=eos, pad_token_id=eos[0])
    synchronize()
    elapsed = time.perf_counter() - start
    rows = []
    for row in out[:, width:].tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        rows.append(row[:end])
    return rows, elapsed


def hf_sequential_generate(model, prompts: list[list[int]], xg_grammars: list, max_new: int, eos: list[int]):
    """The same requests one at a time, as a service calling `generate` per request does:
    per-row new tokens (cut after the first EOS) and seconds for all of them."""
    rows, elapsed = [], 0.0
    for prompt, grammar in zip(prompts, xg_grammars):
        row, seconds = hf_padded_generate(model, [prompt], [grammar], max_new, eos)
        rows += row
        elapsed += seconds
    return rows, elapsed


def hf_validity(engine: Engine, rows: list[list[int]], items: list[dict], eos: list[int]) -> dict:
    stopped = [(r, it) for r, it in zip(rows, items) if r and r[-1] in eos]
    texts = [engine.tokenizer.decode(r[:-1], skip_special_tokens=True) for r, _ in stopped]
    invalid = [f"{it['file']}: {err}" for t, (_, it) in zip(texts, stopped) if (err := schema_error(t, it["schema"]))]
    return {"stopped": len(stopped), "invalid": invalid, "texts": [engine.tokenizer.decode(r, skip_special_tokens=True)
                                                                    for r in rows]}


def engine_validity(outs, items) -> dict:
    stopped = [(o, it) for o, it in zip(outs, items) if o.finish_reason == "stop"]
    return {"stopped": len(stopped),
            "invalid": [f"{it['file']}: {err}" for o, it in stopped if (err := schema_error(o.text, it["schema"]))],
            "texts": [o.text for o in outs]}


def baseline_model(model: str | None, load_format: str):
    """transformers' side of the baseline: the same weights as the engine (the embedded
    SmolLM2, or --model, float32 on CPU), or with dummy weights the same shape with
    transformers' own random weights (bf16 on a GPU): the two sides then write different
    tokens, so only the throughput compares, not the texts."""
    from transformers import AutoConfig, AutoModelForCausalLM

    on_gpu = torch.cuda.is_available()
    dtype = torch.bfloat16 if on_gpu else torch.float32
    if load_format == "dummy":
        with torch.device("cuda" if on_gpu else "cpu"):
            hf = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model), dtype=dtype)
        return hf.eval()
    folder = model or default_model.gguf_as_hf_dir(default_model.default_gguf_path())
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
    return hf.to("cuda" if on_gpu else "cpu").eval()


def scenario_baseline(engine: Engine, hf, runs: int, count: int, seed: int, max_new: int = 128) -> dict:
    eos = sorted(engine.eos_token_ids)
    items, xg, xg_refused = pick_baseline_items(engine, hf.config.vocab_size, count, seed)
    prompts = [it["prompt"] for it in items]
    params = SamplingParams(max_tokens=max_new, temperature=0.0)
    requests = [(it["prompt"], params, it["grammar"]) for it in items]
    hf_padded_generate(hf, prompts[:2], xg[:2], 4, eos)  # warm up both
    run_requests(engine, requests[:2], True)
    res = {"files": [it["file"] for it in items], "xgrammar_refused": xg_refused, "engine_tok_s": [], "engine_s": [],
           "engine_no_jump_tok_s": [], "hf_tok_s": [], "hf_s": [], "hf_sequential_tok_s": []}
    for _ in tqdm(range(runs), desc=f"baseline: {len(items)} requests, engine vs transformers+xgrammar"):
        outs, elapsed, _ = run_requests(engine, requests, True)
        res["engine_s"].append(elapsed)
        res["engine_tok_s"].append(output_tokens(outs) / elapsed)
        outs_off, elapsed_off, _ = run_requests(engine, requests, False)
        res["engine_no_jump_tok_s"].append(output_tokens(outs_off) / elapsed_off)
        rows, hf_elapsed = hf_padded_generate(hf, prompts, xg, max_new, eos)
        res["hf_s"].append(hf_elapsed)
        res["hf_tok_s"].append(sum(map(len, rows)) / hf_elapsed)
        seq_rows, seq_elapsed = hf_sequential_generate(hf, prompts, xg, max_new, eos)
        res["hf_sequential_tok_s"].append(sum(map(len, seq_rows)) / seq_elapsed)
    res.update(engine_tokens=output_tokens(outs), hf_tokens=sum(map(len, rows)),
               engine_valid=engine_validity(outs, items), hf_valid=hf_validity(engine, rows, items, eos))
    res["same_text"] = sum(a == b for a, b in zip(res["engine_valid"]["texts"], res["hf_valid"]["texts"]))
    res["ratio"] = statistics.median(res["engine_tok_s"]) / statistics.median(res["hf_tok_s"])
    res["wall_ratio"] = statistics.median(res["hf_s"]) / statistics.median(res["engine_s"])
    res["sequential_ratio"] = statistics.median(res["engine_tok_s"]) / statistics.median(res["hf_sequential_tok_s"])
    del hf
    return res


# -- report -----------------------------------------------------------------------------


def overhead_rows(r: dict) -> list[str]:
    med = statistics.median
    base = med(r["unconstrained"]["tok_s"])
    rows = [f"| overhead: {r['concurrency']} x {r['length']} tokens, unconstrained (tok/s) | {base:.1f} | | |"]
    for name, label in (("constrained", "constrained, jump-forward on"),
                        ("constrained_no_jump", "constrained, jump-forward off (mask cost)")):
        v = r[name]
        rows.append(f"| overhead: {label} (tok/s; cold first run {v['cold_tok_s']:.1f}, "
                    f"{v['cold_ratio']:.2f}x) | {med(v['tok_s']):.1f} | {v['ratio']:.3f}x | >= 0.95x |")
    return rows


def jump_rows(r: dict) -> list[str]:
    rows = []
    for name, target in (("profile", ">= 1.3x"), ("function_calls", "")):
        v = r[name]
        med = statistics.median
        rows.append(
            f"| jump/{name} ({v['requests']} req, batch 1): wall on/off {med(v['wall_on_s']):.2f}/"
            f"{med(v['wall_off_s']):.2f} s, steps on/off {v['steps_on']}/{v['steps_off']}, "
            f"tokens on/off {v['tokens_on']}/{v['tokens_off']} | "
            f"forced {100 * v['forced_share']:.1f}% of tokens; steps saved {100 * v['steps_saved_share']:.1f}% "
            f"({100 * v['steps_saved_per_token']:.1f}% per token) | "
            f"{v['latency_ratio']:.2f}x lower latency ({v['per_token_latency_ratio']:.2f}x per token) | {target} |")
        rows.append(
            f"| jump/{name}: same text on/off {v['same_text']}/{v['requests']} (on those: forced "
            f"{100 * v['same_text_forced_share']:.1f}%, steps saved {100 * v['same_text_steps_saved_share']:.1f}%); "
            f"stopped on/off {v['stopped_on']}/{v['stopped_off']} | invalid on/off "
            f"{len(v['invalid_on'])}/{len(v['invalid_off'])} | | 0 invalid |")
    return rows


def validate_rows(r: dict) -> list[str]:
    c = r["compile"]
    rows = [(f"| validate: compiled {c['compiled']} schemas, refused {c['refused']}, compiler crashes "
             f"{len(c['crashed'])} ({c['seconds']:.0f} s) | jump-forward on {r['jump_on']['seconds']:.0f} s, "
             f"off {r['jump_off']['seconds']:.0f} s | | 0 crashes |")]
    for key in ("jump_on", "jump_off"):
        for kind in ("json", "pattern"):
            v = r[key][kind]
            label = f"{c['compiled']} maskbench schemas" if kind == "json" else "regex + choice"
            rows.append(f"| validate {key.replace('_', '-')}, {label}: stopped / validated / length "
                        f"| {v['stopped']} / {v['validated']} / {v['length']} of {v['requests']} "
                        f"| {len(v['failures'])} failing | 0 |")
    return rows


def baseline_rows(r: dict) -> list[str]:
    med = statistics.median
    e, h = r["engine_valid"], r["hf_valid"]
    n = len(r["files"])
    return [
        (f"| baseline: {n} requests, engine vs transformers+xgrammar (output tok/s; engine jump off "
         f"{med(r['engine_no_jump_tok_s']):.1f}) | {med(r['engine_tok_s']):.1f} vs {med(r['hf_tok_s']):.1f} "
         f"| {r['ratio']:.2f}x (wall {r['wall_ratio']:.2f}x) | >= 3x |"),
        (f"| baseline: the same {n} requests vs transformers+xgrammar one request at a time (output tok/s) "
         f"| {med(r['engine_tok_s']):.1f} vs {med(r['hf_sequential_tok_s']):.1f} | {r['sequential_ratio']:.2f}x | >= 3x |"),
        (f"| baseline validity: stopped engine {e['stopped']}/{n}, transformers {h['stopped']}/{n}; same text "
         f"{r['same_text']}/{n} | invalid {len(e['invalid'])} vs {len(h['invalid'])} | | 0 |"),
    ]


def table(results: dict) -> str:
    rows = ["| scenario | measured | ratio / result | target |", "|---|---|---|---|"]
    if "overhead" in results:
        rows += overhead_rows(results["overhead"])
    if "jump" in results:
        rows += jump_rows(results["jump"])
    if "validate" in results:
        rows += validate_rows(results["validate"])
    if "baseline" in results:
        rows += baseline_rows(results["baseline"])
    return "\n".join(rows)


def failures_report(results: dict) -> str:
    lines = []
    for key in ("jump_on", "jump_off"):
        for kind in ("json", "pattern"):
            for f in results.get("validate", {}).get(key, {}).get(kind, {}).get("failures", []):
                lines.append(f"validate {key} {kind}: {f}")
    for name in ("profile", "function_calls"):
        r = results.get("jump", {}).get(name, {})
        lines += [f"jump/{name} {k}: {f}" for k in ("invalid_on", "invalid_off") for f in r.get(k, [])]
    b = results.get("baseline", {})
    lines += [f"baseline {side}: {f}" for side in ("engine_valid", "hf_valid") for f in b.get(side, {}).get("invalid", [])]
    return "\n".join(lines)


def environment() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=False).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "structgen"], cwd=ROOT,
                                capture_output=True, text=True, check=False).stdout.strip())
    from importlib.metadata import version

    env = {"commit": commit, "structgen_dirty": dirty, "python": platform.python_version(),
           "torch": torch.__version__, "transformers": version("transformers"), "xgrammar": version("xgrammar"),
           "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "load_avg": os.getloadavg(),
           "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    return env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default="overhead,jump,validate,baseline")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32, help="requests in the overhead scenario")
    parser.add_argument("--length", type=int, default=128, help="output tokens per request (overhead)")
    parser.add_argument("--calls", type=int, default=20, help="function-call schemas in the jump scenario")
    parser.add_argument("--limit", type=int, default=300, help="maskbench schemas in the validate scenario")
    parser.add_argument("--max-tokens", type=int, default=256, help="max_tokens in the validate scenario")
    parser.add_argument("--baseline-requests", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--model", default=None,
                        help="model folder or GGUF (default: the embedded SmolLM2); with --load-format "
                             "dummy, a folder whose config.json gives the shape and whose tokenizer is used")
    parser.add_argument("--load-format", default="auto", choices=["auto", "dummy"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    scenarios = args.scenarios.split(",")
    started = time.perf_counter()
    if args.threads:
        torch.set_num_threads(args.threads)

    # A fixed KV pool: 1 GiB on CPU; 16 GiB on a GPU (over 100k tokens of an 8B shape),
    # which leaves room beside the engine for the baseline's transformers model.
    kv_bytes = (16 << 30) if torch.cuda.is_available() else 1 << 30
    engine = Engine(EngineConfig(model=args.model, load_format=args.load_format, kv_cache_bytes=kv_bytes,
                                 max_num_seqs=32))
    results: dict = {"environment": environment(), "model": engine.model_name, "runs": args.runs,
                     "args": {k: str(v) for k, v in vars(args).items()}}
    runners = {
        "overhead": lambda: scenario_overhead(engine, args.runs, args.concurrency, args.length),
        "jump": lambda: scenario_jump(engine, args.runs, args.calls, args.seed),
        "validate": lambda: scenario_validate(engine, args.limit, args.max_tokens, args.seed),
        "baseline": lambda: scenario_baseline(engine, baseline_model(args.model, args.load_format), args.runs,
                                              args.baseline_requests, args.seed),
    }
    results["load_avg_after"] = {}  # the machine is shared: how busy it was
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in [n for n in runners if n in scenarios]:
        results[name] = runners[name]()
        results["load_avg_after"][name] = os.getloadavg()
        # after every scenario, so that a later failure keeps what was measured
        args.out.write_text(json.dumps(results, indent=1, default=str))
    results["seconds"] = time.perf_counter() - started
    print()
    print(table(results))
    failures = failures_report(results)
    if failures:
        print("\nfailures:\n" + failures)
    print(f"\ntook {results['seconds'] / 60:.1f} min")
    args.out.write_text(json.dumps(results, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
