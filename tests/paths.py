"""Where the tests find the repository and the shared data beside it: computed once here,
so that no test depends on how deep its own folder is."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GRAMMARS = REPO / "grammars"
SHARED_DATA = REPO.parent / "shared" / "data"
MASKBENCH = SHARED_DATA / "maskbench-dev"
JSON_SCHEMA_SUITE = SHARED_DATA / "json-schema-test-suite" / "draft2020-12"
