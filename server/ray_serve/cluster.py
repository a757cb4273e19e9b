"""`structgen serve --replicas N`: a Ray cluster (a local one bound to loopback, or the
one at `--ray-address`), Ray Serve's HTTP proxy on the given host and port, and the
application (app.py) on it, until SIGTERM or Ctrl-C; then in-flight requests get
`drain_seconds` to finish before everything stops. The environment it wants of Ray is
environment.py's, set before Ray is imported (the CLI does). Owns the cluster's life only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from server.launch import ServeOptions
from server.ray_serve.app import LOGGING, ScaleOut, application

APP_NAME = "structgen"


def serve_replicated(options: ServeOptions, scale: ScaleOut, *, host: str, port: int) -> int:
    import ray
    from ray import serve

    _connect(ray, scale)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # after ray.init, which sets its own
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": host, "port": port}, logging_config=LOGGING)
        serve.run(application(options, scale), name=APP_NAME, route_prefix="/", blocking=False)
        print(f"structgen serve: {scale.replicas} engine replicas on http://{host}:{port}/v1 (Ray Serve)",
              file=sys.stderr, flush=True)
        stop.wait()
        print(f"structgen serve: draining in-flight requests for up to {scale.drain_seconds:.0f} s",
              file=sys.stderr, flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0


def _connect(ray, scale: ScaleOut) -> None:
    quiet = {"log_to_driver": False, "configure_logging": False}
    if scale.ray_address is not None:
        ray.init(address=scale.ray_address, **quiet)
        return
    wanted = scale.replicas * scale.replica_cpus
    cpus = max(os.cpu_count() or 1, int(wanted + 0.999))
    if wanted > (os.cpu_count() or 1):
        print(f"structgen serve: {scale.replicas} replicas of {scale.replica_cpus:g} CPUs share "
              f"{os.cpu_count()} cores", file=sys.stderr)
    ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=cpus, num_gpus=_gpus(scale), **quiet)


def _gpus(scale: ScaleOut) -> int | None:
    """None: Ray counts the machine's GPUs itself."""
    return None if scale.replica_gpus else 0
