#!/usr/bin/env python3
"""Engine throughput against transformers `generate`, on the same weights, in one run.

Scenarios (SmolLM2-135M-Instruct, float32 on CPU unless a GPU is present):

  single   one request, 128 new tokens, greedy: decode tokens/s of the engine and of
           transformers `generate` (medians of --runs runs, interleaved).
  batch    32 requests with mixed prompt (20-500 tokens) and output (16-256 tokens)
           lengths submitted at once: aggregate output tokens/s of the engine, of
           transformers `generate` run request by request, and of `generate` on the 32
           as one left-padded batch (which must decode until the longest output is
           done; only the tokens each request asked for are counted).
  prefix   time to first token of a request sharing a 1,000-token prefix with a
           finished one, with prefix caching on and off (two engines).
  quantized  CPU decoding in each weight mode (float, native: the GGUF file's own 4- and
           8-bit layers, int8, int4) against llama.cpp on the same GGUF file with the same
           threads, in one run: one chat request of 64 free tokens, one constrained by a
           four-property JSON schema, and 16 constrained requests at once against
           llama.cpp serving them one after another (benchmarks/llama_cpp_peer.py;
           skipped with a note without llama-cpp-python). With --gguf-type T (Q4_K_M,
           ...), float and native against llama.cpp on the embedded file as llama.cpp's
           quantizer rewrites it in type T (engine.json's "quantized_T").

The first three compare the float engine with transformers on the same float weights.

Outputs are forced to their lengths (ignore_eos / min_new_tokens) so that every system
does the same work. Prompts are slices of real text; the engine's prefix cache is
cleared between runs so that a run never profits from the previous one.

    python benchmarks/engine.py                 # all scenarios, 3 runs
    python benchmarks/engine.py --scenarios single,prefix --runs 5
    python benchmarks/engine.py --scenarios quantized --threads 2
    python benchmarks/engine.py --scenarios quantized --threads 2 --gguf-type Q4_K_M
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import tempfile
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import llama_cpp_peer  # noqa: E402
from benchmarks.quality import weight_bytes  # noqa: E402
from structgen import compile_json_schema, default_model  # noqa: E402
from structgen.engine.config import EngineConfig  # noqa: E402
from structgen.engine.engine import Engine  # noqa: E402
from structgen.engine.sampling_params import SamplingParams  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "engine.json"


def corpus_tokens(tokenizer) -> list[int]:
    """Real text to cut prompts from: the project's own docs and the JSON test data."""
    texts = [p.read_text(errors="ignore") for p in sorted(ROOT.glob("**/*.md"))[:20]]
    shared = ROOT.parent / "shared"
    texts += [p.read_text(errors="ignore") for p in sorted((shared / "data").glob("**/*.json"))[:40]]
    return tokenizer.encode("\n".join(texts))


def make_prompts(tokens: list[int], lengths: list[int], rng: random.Random) -> list[list[int]]:
    out = []
    for n in lengths:
        start = rng.randrange(0, len(tokens) - n)
        out.append(tokens[start:start + n])
    return out


# -- the two systems -------------------------------------------------------------------


def engine_generate(engine: Engine, prompts, out_lens) -> tuple[float, int]:
    """Seconds for the engine to finish every request, and output tokens produced."""
    engine.blocks.reset_prefix_cache()
    params = [SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True) for n in out_lens]
    start = time.perf_counter()
    outs = engine.generate(prompts, params)
    elapsed = time.perf_counter() - start
    produced = sum(len(o.token_ids) for o in outs)
    assert produced == sum(out_lens)
    return elapsed, produced


@torch.inference_mode()
def hf_generate(model, prompt: list[int], out_len: int) -> float:
    start = time.perf_counter()
    out = model.generate(torch.tensor([prompt]), max_new_tokens=out_len, min_new_tokens=out_len,
                         do_sample=False, pad_token_id=0)
    elapsed = time.perf_counter() - start
    assert out.shape[1] - len(prompt) == out_len
    return elapsed


