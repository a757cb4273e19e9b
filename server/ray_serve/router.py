"""The replica router: Ray Serve's `RequestRouter` API, choosing an engine replica for
each request by its `Route` (routes.py).

Consistent hashing with bounded loads, over rendezvous hashing, that remembers where
each key has been served:
- each replica scores hash(key, replica), and the replicas are ranked by score, so a
  key keeps its ranking while replicas come and go (only the keys of a replica that
  left move);
- a replica that has served a key holds it warm (its compiled grammar and mask tables,
  or its prompt's KV blocks). A keyed request goes to its least busy warm replica,
  unless that one has more than `COLD_SLACK` requests in flight beyond the least busy
  replica's (or twice the load bound's margin, when that is more). Then it goes to
  the first replica in its ranking within the load bound (`load_factor` times the
  least busy replica's requests, or `MIN_SLACK` more), which compiles it. The wider bound for a
  cold replica weighs a compile and cold first masks against a request or two more
  in a warm replica's batch.

A key new to every replica goes to the first replica in its ranking within the bound.
A popular grammar thus ends up warm on two replicas and balances freely between them;
a rare one stays on one.

Unkeyed requests go by load. The ranks handed to Ray put the chosen replica first and
the rest in ranking order; Ray then sends to the first rank with room
(`max_ongoing_requests`, set far above what an engine admits).

Runs inside the ingress's process (Ray runs a handle's router where the handle is).
Owns the choice only; the keys are routes.py's and the forwarding is ingress.py's.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, OrderedDict
from typing import List, Optional

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from server.ray_serve.routes import Route

DEFAULT_LOAD_FACTOR = 1.5  # how far above the least busy replica one may go for a warm replica
MIN_SLACK = 2  # requests in flight beyond the least busy replica that never break affinity
COLD_SLACK = 4  # ... that never send a key to a replica that has not served it
REMEMBERED_KEYS = 65_536  # keys whose warm replicas the router remembers (least recently used go)


def choose(ranking: list[str], loads: dict[str, int], warm: set[str], load_factor: float) -> str:
    """The replica for a key: `ranking` its replicas by rendezvous score, `loads` their
    requests in flight, `warm` those that have served it."""
    least = min(loads[r] for r in ranking)
    margin = math.floor(least * (load_factor - 1))
    bound = least + max(MIN_SLACK, margin)
    warm_ranking = [r for r in ranking if r in warm]
    if not warm_ranking:
        return next(r for r in ranking if loads[r] <= bound)
    best_warm = min(warm_ranking, key=lambda r: loads[r])  # ties: the earlier in the ranking
    cold_bound = least + max(COLD_SLACK, 2 * margin)
    if loads[best_warm] <= cold_bound:  # (the wider bound: a cold replica compiles the key)
        return best_warm
    return next(r for r in ranking if loads[r] <= bound)  # a cold one: the least busy is within


class GrammarAffinityRouter(RequestRouter):
    # A replica answers Ray's queue-length probe from its event loop, which an engine step
    # on a busy CPU can hold up past Ray's default 0.1 s; a missed probe sends the request
    # to the next rank, a replica that may not hold its grammar.
    queue_len_response_deadline_s = 1.0

    def initialize_state(self, load_factor: float = DEFAULT_LOAD_FACTOR, **_: object) -> None:
        self.load_factor = load_factor
        self.in_flight: Counter[str] = Counter()  # replica -> requests this router sent, not yet done
        self.warm: OrderedDict[str, set[str]] = OrderedDict()  # key -> replicas sent it

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        route = route_of(pending_request)
        candidates = [r for r in candidate_replicas if name_of(r.replica_id) not in route.avoid] \
            or candidate_replicas
        if route.key is None:
            return [candidates]
        ranked = sorted(candidates, key=lambda r: rendezvous_score(route.key, name_of(r.replica_id)), reverse=True)
        ranking = [name_of(r.replica_id) for r in ranked]
        warm = self.warm_replicas(route.key)
        chosen = choose(ranking, {name: self.in_flight[name] for name in ranking}, warm, self.load_factor)
        route.preferred, route.rank, route.cold = chosen, ranking.index(chosen), bool(warm) and chosen not in warm
        self.remember(route.key, chosen)
        rank = route.rank
        return [ranked[rank:rank + 1], ranked[:rank] + ranked[rank + 1:]]

    def warm_replicas(self, key: str) -> set[str]:
        replicas = self.warm.get(key, set())
        if replicas:
            self.warm.move_to_end(key)
        return replicas

    def remember(self, key: str, replica: str) -> None:
        self.warm.setdefault(key, set()).add(replica)
        self.warm.move_to_end(key)
        while len(self.warm) > REMEMBERED_KEYS:
            self.warm.popitem(last=False)

    def update_replicas(self, replicas: List[RunningReplica]) -> None:
        super().update_replicas(replicas)
        running = {name_of(r.replica_id) for r in replicas}
        for key in list(self.warm):  # a replica that left takes its caches with it
            self.warm[key] &= running
            if not self.warm[key]:
                del self.warm[key]

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
