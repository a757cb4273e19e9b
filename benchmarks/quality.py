#!/usr/bin/env python3
"""The quality guard of quantization: each mode against the unquantized model.

For the unquantized model ("float") and each mode of `--modes` (default native,int8,int4;
native: as the checkpoint stores its weights, for the embedded GGUF its own 4- and 8-bit
layers; its KV cache float16, the engine's default under native on CPU), and for each
mode of `--kv-modes` again with each KV cache dtype of `--kv-cache-dtypes` (default:
native with a float32, an int8 and an fp8 cache), the embedded model (or `--model`) is loaded in it and
reads `benchmarks/data/quality-text.md` (a fixed text of about 2,500 tokens, shipped
here and never edited) in one prefill. Reported per mode:

- perplexity on the text, and its ratio to the unquantized model's;
- top-1 agreement: the share of the text's positions where the mode's most likely next
  token is the unquantized model's;
- greedy agreement: on PROMPTS, chat-formatted, 64 greedy tokens each, the share of the
  unquantized model's tokens that the mode reproduces before its first difference.

A mode whose perplexity is more than 3% above the unquantized model's is marked lossy:
it is never a default (see docs/engine.md). Writes benchmarks/results/quality.json.

    python benchmarks/quality.py
    python benchmarks/quality.py --modes native,int8,int4 --group-sizes 32,64 --kv-cache-dtypes float32,int8,fp8
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from structgen.engine import Engine  # noqa: E402
from structgen.engine.kernels import attention_torch  # noqa: E402
from structgen.engine.kv_cache import allocate_kv_cache  # noqa: E402
from structgen.engine.sampling_params import SamplingParams  # noqa: E402

TEXT = ROOT / "benchmarks" / "data" / "quality-text.md"
RESULTS = ROOT / "benchmarks" / "results" / "quality.json"
LOSSY_ABOVE = 1.03  # perplexity ratio to the unquantized model
GREEDY_TOKENS = 64
PROMPTS = [
    "Describe a person in JSON.",
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three colors and one thing of each color.",
    "Explain what a compiler does in two sentences.",
    "Give me a recipe for pancakes.",
    "Return a JSON object with the fields city, country and population for Tokyo.",
    "Why do leaves change color in autumn?",
]


def text_logits(engine: Engine, token_ids: list[int]) -> torch.Tensor:
    """Float32 logits [T, vocab] of every position of `token_ids`, in one prefill of the
    engine's model on a cache of its own (the engine's cache and scheduler are untouched)."""
    tokens = len(token_ids)
    caches = allocate_kv_cache(engine.config, -(-tokens // engine.block_size), engine.block_size, engine.kv_dtype,
                               engine.device)
    meta = attention_torch.AttentionMetadata.one_prefill(tokens, engine.block_size, engine.device)
    device = engine.device
    ids = torch.tensor(token_ids, dtype=torch.int64, device=device)
    with torch.inference_mode():
        hidden = engine.model(ids, torch.arange(tokens, device=device), caches, meta, attention_torch)
        return engine.model.compute_logits(hidden)


def perplexity(logits: torch.Tensor, token_ids: list[int]) -> float:
    targets = torch.tensor(token_ids[1:], device=logits.device)
    logprobs = torch.log_softmax(logits[:-1].float(), dim=-1).gather(1, targets[:, None])
    return math.exp(-logprobs.mean().item())


def greedy_outputs(engine: Engine) -> list[list[int]]:
    prompts = [engine.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                    add_generation_prompt=True) for p in PROMPTS]
    params = SamplingParams(max_tokens=GREEDY_TOKENS, temperature=0.0)
    return [out.token_ids for out in engine.generate(prompts, params)]


def shared_prefix_share(reference: list[list[int]], outputs: list[list[int]]) -> float:
    """Of the reference's tokens, the share reproduced before each output's first difference."""
    same = 0
    for want, got in zip(reference, outputs):
        same += next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    return same / sum(len(want) for want in reference)


def measure(model, mode: str | None, group_size: int, kv_dtype: str | None, text: str) -> dict:
    options = {"quantization": mode, "kv_cache_dtype": kv_dtype}
    if mode == "int4":
        options["quantization_group_size"] = group_size
    started = time.perf_counter()
    engine = Engine(model, kv_cache_bytes=64 << 20, **options)
    load_s = time.perf_counter() - started
    token_ids = engine.tokenizer.encode(text)
    return {"token_ids": token_ids, "logits": text_logits(engine, token_ids), "greedy": greedy_outputs(engine),
            "load_s": load_s, "weight_bytes": weight_bytes(engine.model)}


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the weights (the rotary tables aside)."""
    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    skip = {id(model.rotary.cos), id(model.rotary.sin)}
    return sum(t.nbytes for key, t in tensors.items() if key not in skip)


