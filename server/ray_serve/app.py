"""The Ray Serve application: `ScaleOut` (how many engine replicas, their resources,
autoscaling and routing) and `application(options, scale)`, which binds the ingress to
the engine replicas. `build_app(args)` is the same for Ray's own tools:

    serve run server.ray_serve:build_app replicas=2 model=/path/to/model

Owns the deployments' settings; never the cluster (cluster.py) or the requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from ray import serve
from ray.serve import Application
from ray.serve.config import RequestRouterConfig

from server.drain import DRAIN_SECONDS
from server.launch import ServeOptions, options_from
from server.ray_serve.ingress import Ingress
from server.ray_serve.replica import EngineReplica
from server.ray_serve.router import DEFAULT_LOAD_FACTOR, GrammarAffinityRouter

ROUTERS = ("grammar", "power_of_two")  # ours, or Ray's default (for comparison)
# No line per request in Ray's logs, as `structgen serve` writes none: each line was
# written by three processes and read again by Ray's log monitor.
LOGGING = {"enable_access_log": False}


@dataclass(frozen=True)
class ScaleOut:
    replicas: int = 2
    ray_address: str | None = None  # None: start a local cluster on loopback
    replica_cpus: float = 1.0
    replica_gpus: float = 0.0
    min_replicas: int | None = None  # either bound given: Ray Serve autoscales within them
    max_replicas: int | None = None
    target_ongoing_requests: int = 16
    drain_seconds: float = DRAIN_SECONDS  # on shutdown, how long in-flight requests may finish
    router: str = "grammar"
    load_factor: float = DEFAULT_LOAD_FACTOR  # see router.py

    def __post_init__(self):
        if self.router not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, not {self.router!r}")
        if self.load_factor < 1:
            raise ValueError(f"load_factor must be at least 1, not {self.load_factor}")
        if self.min_replicas is not None and self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) exceeds max_replicas ({self.max_replicas})")

    @classmethod
    def from_mapping(cls, values: dict) -> "ScaleOut":
        return options_from(cls, values)

    def sizing(self) -> dict:
        """The replica count, or Ray Serve's autoscaling bounds."""
        if self.min_replicas is None and self.max_replicas is None:
            return {"num_replicas": self.replicas}
        low = self.min_replicas if self.min_replicas is not None else 1
        high = self.max_replicas if self.max_replicas is not None else max(low, self.replicas)
        return {"autoscaling_config": {"min_replicas": low, "max_replicas": high,
                                       "initial_replicas": min(max(self.replicas, low), high),
                                       "target_ongoing_requests": self.target_ongoing_requests}}


def application(options: ServeOptions, scale: ScaleOut) -> Application:
    router = RequestRouterConfig(request_router_class=GrammarAffinityRouter,
                                 request_router_kwargs={"load_factor": scale.load_factor}) \
        if scale.router == "grammar" else RequestRouterConfig()
    engines = serve.deployment(EngineReplica, name="EngineReplica").options(
        ray_actor_options={"num_cpus": scale.replica_cpus, "num_gpus": scale.replica_gpus},
        # the engine queues and batches itself: Ray may send it what it would accept
        max_ongoing_requests=options.max_waiting + (options.max_num_seqs or 64),
        request_router_config=router, graceful_shutdown_timeout_s=scale.drain_seconds,
        health_check_period_s=5, logging_config=LOGGING, **scale.sizing())
    ingress = serve.deployment(serve.ingress()(Ingress), name="Ingress").options(
        num_replicas=1, ray_actor_options={"num_cpus": 0}, max_ongoing_requests=100_000,
        graceful_shutdown_timeout_s=scale.drain_seconds, logging_config=LOGGING)
    return ingress.bind(engines.bind(options), options)


def build_app(args: dict) -> Application:
    """For `serve run server.ray_serve:build_app key=value ...`: any `ServeOptions` or
    `ScaleOut` field."""
    return application(ServeOptions.from_mapping(args), ScaleOut.from_mapping(args))
