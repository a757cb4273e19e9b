"""The official JSON-Schema-Test-Suite (draft 2020-12) against compile_json_schema.

Every group either compiles or is refused with a StructgenError. For every compiled
group, no invalid instance may be accepted (hard: under-constraining is the worst bug),
and the number of valid instances accepted may not fall below the recorded baseline
(tests/grammar/suite_baseline.json; raise it when coverage improves, never lower it).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import structgen
from tests.paths import JSON_SCHEMA_SUITE

BASELINE = Path(__file__).with_name("suite_baseline.json")

# Serializations per whitespace mode: what each mode must accept for a valid instance.
MODES = {
    "default": [lambda d: json.dumps(d)],
    "compact": [lambda d: json.dumps(d, separators=(",", ":"))],
    "flexible": [lambda d: json.dumps(d), lambda d: json.dumps(d, indent=2)],
}


def suite_groups():
    files = sorted(JSON_SCHEMA_SUITE.glob("*.json")) + sorted(JSON_SCHEMA_SUITE.glob("optional/format/*.json"))
    for path in files:
        for index, group in enumerate(json.loads(path.read_text())):
            yield f"{path.relative_to(JSON_SCHEMA_SUITE)}#{index}", group


def run_suite(vocab, mode: str) -> dict:
    counts = Counter()
    refusals = Counter()
    invalid_accepted = []
    for name, group in suite_groups():
        counts["groups"] += 1
        try:
            grammar = structgen.compile_json_schema(group["schema"], vocab, whitespace=mode)
        except structgen.StructgenError as e:
            counts["refused"] += 1
            refusals[type(e).__name__ + ": " + str(e).split(" (at ")[0][:60]] += 1
            assert str(e), "refusals must say why"
            continue
        counts["compiled"] += 1
        for test in group["tests"]:
            for serialize in MODES[mode]:
                text = serialize(test["data"]).encode()
                accepted = grammar.accepts_bytes(text)
                if test["valid"]:
                    counts["valid"] += 1
                    counts["valid_accepted"] += accepted
                else:
                    counts["invalid"] += 1
                    if accepted:
                        invalid_accepted.append((name, test["description"], text))
    return {"counts": dict(counts), "refusals": refusals, "invalid_accepted": invalid_accepted}


@pytest.mark.skipif(not JSON_SCHEMA_SUITE.is_dir(), reason="../shared/data is not beside the checkout")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_suite(mode, smollm2_vocab):
    result = run_suite(smollm2_vocab, mode)
    counts = result["counts"]
    print(f"\n[{mode}] {counts}")
    for reason, n in result["refusals"].most_common(15):
        print(f"  refused {n:3d}  {reason}")
    assert not result["invalid_accepted"], result["invalid_accepted"][:10]
    baseline = json.loads(BASELINE.read_text())[mode] if BASELINE.exists() else {}
    assert counts.get("compiled", 0) >= baseline.get("compiled", 0), "fewer groups compile than before"
    assert counts.get("valid_accepted", 0) >= baseline.get("valid_accepted", 0), (
        "fewer valid instances accepted than before"
    )


@pytest.mark.skipif(not JSON_SCHEMA_SUITE.is_dir(), reason="../shared/data is not beside the checkout")
def test_ref_groups_compile_unless_remote(smollm2_vocab):
    """ref.json, defs.json and anchor.json: recursion is no reason to refuse any more; what
    is left refused says why (remote documents, unevaluatedProperties, an empty language)."""
    reasons = {}
    for name, group in suite_groups():
        if name.split("#")[0] not in ("ref.json", "defs.json", "anchor.json"):
            continue
        try:
            structgen.compile_json_schema(group["schema"], smollm2_vocab)
        except structgen.StructgenError as e:
            reasons[name] = str(e)
    assert len(reasons) <= 4, reasons
    for name, reason in reasons.items():
        assert "recursi" not in reason, (name, reason)
        assert any(k in reason for k in ("outside this schema", "unevaluatedProperties", "no value")), (name, reason)