@torch.inference_mode()
def hf_generate_padded(model, prompts, out_lens, pad_id: int) -> float:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.tensor(p)
        mask[row, width - len(p):] = 1
    longest = max(out_lens)
    start = time.perf_counter()
    model.generate(ids, attention_mask=mask, max_new_tokens=longest, min_new_tokens=longest,
                   do_sample=False, pad_token_id=pad_id)
    return time.perf_counter() - start


# -- scenarios -------------------------------------------------------------------------


def scenario_single(engine, hf, tokens, runs, rng) -> dict:
    prompt = make_prompts(tokens, [20], rng)[0]
    engine_generate(engine, [prompt], [8])  # warm up both
    hf_generate(hf, prompt, 8)
    ours, theirs = [], []
    for _ in tqdm(range(runs), desc="single request, 128 tokens"):
        elapsed, produced = engine_generate(engine, [prompt], [128])
        ours.append(produced / elapsed)
        theirs.append(128 / hf_generate(hf, prompt, 128))
    return {"engine_tok_s": ours, "hf_tok_s": theirs,
            "ratio": statistics.median(ours) / statistics.median(theirs)}


def scenario_batch(engine, hf, tokens, runs, rng, sequential_runs: int) -> dict:
    prompt_lens = [rng.randint(20, 500) for _ in range(32)]
    out_lens = [rng.randint(16, 256) for _ in range(32)]
    prompts = make_prompts(tokens, prompt_lens, rng)
    total = sum(out_lens)
    ours, padded, sequential = [], [], []
    for _ in tqdm(range(runs), desc="32 mixed requests: engine + padded batch"):
        elapsed, _ = engine_generate(engine, prompts, out_lens)
        ours.append(total / elapsed)
        padded.append(total / hf_generate_padded(hf, prompts, out_lens, pad_id=0))
    for _ in range(sequential_runs):
        elapsed = sum(hf_generate(hf, p, n) for p, n in
                      tqdm(list(zip(prompts, out_lens)), desc="32 requests one by one (transformers)"))
        sequential.append(total / elapsed)
    result = {"prompt_lens": prompt_lens, "out_lens": out_lens, "output_tokens": total,
              "engine_tok_s": ours, "hf_padded_tok_s": padded, "hf_sequential_tok_s": sequential,
              "ratio_vs_padded": statistics.median(ours) / statistics.median(padded)}
    if sequential:
        result["ratio_vs_sequential"] = statistics.median(ours) / statistics.median(sequential)
    return result


def time_to_first_token(engine: Engine, prompt: list[int]) -> float:
    start = time.perf_counter()
    request_id = engine.add_request(prompt, SamplingParams(max_tokens=1, temperature=0.0))
    while True:
        for out in engine.step():
            if out.request_id == request_id and out.token_ids:
                elapsed = time.perf_counter() - start
                while engine.has_unfinished_requests():
                    engine.step()
                return elapsed


def scenario_prefix(engine, engine_no_cache, tokens, runs, rng) -> dict:
    cached, uncached = [], []
    for run in tqdm(range(runs), desc="1,000-token shared prefix"):
        prefix = make_prompts(tokens, [1000], rng)[0]
        for eng, times in ((engine, cached), (engine_no_cache, uncached)):
            eng.blocks.reset_prefix_cache()
            eng.generate([prefix + tokens[:10]], SamplingParams(max_tokens=4, temperature=0.0))
            times.append(time_to_first_token(eng, prefix + tokens[10:30]))
    return {"ttft_cached_s": cached, "ttft_uncached_s": uncached,
            "ratio": statistics.median(cached) / statistics.median(uncached)}


CHAT_PROMPT = "Describe a person in JSON."
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "city": {"type": "string"}, "email": {"type": "string"}},
          "required": ["name", "age", "city", "email"]}
QUANT_MODES = {"float": "float", "native": "native", "int8": "int8", "int4": "int4"}
QUANT_TOKENS = 64
CONCURRENT = 16


def chat_text(engine: Engine) -> str:
    return engine.tokenizer.apply_chat_template([{"role": "user", "content": CHAT_PROMPT}], tokenize=False,
                                                add_generation_prompt=True)


