"""Serving under load (suite `serve`, serve.json): latency, throughput, SLO share and
validity per load level, and the checks after the run, as its RESULTS.md block
(`render_serve`) and README headline (`headline_serve`, which ends with scale-out's
sentence when its results exist).

Reads only the serve and scale-out results files; must not place blocks in the
documents (documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import table
from benchmarks.report.provenance import args_command, provenance, reproduce
from benchmarks.report.results import machine_label, suite_results
from benchmarks.report.scale_out import scale_out_headline


def render_serve(results_dir: Path) -> list[str]:
    data = suite_results("serve", results_dir)
    if data is None:
        return []
    settings = data["environment"]["settings"]
    intro = (f"{100 * settings['constrained_share']:.0f}% of requests constrained by a MaskBench-dev schema, "
             f"max_tokens {settings['max_tokens']}" + (", chaos on (disconnects, invalid schemas)" if settings["chaos"]
                                                       else "")
             + f"; SLO: TTFT <= {settings['slo_ttft']:g} s and TPOT <= {settings['slo_tpot']:g} s:")
    parts = [intro, serve_table(data["levels"]), serve_checks(data),
             provenance(data) + " " + reproduce(args_command("serve", settings, "serve", "serve.json"))]
    return [part for part in parts if part]


def serve_table(levels: list[dict]) -> str:
    def ms(latency: dict) -> str:
        return " / ".join("–" if latency[q] is None else f"{1000 * latency[q]:,.0f}" for q in ("p50", "p90", "p99"))

    rows = []
    for r in levels:
        share = "–" if r["slo_share"] is None else f"{100 * r['slo_share']:.0f}%"
        rows.append([r["level"], r["requests"], r["errors"],
                     f"{r['refused']} / {r.get('shed', 0)} / {r['expected_400']} / {r['disconnected']}",
                     ms(r["ttft"]), ms(r["tpot"]), ms(r["e2e"]), f"{r['req_s']:.2f}", f"{r['output_tok_s']:.1f}",
                     share, f"{r['goodput_req_s']:.2f}",
                     f"{r['constrained_valid']} / {r['constrained_invalid']} / {r['constrained_length']}"])
    return table(["level", "requests", "errors", "refused / shed / expected 400 / disconnected",
                  "TTFT p50 / p90 / p99 (ms)", "TPOT (ms)", "end to end (ms)", "req/s", "output tok/s",
                  "within SLO", "goodput (req/s)", "JSON valid / invalid / cut by length"], rows)


def serve_checks(data: dict) -> str:
    lines = []
    idle = data.get("server_after")
    if idle:
        state = "idle" if idle["idle"] else "NOT idle"
        lines.append(f"After the run the server was {state} (KV blocks used {idle['kv_blocks_used']:g} of "
                     f"{idle['kv_blocks_total']:g}, running {idle['running']:g}, waiting {idle['waiting']:g})")
    memory = data.get("memory")
    if memory:
        lines.append(f"resident memory {memory['first_mb']:,.0f} MB after the first level, {memory['last_mb']:,.0f} "
                     f"MB after the last ({'flat' if memory['flat'] else 'GROWING'})")
    overfill = data.get("overfill")
    if overfill:
        p99 = "–" if overfill["shed_p99_s"] is None else f"{1000 * overfill['shed_p99_s']:,.0f} ms"
        lines.append(f"overfill burst: {overfill['shed']} shed with 429/503 (p99 {p99}), {overfill['completed']} "
                     f"completed, {overfill['errors']} errors ({'ok' if overfill['ok'] else 'FAILED'})")
    return "; ".join(lines) + "." if lines else ""


def headline_serve(results_dir: Path) -> list[str]:
    data = suite_results("serve", results_dir)
    if data is None:
        return []
    settings = data["environment"]["settings"]
    machine = machine_label(data, memory=False) or f"{data['environment'].get('cpu_count', '?')} cores"
    intro = (f"`structgen serve` on {machine}, {100 * settings['constrained_share']:.0f}% of requests constrained, "
             f"max_tokens {settings['max_tokens']}" + (", chaos on" if settings["chaos"] else "")
             + f"; SLO: TTFT <= {settings['slo_ttft']:g} s and TPOT <= {settings['slo_tpot']:g} s:")

    def p50_ms(latency: dict) -> str:
        return "–" if latency["p50"] is None else f"{1000 * latency['p50']:,.0f}"

    rows = []
    for r in data["levels"]:
        share = "–" if r["slo_share"] is None else f"{100 * r['slo_share']:.0f}%"
        rows.append([r["level"], r["requests"], r["errors"], p50_ms(r["ttft"]), p50_ms(r["tpot"]),
                     f"{r['output_tok_s']:.1f}", share, f"{r['constrained_valid']} / {r['constrained_invalid']}"])
    parts = [intro, table(["level", "requests", "errors", "TTFT p50 (ms)", "TPOT p50 (ms)", "output tok/s",
                           "within SLO", "JSON valid / invalid"], rows)]
    scale_out = suite_results("scale-out", results_dir)
    if scale_out is not None:
        parts.append(scale_out_headline(scale_out))
    return parts
