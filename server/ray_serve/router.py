"""The replica router: Ray Serve's `RequestRouter` API, choosing an engine replica for
each request by its `Route` (routes.py).

Consistent hashing with bounded loads, over rendezvous hashing:
- each replica scores hash(key, replica), and the replicas are ranked by score, so a
  key keeps its ranking while replicas come and go (only the keys of a replica that
  left move);
- a keyed request goes to the first replica in its ranking whose requests in flight
  are within `load_factor` times the least busy replica's, or `MIN_SLACK` more when
  that is less. A popular grammar therefore spills to its second replica, always the
  same one, which compiles it once and then holds it warm too.

The bound weighs a compile against a queue: on a busy engine every request in its
batch slows every other, so an unbounded affinity queues the popular grammars' replica
(TTFT p90 well above Ray's power-of-two router), and a bound of one request spills a
key whenever loads jitter, compiling nearly every repeated grammar on both replicas.

Unkeyed requests go by load. The ranks handed to Ray put the chosen replica first and
the rest in ranking order; Ray then sends to the first rank with room
(`max_ongoing_requests`).

Runs inside the ingress's process (Ray runs a handle's router where the handle is).
Owns the choice only; the keys are routes.py's and the forwarding is ingress.py's.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from typing import List, Optional

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from server.ray_serve.routes import Route

DEFAULT_LOAD_FACTOR = 1.5  # how far above the least busy replica one may go for affinity
MIN_SLACK = 2  # requests in flight beyond the least busy replica that never break affinity


class GrammarAffinityRouter(RequestRouter):
    def initialize_state(self, load_factor: float = DEFAULT_LOAD_FACTOR, **_: object) -> None:
        self.load_factor = load_factor
        self.in_flight: Counter[str] = Counter()  # replica -> requests this router sent, not yet done

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        route = route_of(pending_request)
        candidates = [r for r in candidate_replicas if name_of(r.replica_id) not in route.avoid] \
            or candidate_replicas
        if route.key is None or len(candidates) == 1:
            return [candidates]
        ranked = sorted(candidates, key=lambda r: rendezvous_score(route.key, name_of(r.replica_id)), reverse=True)
        loads = [self.in_flight[name_of(r.replica_id)] for r in ranked]
        bound = min(loads) + max(MIN_SLACK, math.floor(min(loads) * (self.load_factor - 1)))
        rank = next(i for i, load in enumerate(loads) if load <= bound)
        route.preferred, route.rank = name_of(ranked[rank].replica_id), rank
        return [ranked[rank:rank + 1], ranked[:rank] + ranked[rank + 1:]]

    def on_send_request(self, replica_id: ReplicaID) -> None:
        super().on_send_request(replica_id)
        self.in_flight[name_of(replica_id)] += 1

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        super().on_request_completed(replica_id, internal_request_id)
        name = name_of(replica_id)
        self.in_flight[name] = max(0, self.in_flight[name] - 1)


def route_of(pending_request: Optional[PendingRequest]) -> Route:
    route = pending_request.kwargs.get("route") if pending_request is not None else None
    return route if isinstance(route, Route) else Route()


def name_of(replica_id: ReplicaID) -> str:
    return replica_id.unique_id


def rendezvous_score(key: str, replica: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}\0{replica}".encode(), digest_size=8).digest(), "big")
