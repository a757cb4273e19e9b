"""JSON Schema -> IR against `jsonschema` on the maskbench-dev instances: every accepted
instance must be valid (a deterministic sample; STRUCTGEN_MASKBENCH_ALL=1 runs them all).
"""

from __future__ import annotations

import json
import os
import random
import time

import jsonschema
import pytest

from structgen.automata.languages import AUTOMATA
from structgen.errors import StructgenError
from structgen.grammar.json_schema import JsonOptions, schema_to_ir
from tests.grammar.schema_checks import acceptor
from tests.paths import MASKBENCH


def _maskbench_files():
    return sorted(MASKBENCH.glob("*.json")) if MASKBENCH.is_dir() else []


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="../shared/data is not beside the checkout")
def test_maskbench_differential():
    """Every accepted instance must be valid (jsonschema, draft from $schema, default
    2020-12). Runs a deterministic sample to stay fast; the full run is in the report."""
    files = _maskbench_files()
    everything = os.environ.get("STRUCTGEN_MASKBENCH_ALL") == "1"  # the full run (minutes)
    sample = files if everything else random.Random(1234).sample(files, min(len(files), 220))
    counts = {"compiled": 0, "refused": 0, "valid": 0, "valid_accepted": 0, "invalid": 0, "invalid_accepted": 0}
    unsound = []
    deadline = time.monotonic() + (10**6 if everything else 45)
    for path in sample:
        if time.monotonic() > deadline:
            break
        data = json.loads(path.read_text())
        try:
            node = schema_to_ir(data["schema"], JsonOptions(), languages=AUTOMATA)
        except StructgenError as e:
            assert str(e)
            counts["refused"] += 1
            continue
        counts["compiled"] += 1
        try:
            cls = jsonschema.validators.validator_for(data["schema"], default=jsonschema.Draft202012Validator)
            validator = cls(data["schema"])
        except Exception:
            continue
        accepts = acceptor(node)
        for t in data["tests"]:
            try:
                truth = validator.is_valid(t["data"])
            except Exception:
                continue
            accepted = accepts(json.dumps(t["data"]).encode())
            key = "valid" if truth else "invalid"
            counts[key] += 1
            counts[key + "_accepted"] += accepted
            if accepted and not truth:
                unsound.append((path.name, json.dumps(t["data"])[:200]))
    print("\nmaskbench sample:", counts)
    assert not unsound, unsound[:5]
    assert counts["compiled"] >= 0.8 * (counts["compiled"] + counts["refused"])
    assert counts["valid_accepted"] >= 0.8 * counts["valid"]
