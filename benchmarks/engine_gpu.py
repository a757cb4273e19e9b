#!/usr/bin/env python3
"""The engine on a GPU: Llama-3-8B-shaped dummy weights in bf16 (issue 3's GPU figures).

  bandwidth   the HBM bandwidth of this GPU, measured as a large device-to-device copy
              (bytes read plus bytes written over the median time of 10 copies): the
              denominator of MBU.
  throughput  for each --batches size B: B requests of --prompt-len random token ids and
              exactly --output-len output tokens each (greedy, ignore_eos), submitted at
              once; engine with CUDA graphs and with eager decode steps. Reports output
              tokens/s end to end (prefill included) and the median decode step time
              (steps after every request has its first token), hence decode tokens/s.
  mbu         at batch 1: bytes a decode step must read (every weight but the embedding
              table, of which one row is read, plus the KV cache of the context) over the
              median decode step time, over the measured bandwidth. Target >= 0.6 with
              CUDA graphs. Given for the engine's whole step (scheduling, sampling and
              host work included) and for the graph replay alone.
  host        at batch 1 with graphs: where a decode step's host time goes (cProfile of
              one more run, the top functions by own time; `tolist` waits for the GPU).
  baseline    transformers `generate` on the same shape (bf16, random weights, its
              default attention) at batch 1 and --hf-batch, same prompt and output
              lengths: the ratio of output tokens/s, measured in the same process.

    python benchmarks/engine_gpu.py                            # everything, 3 runs
    python benchmarks/engine_gpu.py --batches 1,8 --runs 5 --no-baseline
    python benchmarks/engine_gpu.py --batches 256 --no-baseline --no-eager --kv-cache-dtype fp8

Prints a markdown table; writes benchmarks/results/engine_gpu.json (--out).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import platform
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from structgen.engine import kv_cache  # noqa: E402
from structgen.engine.config import EngineConfig  # noqa: E402
from structgen.engine.engine import Engine  # noqa: E402
from structgen.engine.models.loader import DUMMY_SHAPES  # noqa: E402
from structgen.engine.sampling_params import SamplingParams  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "engine_gpu.json"
SHAPE = "llama-3-8b"


def measure_bandwidth(gib: float = 4.0, repeats: int = 10) -> float:
    """Bytes/s of a device-to-device copy, counting bytes read and bytes written."""
    numel = int(gib * (1 << 30)) // 2
    source = torch.randn(numel, dtype=torch.bfloat16, device="cuda")
    target = torch.empty_like(source)
    times = []
    for _ in range(repeats + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        target.copy_(source)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    del source, target
    torch.cuda.empty_cache()
    return 2 * numel * 2 / statistics.median(times[2:])


def random_prompts(count: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(10, vocab, (count, length), generator=gen).tolist()


def run_batch(engine: Engine, prompts, output_len: int) -> dict:
    """Submit every prompt at once and step to the end; wall time and decode step times."""
    engine.blocks.reset_prefix_cache()
    params = SamplingParams(max_tokens=output_len, temperature=0.0, ignore_eos=True)
    ids = [engine.add_request(p, params) for p in prompts]
    started_ids: set[str] = set()
    decode_steps = []
    done = 0
    start = time.perf_counter()
    while done < len(ids):
        all_decoding = len(started_ids) == len(ids)
        step_start = time.perf_counter()
        outs = engine.step()
        step_time = time.perf_counter() - step_start
        if all_decoding and not any(o.finished for o in outs):
            decode_steps.append(step_time)
        for out in outs:
            if out.token_ids:
                started_ids.add(out.request_id)
            done += out.finished
    wall = time.perf_counter() - start
    return {"wall_s": wall, "output_tokens": len(ids) * output_len,
            "decode_step_s": statistics.median(decode_steps) if decode_steps else None}


def graph_replay_time(engine: Engine, batch: int, repeats: int = 50) -> float | None:
    """Seconds per replay of the captured decode graph of `batch` (forward only)."""
    graphs = engine.runner.decode_graphs
    if graphs is None or batch not in graphs.graphs:
        return None
    graph = graphs.graphs[batch]
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000 / repeats


def host_profile(engine: Engine, prompts, output_len: int, top: int = 25) -> list[str]:
    """The top functions by own time over one profiled run (a few lines per function)."""
    profiler = cProfile.Profile()
    profiler.enable()
    run_batch(engine, prompts, output_len)
    profiler.disable()
    stats = pstats.Stats(profiler)
    steps = max(output_len, 1)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:top]  # by own time
    lines = [f"{own / steps * 1e6:8.1f} us/step own {total / steps * 1e6:8.1f} cumulative  "
             f"{calls / steps:5.1f} calls/step  {Path(file).name}:{line} {name}"
             for (file, line, name), (_, calls, own, total, _) in rows]
    print("  host profile, batch 1 (per decode step):", *lines, sep="\n    ", flush=True)
    return lines


def weight_bytes_per_step(engine: Engine) -> int:
    """Bytes of weights a decode step reads: all but the embedding table (one row each)."""
    model = engine.model
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    if model.lm_head is not None:  # untied: the embedding table is looked up, not read
        total -= model.embed.weight.numel() * model.embed.weight.element_size()
    return total


def engine_throughput(batches, args, graphs: bool) -> tuple[dict, dict]:
    started = time.perf_counter()
    engine = Engine(EngineConfig(model=SHAPE, load_format="dummy", max_num_seqs=max(batches), cuda_graphs=graphs,
                                 max_model_len=args.prompt_len + args.output_len + 64,
                                 kv_cache_dtype=args.kv_cache_dtype))
    kv_bytes_per_token = kv_cache.block_bytes(engine.config, engine.block_size, engine.kv_dtype) // engine.block_size
    info = {"build_s": time.perf_counter() - started, "weight_bytes_per_step": weight_bytes_per_step(engine),
            "kv_cache_dtype": str(engine.kv_dtype).removeprefix("torch."),
            "kv_bytes_per_token": kv_bytes_per_token, "num_blocks": engine.blocks.num_blocks,
            "graph_sizes": sorted(engine.runner.decode_graphs.graphs) if graphs else []}
    vocab = engine.config.vocab_size
    run_batch(engine, random_prompts(2, args.prompt_len, vocab, 99), 8)  # warm up
    results = {}
    for batch in batches:
        prompts = random_prompts(batch, args.prompt_len, vocab, batch)
        runs = [run_batch(engine, prompts, args.output_len) for _ in range(args.runs)]
        results[batch] = {
            "output_tok_s": [r["output_tokens"] / r["wall_s"] for r in runs],
            "decode_step_s": [r["decode_step_s"] for r in runs],
            "graph_replay_s": graph_replay_time(engine, batch) if graphs else None,
        }
        if graphs and batch == 1:
            results[batch]["host_profile"] = host_profile(engine, prompts, args.output_len)
        print(f"  batch {batch:>3}, graphs {graphs}: {statistics.median(results[batch]['output_tok_s']):8.1f} "
              f"output tok/s, decode step {1000 * statistics.median(results[batch]['decode_step_s']):.2f} ms",
              flush=True)
    del engine
    gc.collect()
    torch.cuda.empty_cache()
    return results, info


@torch.inference_mode()
def hf_throughput(batches, args) -> dict:
    import transformers

    config = transformers.LlamaConfig(**{k: v for k, v in DUMMY_SHAPES[SHAPE].items() if k != "model_type"})
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    results = {}
    for batch in batches:
        ids = torch.tensor(random_prompts(batch, args.prompt_len, config.vocab_size, batch), device="cuda")
        model.generate(ids[:, :16], max_new_tokens=4, do_sample=False, pad_token_id=0)  # warm up
        times = []
        for _ in range(args.runs):
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = model.generate(ids, max_new_tokens=args.output_len, min_new_tokens=args.output_len,
                                 do_sample=False, pad_token_id=0, eos_token_id=None)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            assert out.shape[1] == args.prompt_len + args.output_len
        results[batch] = {"output_tok_s": [batch * args.output_len / t for t in times]}
        print(f"  transformers batch {batch:>3}: {statistics.median(results[batch]['output_tok_s']):8.1f} "
              "output tok/s", flush=True)
    del model
    gc.collect()
    torch.cuda.empty_cache()
    return results


def summarize(results: dict) -> dict:
    med = statistics.median
    bandwidth = results["bandwidth_bytes_s"]
    info = results["info"]
    one = results["graphs"].get(1)
    summary = {}
    if one is not None:
        context = results["args"]["prompt_len"] + results["args"]["output_len"] / 2
        step_bytes = info["weight_bytes_per_step"] + context * info["kv_bytes_per_token"]
        summary["mbu_engine_step"] = step_bytes / med(one["decode_step_s"]) / bandwidth
        if one["graph_replay_s"]:
            summary["mbu_graph_replay"] = step_bytes / one["graph_replay_s"] / bandwidth
        eager = results["eager"].get(1)
        if eager:
            summary["mbu_eager_step"] = step_bytes / med(eager["decode_step_s"]) / bandwidth
    for batch, r in results["graphs"].items():
        eager = results["eager"].get(batch)
        if eager:
            summary[f"graphs_vs_eager_b{batch}"] = med(r["output_tok_s"]) / med(eager["output_tok_s"])
        hf = results.get("hf", {}).get(batch)
        if hf:
            summary[f"engine_vs_hf_b{batch}"] = med(r["output_tok_s"]) / med(hf["output_tok_s"])
    return summary


def table(results: dict) -> str:
    med = statistics.median
    rows = ["| batch | graphs: output tok/s | decode step (ms) | decode tok/s | eager: output tok/s | "
            "transformers: output tok/s |", "|---:|---:|---:|---:|---:|---:|"]
    for batch, r in results["graphs"].items():
        step = med(r["decode_step_s"])
        eager = results["eager"].get(batch)
        hf = results.get("hf", {}).get(batch)
        eager_cell = f"{med(eager['output_tok_s']):.1f}" if eager else "-"
        hf_cell = f"{med(hf['output_tok_s']):.1f}" if hf else "-"
        rows.append(f"| {batch} | {med(r['output_tok_s']):.1f} | {1000 * step:.2f} | {batch / step:.0f} | "
                    f"{eager_cell} | {hf_cell} |")
    lines = "\n".join(rows)
    s = results["summary"]
    lines += f"\n\nHBM bandwidth (device copy): {results['bandwidth_bytes_s'] / 1e12:.2f} TB/s"
    for key, value in s.items():
        lines += f"\n{key}: {value:.3f}"
    return lines


def environment() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=False).stdout.strip()
    import transformers

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"commit": commit, "python": platform.python_version(), "torch": torch.__version__,
            "triton": triton_version, "transformers": transformers.__version__,
            "gpu": torch.cuda.get_device_name(), "time": time.strftime("%Y-%m-%d %H:%M:%S")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,8,64,256")
    parser.add_argument("--hf-batches", default="1,64")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--no-eager", action="store_true")
    parser.add_argument("--kv-cache-dtype", default=None,
                        help="the KV cache's dtype (default: the model's bfloat16); fp8 or int8: one byte per element")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU: this benchmark measures the GPU path (benchmarks/engine.py is the CPU one)")
        return 2
    batches = [int(b) for b in args.batches.split(",")]
    settings = {**vars(args), "out": str(args.out)}
    results: dict = {"environment": environment(), "shape": SHAPE, "dtype": "bfloat16", "args": settings}
    results["bandwidth_bytes_s"] = measure_bandwidth()
    print(f"HBM bandwidth: {results['bandwidth_bytes_s'] / 1e12:.2f} TB/s", flush=True)
    if not args.no_baseline:
        results["hf"] = hf_throughput([int(b) for b in args.hf_batches.split(",")], args)
    results["graphs"], results["info"] = engine_throughput(batches, args, graphs=True)
    results["eager"] = {} if args.no_eager else engine_throughput(batches, args, graphs=False)[0]
    results["summary"] = summarize(results)
    print()
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