def engine_chat(engine: Engine, requests: int, constrained: bool) -> float:
    """Output tokens/s of `requests` greedy chat requests run at once."""
    grammars = [compile_json_schema(PERSON, engine.vocab) if constrained else None] * requests
    params = SamplingParams(max_tokens=QUANT_TOKENS, temperature=0.0, ignore_eos=not constrained)
    engine.blocks.reset_prefix_cache()
    start = time.perf_counter()
    outs = engine.generate([chat_text(engine)] * requests, params, grammars=grammars)
    return sum(len(o.token_ids) for o in outs) / (time.perf_counter() - start)


def llama_chat(peer, requests: int, constrained: bool) -> float:
    """Output tokens/s of `requests` chat requests served one after another."""
    elapsed = produced = 0
    for _ in range(requests):
        seconds, tokens = peer.chat(CHAT_PROMPT, QUANT_TOKENS, PERSON if constrained else None)
        elapsed, produced = elapsed + seconds, produced + tokens
    return produced / elapsed


QUANT_CASES = {"free": (1, False), "constrained": (1, True), f"{CONCURRENT} constrained": (CONCURRENT, True)}


def scenario_quantized(runs: int, threads: int, gguf: Path | None = None) -> dict:
    """Each weight mode against llama.cpp on the embedded GGUF file, or on `gguf` (then
    float and native only: int8 and int4 quantize the float weights as for any file)."""
    modes = QUANT_MODES if gguf is None else {name: QUANT_MODES[name] for name in ("float", "native")}
    engines = {name: Engine(EngineConfig(model=gguf, quantization=mode, kv_cache_bytes=256 << 20))
               for name, mode in modes.items()}
    note = llama_cpp_peer.unavailable()
    peer = None if note else llama_cpp_peer.LlamaCpp(gguf or default_model.default_gguf_path(), threads)
    for engine in engines.values():  # warm up: first steps, the schema's compile
        engine_chat(engine, 1, True)
    tok_s: dict = {case: {name: [] for name in [*engines, "llama.cpp"]} for case in QUANT_CASES}
    for _ in tqdm(range(runs), desc="quantized CPU decoding vs llama.cpp"):
        for case, (requests, constrained) in QUANT_CASES.items():
            for name, engine in engines.items():
                tok_s[case][name].append(engine_chat(engine, requests, constrained))
            if peer is not None:
                tok_s[case]["llama.cpp"].append(llama_chat(peer, requests, constrained))
    return {"tok_s": tok_s, "threads": threads, "tokens": QUANT_TOKENS, "note": note,
            "weight_mb": {name: weight_bytes(engine.model) / 2**20 for name, engine in engines.items()}}


# -- report ----------------------------------------------------------------------------


def table(results: dict) -> str:
    med = statistics.median
    rows = ["| scenario | structgen | transformers | ratio | target |", "|---|---|---|---|---|"]
    if "single" in results:
        r = results["single"]
        rows.append(f"| 1 request, 128 new tokens (tok/s) | {med(r['engine_tok_s']):.1f} | "
                    f"{med(r['hf_tok_s']):.1f} | {r['ratio']:.2f}x | >= 1.0x |")
    if "batch" in results:
        r = results["batch"]
        if r["hf_sequential_tok_s"]:
            rows.append(f"| 32 mixed requests vs one by one (output tok/s) | {med(r['engine_tok_s']):.1f} | "
                        f"{med(r['hf_sequential_tok_s']):.1f} | {r['ratio_vs_sequential']:.2f}x | >= 4x |")
        rows.append(f"| 32 mixed requests vs padded batch (output tok/s) | {med(r['engine_tok_s']):.1f} | "
                    f"{med(r['hf_padded_tok_s']):.1f} | {r['ratio_vs_padded']:.2f}x | >= 1.5x |")
    if "prefix" in results:
        r = results["prefix"]
        rows.append(f"| TTFT with a cached 1,000-token prefix vs caching off (ms) | "
                    f"{1000 * med(r['ttft_cached_s']):.0f} | {1000 * med(r['ttft_uncached_s']):.0f} (ours, off) | "
                    f"{r['ratio']:.2f}x | <= 0.2x |")
    for key in quantized_parts(results):
        rows += ["", key, quantized_table(results[key])]
    return "\n".join(rows)


