"""The ingress's Prometheus metrics: requests by endpoint and status, and per replica
the requests it served by how they were routed, its grammar cache hits and misses (as
its responses report them), with the hit rate and the affinity share worked out at
each scrape; requests retried after a replica failed, and streams a failure cut.
Owns metric definitions only."""

from __future__ import annotations

from collections import defaultdict

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily


class ScaleOutMetrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("structgen_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.routed = Counter("structgen_replica_requests", "requests each replica served, by how they were "
                              "routed: grammar or prefix affinity, spilled from a busy replica, or load", ["replica", "routed_by"], registry=r)
        self.grammar_cache = Counter("structgen_replica_grammar_cache", "grammar cache lookups of each replica's "
                                     "requests, by result (hit or miss)", ["replica", "result"], registry=r)
        self.retries = Counter("structgen_replica_retries", "requests sent again after their replica failed "
                               "before answering", registry=r)
        self.cut_streams = Counter("structgen_replica_cut_streams", "responses ended by an error event because "
                                   "their replica failed mid-stream", registry=r)
        self._routed_by = defaultdict(lambda: defaultdict(int))
        self._cache = defaultdict(lambda: defaultdict(int))
        r.register(_Shares(self._routed_by, self._cache))

    def served(self, replica: str, routed_by: str, grammar_cache: str | None) -> None:
        self.routed.labels(replica, routed_by).inc()
        self._routed_by[replica][routed_by] += 1
        if grammar_cache in ("hit", "miss"):
            self.grammar_cache.labels(replica, grammar_cache).inc()
            self._cache[replica][grammar_cache] += 1


class _Shares:
    """Per replica: the grammar cache hit rate and the share of requests routed by affinity."""

    def __init__(self, routed_by, cache):
        self.routed_by, self.cache = routed_by, cache

    def collect(self):
        hit_rate = GaugeMetricFamily("structgen_replica_grammar_cache_hit_rate",
                                     "share of a replica's grammar lookups that hit its cache", labels=["replica"])
        affinity = GaugeMetricFamily("structgen_replica_affinity_share",
                                     "share of a replica's requests routed to it by grammar or prefix affinity",
                                     labels=["replica"])
        for replica, counts in list(self.cache.items()):
            total = counts["hit"] + counts["miss"]
            if total:
                hit_rate.add_metric([replica], counts["hit"] / total)
        for replica, counts in list(self.routed_by.items()):
            total = sum(counts.values())
            if total:
                affinity.add_metric([replica], (counts["grammar"] + counts["prefix"]) / total)
        yield hit_rate
        yield affinity
