"""Scale-out on Ray Serve (suite `scale-out`, scale_out.json): overhead against one
engine, routing (cache hits, TTFT) and the killed-replica run, as its RESULTS.md block
(`render_scale_out`), and the sentence the serving headline ends with
(`scale_out_headline`).

Reads only its suite's results file; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import table, times
from benchmarks.report.provenance import reproduce
from benchmarks.report.results import suite_results


def render_scale_out(results_dir: Path) -> list[str]:
    data = suite_results("scale-out", results_dir)
    if data is None:
        return []
    settings = data["settings"]
    parts = [f"SmolLM2-135M-Instruct, {data['machine']['cpu_count']} cores, each server started alone; "
             f"{settings['max_tokens']} new tokens per request, {settings['schemas']} MaskBench-dev schemas drawn "
             f"with Zipf exponent {settings['zipf']:g}."]
    if "overhead" in data:
        parts.append(scale_out_overhead_table(data["overhead"], settings))
    if "routing" in data:
        parts.append(scale_out_routing_table(data["routing"], settings, settings["schema_max_chars"]))
    if "routing_large_schemas" in data:
        large = data["routing_large_schemas"]
        parts.append(scale_out_routing_table(large, settings, large["schema_max_chars"]))
    if "chaos" in data:
        parts.append(scale_out_chaos(data["chaos"]))
    parts.append(reproduce("; ".join(data.get("commands", ["python -m benchmarks.scale_out"]))))
    return parts


def scale_out_overhead_table(r: dict, settings: dict) -> str:
    ratio_of = {ratio["server"]: ratio for ratio in r["ratios"]}
    rows = []
    for label, row in r["rows"].items():
        pair = ratio_of.get(label)
        against = f"{times(pair['median'])} {pair['baseline']}" if pair else ""
        rows.append([label, f"{row['tokens_per_s']:.1f}", f"{1e3 * row['ttft_p90_s']:,.0f}", against])
    caption = (f"Throughput at {settings['clients']} clients, half of the requests constrained; medians of "
               f"{settings['runs']} passes of {settings['requests']} requests after a warm-up. A ratio is the "
               "median over passes of the two servers' tok/s in the same seeded pass:")
    return caption + "\n\n" + table(["deployment", "output tok/s", "TTFT p90 (ms)", "vs"], rows)


def scale_out_routing_table(r: dict, settings: dict, schema_max_chars: int) -> str:
    rows = [[router, f"{100 * row['hit_rate']:.1f}%", f"{100 * row['repeat_hit_rate']:.1f}%",
             f"{1e3 * row['ttft_p50_s']:,.0f}", f"{1e3 * row['ttft_p90_s']:,.0f}"] for router, row in r["rows"].items()]
    runs = r.get("runs", 1)
    medians = f", medians of {runs} passes each from cold caches" if runs > 1 else " from cold caches"
    caption = (f"Routing, 2 replicas{medians}, {settings.get('requests_routing', settings['requests'])} "
               f"constrained requests at {settings['clients']} clients, schemas of at most {schema_max_chars:,} "
               "characters (repeats: requests for a schema the cluster was sent before):")
    return caption + "\n\n" + table(["router", "grammar cache hits", "hits on repeats", "TTFT p50 (ms)",
                                      "TTFT p90 (ms)"], rows)


def scale_out_chaos(r: dict) -> str:
    outcomes = ", ".join(f"{count} {outcome}" for outcome, count in sorted(r["outcomes"].items()))
    back = "never" if r["replica_back_after_s"] is None else f"after {r['replica_back_after_s']:.0f} s"
    return (f"Chaos: one of 2 replicas killed a third into {r['wall_s']:.0f} s of {r['clients']} clients: "
            f"{r['requests']} requests ({outcomes}); {r['clear_errors']} ended with a clear error, {r['lost']} lost; "
            f"{r['retried']:.0f} retried on the other replica, {r['streams_cut']:.0f} streams cut with an error "
            f"event; a new replica served {back}.")


def scale_out_headline(data: dict) -> str:
    """One sentence on `--replicas` (Ray Serve) under the serving table."""
    said = []
    if "overhead" in data:
        ratio = {r["server"]: r["median"] for r in data["overhead"]["ratios"]}
        said.append(f"one replica serves {ratio['ray, 1 replica of 1 CPU']:.2f}x the tokens/s of one engine alone, "
                    f"each on one core ({ratio['ray, 1 replica']:.2f}x when both get every core of this 2-core "
                    f"machine), two replicas sharing the cores {ratio['ray, 2 replicas']:.2f}x")
    if "chaos" in data:
        chaos = data["chaos"]
        said.append(f"with one of 2 replicas killed under {chaos['clients']} clients, {chaos['lost']} of "
                    f"{chaos['requests']} requests were lost")
    return "On Ray Serve (`structgen serve --replicas N`): " + "; ".join(said) + "."
