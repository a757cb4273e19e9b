"""Prometheus metrics of one server instance (its own registry, so that several apps in
one process — tests — do not collide). Owns metric definitions only."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

import structgen

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("structgen_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.waiting = Gauge("structgen_queue_depth", "requests waiting to be scheduled", registry=r)
        self.running = Gauge("structgen_running_sequences", "sequences in the running batch", registry=r)
        self.kv_used = Gauge("structgen_kv_blocks_used", "KV cache blocks in use", registry=r)
        self.kv_total = Gauge("structgen_kv_blocks_total", "KV cache blocks", registry=r)
        self.ttft = Histogram("structgen_time_to_first_token_seconds", "time to first token",
                              buckets=LATENCY_BUCKETS, registry=r)
        self.tpot = Histogram("structgen_time_per_output_token_seconds", "time per output token after the first",
                              buckets=LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram("structgen_request_latency_seconds", "end-to-end request latency",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.compile_time = Histogram("structgen_grammar_compile_seconds",
                                      "grammar compile time (cache hits too), by the kind of grammar", ["kind"],
                                      buckets=LATENCY_BUCKETS, registry=r)
        self.compile_cache_hits = Counter("structgen_grammar_cache_hits", "grammar compiles served from cache",
                                          registry=r)
        self.compiles_cancelled = Counter("structgen_grammar_compiles_cancelled",
                                          "compiles stopped because their client disconnected", registry=r)
        self.forced_tokens = Counter("structgen_fast_forwarded_tokens", "output tokens appended by jump-forward",
                                     registry=r)
        self.output_tokens = Counter("structgen_output_tokens", "output tokens produced", registry=r)
        r.register(GrammarCacheCollector())


class GrammarCacheCollector:
    """The compiled-grammar cache's size, read when /metrics is scraped."""

    def collect(self):
        info = structgen.cache_info()
        yield GaugeMetricFamily("structgen_grammar_cache_bytes", "memory held by cached grammars (estimate)",
                                value=info["bytes"])
        yield GaugeMetricFamily("structgen_grammar_cache_budget_bytes", "the grammar cache's memory budget",
                                value=info["budget_bytes"])
        yield GaugeMetricFamily("structgen_grammar_cache_entries", "grammars in the cache", value=info["size"])
        yield GaugeMetricFamily("structgen_grammar_cache_evicted_in_use_bytes",
                                "memory held by evicted grammars that running requests still use (counted "
                                "against the budget)", value=info["evicted_in_use_bytes"])
        yield CounterMetricFamily("structgen_grammar_cache_evictions", "grammars evicted to stay within the budget",
                                  value=info["evictions"])