def quantized_parts(results: dict) -> list[str]:
    """The results' quantized scenarios: "quantized" (the embedded file), and one
    "quantized_<type>" per file type llama.cpp wrote it in (`--gguf-type`)."""
    return [key for key in results if key == "quantized" or key.startswith("quantized_")]


def quantized_table(r: dict) -> str:
    """Tokens/s per weight mode and case, and each against llama.cpp."""
    med = statistics.median
    names = list(r["weight_mb"])
    rows = [f"| output tok/s ({r['threads']} threads) | " + " | ".join(names) + " | llama.cpp |",
            "|---|" + "---|" * (len(names) + 1)]
    for case, by_system in r["tok_s"].items():
        peer = med(by_system["llama.cpp"]) if by_system["llama.cpp"] else None
        cells = [f"{med(by_system[name]):.1f}" + (f" ({med(by_system[name]) / peer:.2f}x)" if peer else "")
                 for name in names]
        rows.append(f"| {case} | " + " | ".join(cells) + f" | {peer:.1f} |" if peer else
                    f"| {case} | " + " | ".join(cells) + " | - |")
    rows.append("| weights (MB) | " + " | ".join(f"{r['weight_mb'][name]:.0f}" for name in names) + " | |")
    if r["note"]:
        rows.append(f"\n{r['note']}")
    return "\n".join(rows)


def environment() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    import transformers

    return {"commit": commit, "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "machine": platform.processor() or platform.machine(),
            "cpu_count": __import__("os").cpu_count(), "time": time.strftime("%Y-%m-%d %H:%M:%S")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default="single,batch,prefix")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sequential-runs", type=int, default=1,
                        help="runs of the slow one-by-one transformers baseline (0 skips it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads for both engines (0: torch's default, one per core)")
    parser.add_argument("--gguf-type", default="",
                        help="quantized: run every side on the embedded file rewritten by llama.cpp's quantizer "
                             "in this file type (Q4_K_M, ...) instead of the file as it is")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    scenarios = args.scenarios.split(",")
    rng = random.Random(args.seed)

    results: dict = {"environment": environment(), "model": default_model.DEFAULT_MODEL_NAME, "runs": args.runs}
    if "quantized" in scenarios and args.gguf_type:
        with tempfile.TemporaryDirectory() as folder:
            gguf = llama_cpp_peer.requantized(default_model.default_gguf_path(),
                                              Path(folder) / f"model.{args.gguf_type}.gguf", args.gguf_type)
            part = scenario_quantized(args.runs, torch.get_num_threads(), gguf)
        results[f"quantized_{args.gguf_type}"] = {**part, "gguf_type": args.gguf_type}
    elif "quantized" in scenarios:
        results["quantized"] = scenario_quantized(args.runs, torch.get_num_threads())
    if {"single", "batch", "prefix"}.isdisjoint(scenarios):
        return finish(results, args.out)

    from transformers import AutoModelForCausalLM

    engine = Engine(EngineConfig(kv_cache_bytes=512 << 20, quantization="float"))  # transformers' weights
    folder = default_model.gguf_as_hf_dir(default_model.default_gguf_path())
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    tokens = corpus_tokens(engine.tokenizer)
    if "single" in scenarios:
        results["single"] = scenario_single(engine, hf, tokens, args.runs, rng)
    if "batch" in scenarios:
        results["batch"] = scenario_batch(engine, hf, tokens, args.runs, rng, args.sequential_runs)
    if "prefix" in scenarios:
        del hf
        no_cache = Engine(EngineConfig(kv_cache_bytes=256 << 20, enable_prefix_caching=False, quantization="float"))
        results["prefix"] = scenario_prefix(engine, no_cache, tokens, args.runs, rng)
    return finish(results, args.out)


def finish(results: dict, out: Path) -> int:
    """Print the table and write the results; the scenarios this run skipped keep their
    last results in `out`, and the quantized scenario carries its own environment."""
    print()
    print(table(results))
    parts = quantized_parts(results)
    for key in parts:
        results[key]["environment"] = results["environment"]
    if out.is_file() and {"single", "batch", "prefix"}.isdisjoint(results):
        results = {**json.loads(out.read_text()), **{key: results[key] for key in parts}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
