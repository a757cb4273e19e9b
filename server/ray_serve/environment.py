"""The environment a Ray driver reads when Ray is imported, set before that import
(`prepare(ray_address)`): what `structgen serve --replicas` wants of the cluster it
starts or joins. Must not import Ray.

- No usage reports to the network from a server.
- A cluster this command starts has its Ray Serve controller look at the deployments
  once a second instead of ten times: at ten, it alone took 13% of a core while idle
  (a sixth of a 2-core machine's CPU), and a replica's death or an autoscaling decision
  waits at most a second more.
- Ray Serve's processes run each one event loop, not a thread and a loop per role: by
  default a replica runs its callable on a loop in a second thread and a deployment
  handle routes on a third, and each message a stream sends crosses those threads.
  Request-path logs are written in batches rather than line by line (access logs are
  off: app.py).
- Its worker processes run at niceness 0, not Ray's 15: an engine replica is a worker,
  and at 15 its engine thread lost its core to Ray's own threads at 0 (the raylet, the
  GCS, each process's gRPC and I/O threads): one replica of 1 CPU under 8 clients was
  runnable but off its core 18% of the time, on a machine a quarter idle.
- Ray Serve's high-throughput mode: HAProxy, not the Python proxy actor, takes the HTTP
  connections and hands them to the ingress's own HTTP server, and the ingress reaches
  the replicas over gRPC rather than Ray actor calls. One Python hop per streamed
  message goes, and with it about two thirds of the latency Ray added to a request
  (docs/scale-out.md). The ingress is held open after a drain only as long as that
  drain took: Ray's default hold of 30 s exists for load balancers outside Ray, and
  `structgen serve` drains on its own before it stops (cluster.py). Ray gives HAProxy's
  statistics page and metrics exporter and its fallback (the Python proxy, which
  HAProxy sends to while the ingress is down) fixed ports; a cluster this command starts
  takes ports the kernel picks instead. With the fixed ones, a second cluster on the
  machine found the first's fallback proxy listening on its port, and its HAProxy sent
  requests to the first cluster's replicas.
- Joining a cluster at an address: Ray leaves its cluster token out of a driver's calls
  unless `RAY_AUTH_MODE=token`, and a cluster started by `ray start` wants it (one
  without auth ignores it). So where Ray would find a token, the mode is token.

A variable the user set is left as it is.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

QUIET_CLUSTER = {
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "1.0",
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
    "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1000",
    "RAY_worker_niceness": "0",
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
    "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "0",
}


FIXED_PORTS = ("RAY_SERVE_HAPROXY_STATS_PORT", "RAY_SERVE_HAPROXY_METRICS_PORT",
               "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT", "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT")


def prepare(ray_address: str | None) -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray_address is None:
        for name, value in QUIET_CLUSTER.items():
            os.environ.setdefault(name, value)
        for name in FIXED_PORTS:
            os.environ.setdefault(name, str(free_port()))
    elif auth_token_at_hand():
        os.environ.setdefault("RAY_AUTH_MODE", "token")


def auth_token_at_hand() -> bool:
    """Whether Ray would find a cluster token here (where Ray looks for one)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()


def free_port() -> int:
    """A port no one listens on now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]
