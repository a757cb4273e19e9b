"""The load generator's reliability checks, shortened: benchmarks/serve.py starts a real
`structgen serve` on loopback (the embedded SmolLM2 model), drives it with streaming
clients of which some disconnect mid-stream and some send invalid schemas, then fires a
burst far larger than the server admits. Nothing may fail: no 5xx, every admitted request
completes or is cancelled by its own client, the excess is shed quickly with 429/503 and
Retry-After, the server is idle afterwards (KV blocks, running, waiting all 0) and its
memory did not grow."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_chaos_and_overfill_leave_nothing_behind(tmp_path):
    from benchmarks import serve

    out = tmp_path / "serve.json"
    status = serve.main(["--quick", "--chaos", "--requests", "20", "--overfill", "24", "--schemas", "12",
                         "--output", str(out)])
    report = json.loads(out.read_text())
    levels = {row["level"]: row for row in report["levels"]}
    assert set(levels) == {"concurrency 1", "concurrency 4", "overfill 24"}
    for row in report["levels"]:
        assert row["errors"] == 0 and row["invalid"] == 0, row
        assert all(not status_code.startswith("5") or status_code == "503"
                   for status_code in row["statuses"]), row["statuses"]
    chaos = [row for name, row in levels.items() if name.startswith("concurrency")]
    assert sum(row["disconnected"] for row in chaos) >= 2  # 10% of 40 requests leave early
    assert sum(row["expected_400"] for row in chaos) >= 2  # 5% send an invalid schema
    burst = report["overfill"]
    assert burst["ok"] and burst["shed"] >= 8 and burst["completed"] >= 4, burst
    assert report["server_after"]["idle"], report["server_after"]
    assert report["memory"]["flat"], report["memory"]
    assert status == 0
