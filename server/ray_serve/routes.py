"""Where a request should go, decided at the ingress from its body: the `Route` that
the replica router reads.

- A request that carries a grammar is keyed by that grammar (`OutputSpec.grammar_key`,
  the compile cache's key): the replica that compiled it holds it warm, masks included.
- A completion without one is keyed by the start of its prompt (its first
  `PREFIX_BYTES` bytes as sent): requests that share it share the KV blocks that the
  replica's prefix cache holds.
- Anything else (other routes, a body the replica will refuse) goes by load; the
  replica answers it, errors included.

Owns the keys only; the choice of replica is `router.py`'s.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from server.protocol import ChatCompletionRequest, CompletionRequest
from server.structured import output_spec

COMPLETION_PATHS = {"/v1/chat/completions": ChatCompletionRequest, "/v1/completions": CompletionRequest}
# Prompts that share this many leading bytes share a prefix-cache hit worth routing for:
# about four 16-token KV blocks of English text.
PREFIX_BYTES = 256

BY_GRAMMAR, BY_PREFIX, BY_LOAD = "grammar", "prefix", "load"
SPILLED = "spill"  # keyed, but sent to a replica that had not served its key (those that had were busy)


@dataclass
class Route:
    """`key`: what the router hashes (None: go by load). The router records the replica
    it chose, that replica's rank for the key (0: the key's own), and whether it had
    not served the key before (`cold`) when others had; the ingress adds replicas that
    failed this request to `avoid`."""

    by: str = BY_LOAD
    key: str | None = None
    preferred: str | None = None
    rank: int = 0
    cold: bool = False
    avoid: set[str] = field(default_factory=set)

    def served_by(self, replica: str) -> str:
        """How the request reached `replica`: by its key, spilled, or by load."""
        if replica != self.preferred:
            return BY_LOAD
        return SPILLED if self.cold else self.by


def route_for(path: str, body: bytes, disable_additional_properties: bool) -> Route:
    model = COMPLETION_PATHS.get(path)
    if model is None or not body:
        return Route()
    try:
        request = model.model_validate_json(body)
        spec = output_spec(request, disable_additional_properties=disable_additional_properties)
    except Exception:  # noqa: BLE001 - any refusal is the replica's to word
        return Route()
    if (grammar := spec.grammar_key()) is not None:
        return Route(BY_GRAMMAR, _digest(grammar))
    prompt = request.messages if isinstance(request, ChatCompletionRequest) else request.prompt
    text = json.dumps(prompt, default=_plain, ensure_ascii=False)[:PREFIX_BYTES]
    return Route(BY_PREFIX, _digest(text))


def _plain(value):
    return value.model_dump() if hasattr(value, "model_dump") else str(value)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