def label(mode: str | None, group_size: int, kv_dtype: str | None) -> str:
    name = f"int4 (group {group_size})" if mode == "int4" else mode
    return f"{name}, {kv_dtype} KV" if kv_dtype else name


def run(args) -> dict:
    text = TEXT.read_text()
    rows, reference = [], None
    for mode, group_size, kv_dtype in variants(args):
        name = label(mode, group_size, kv_dtype)
        print(f"{name}: loading, reading the text, {len(PROMPTS)} greedy prompts", flush=True)
        got = measure(args.model, mode, group_size, kv_dtype, text)
        if reference is None:
            reference = got
        token_ids = got["token_ids"]
        ppl, ref_ppl = perplexity(got["logits"], token_ids), perplexity(reference["logits"], token_ids)
        top1 = (got["logits"].argmax(-1) == reference["logits"].argmax(-1)).float().mean().item()
        rows.append({"mode": name, "perplexity": ppl, "perplexity_ratio": ppl / ref_ppl, "top1_agreement": top1,
                     "greedy_agreement": shared_prefix_share(reference["greedy"], got["greedy"]),
                     "weight_mb": got["weight_bytes"] / 2**20, "lossy": ppl / ref_ppl > LOSSY_ABOVE,
                     "load_s": got["load_s"]})
        print_row(rows[-1])
    return {"rows": rows, "text_tokens": len(reference["token_ids"]), "greedy_tokens": GREEDY_TOKENS, "prompts": len(PROMPTS),
            "lossy_above": LOSSY_ABOVE, "model": args.model or "SmolLM2-135M-Instruct (embedded)",
            "machine": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}


def variants(args) -> list[tuple[str, int, str | None]]:
    """(mode, group size, KV cache dtype or None for the model's), the unquantized model first."""
    modes = [m for m in args.modes.split(",") if m != "float"]
    rows: list[tuple[str, int, str | None]] = [("float", 0, None)]
    for mode in modes:
        sizes = [int(g) for g in args.group_sizes.split(",")] if mode == "int4" else [0]
        rows += [(mode, size, None) for size in sizes]
    kv_dtypes = [d for d in args.kv_cache_dtypes.split(",") if d]
    for mode in [m for m in args.kv_modes.split(",") if m]:
        rows += [(mode, 0, kv_dtype) for kv_dtype in kv_dtypes]
    return rows


def print_row(row: dict) -> None:
    mark = "  LOSSY" if row["lossy"] else ""
    print(f"  {row['mode']:<18} perplexity {row['perplexity']:7.3f} ({row['perplexity_ratio']:.3f}x)  "
          f"top-1 {100 * row['top1_agreement']:5.1f}%  greedy {100 * row['greedy_agreement']:5.1f}%  "
          f"weights {row['weight_mb']:6.0f} MB{mark}", flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="a folder or .gguf file (default: the embedded model)")
    parser.add_argument("--modes", default="native,int8,int4")
    parser.add_argument("--group-sizes", default="32,64", help="int4 group sizes to measure")
    parser.add_argument("--kv-cache-dtypes", default="float32,int8,fp8",
                        help="KV cache dtypes to measure (comma list)")
    parser.add_argument("--kv-modes", default="native", help="the modes measured with each of them")
    parser.add_argument("--out", default=str(RESULTS))
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
