"""`structgen serve --replicas N`: a Ray cluster (a local one bound to loopback, or the
one at `--ray-address`), Ray Serve's HTTP proxy (HAProxy in the mode environment.py
sets) on the given host and port, and the application (app.py) on it, until SIGTERM or
Ctrl-C; then in-flight requests get `drain_seconds` to finish before everything stops.
The environment it wants of Ray is environment.py's, set before Ray is imported (the
CLI does). Owns the cluster's life only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time

from server.launch import ServeOptions
from server.ray_serve.app import LOGGING, ScaleOut, application

APP_NAME = "structgen"
DRAIN_POLL_S = 0.2  # how often a drain asks the ingress how many requests are in flight
DRAIN_POLL_TIMEOUT_S = 10.0
LAST_BYTES_S = 0.5  # after the last answer left the ingress, before the proxy is stopped


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
        asyncio.run(_drain_then_shut_down(serve, scale.drain_seconds))
    finally:
        serve.shutdown()  # after a drain, nothing is left to shut down
        ray.shutdown()
    return 0


async def _drain_then_shut_down(serve, seconds: float) -> None:
    """On one event loop: the ingress handle the drain makes routes on it, and Ray Serve's
    shutdown closes that handle there."""
    await _drain(serve, seconds)
    await serve.shutdown_async()


async def _drain(serve, seconds: float) -> None:
    """New requests get a 503 from now on; returns once those in flight are answered
    (and a moment more, for the proxy to pass on their last bytes), or after `seconds`.
    Async: a handle of this cluster routes on the caller's event loop (environment.py)."""
    ingress = serve.get_app_handle(APP_NAME)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            in_flight = await asyncio.wait_for(ingress.drain.remote(), DRAIN_POLL_TIMEOUT_S)
        except Exception as err:  # the ingress is gone or stuck: nothing more to wait for
            print(f"structgen serve: the ingress did not answer while draining ({err!r}); stopping",
                  file=sys.stderr, flush=True)
            return
        if in_flight == 0:
            await asyncio.sleep(LAST_BYTES_S)
            return
        await asyncio.sleep(DRAIN_POLL_S)
    print(f"structgen serve: requests still in flight after {seconds:.0f} s; stopping", file=sys.stderr, flush=True)


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
