"""The replica router: Ray Serve's `RequestRouter` API, choosing an engine replica for
each request by its `Route` (routes.py).

A keyed request goes to the replica that rendezvous hashing ranks first for its key:
each replica scores hash(key, replica) and the highest wins, so a key stays on its
replica while replicas come and go, and only the keys of a replica that left move.
When that replica has `imbalance` or more requests in flight beyond the least busy
one, the request goes by load instead: a warm grammar is worth a compile (tens of
milliseconds) but not a long queue. Unkeyed requests go by load. The ranks handed to
Ray put the preferred replica first and the rest in rendezvous order; Ray then sends
to the first rank with room (`max_ongoing_requests`).

Runs inside the ingress's process (Ray runs a handle's router where the handle is).
Owns the choice only; the keys are routes.py's and the forwarding is ingress.py's.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import List, Optional

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from server.ray_serve.routes import Route

DEFAULT_IMBALANCE = 8  # requests in flight beyond the least busy replica before load wins


class GrammarAffinityRouter(RequestRouter):
    def initialize_state(self, imbalance: int = DEFAULT_IMBALANCE, **_: object) -> None:
        self.imbalance = imbalance
        self.in_flight: Counter[str] = Counter()  # replica -> requests this router sent, not yet done

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        route = route_of(pending_request)
        candidates = [r for r in candidate_replicas if name_of(r.replica_id) not in route.avoid] \
            or candidate_replicas
        if route.key is None or len(candidates) == 1:
            return [candidates]
        ranked = sorted(candidates, key=lambda r: rendezvous_score(route.key, name_of(r.replica_id)), reverse=True)
        first = name_of(ranked[0].replica_id)
        least_busy = min(self.in_flight[name_of(r.replica_id)] for r in candidates)
        if self.in_flight[first] - least_busy >= self.imbalance:
            route.preferred = None
            return [candidates]
        route.preferred = first
        return [ranked[:1], ranked[1:]]

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
