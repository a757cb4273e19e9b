"""structgen on Ray Serve: one OpenAI-compatible endpoint over N engine replicas.

    request -> HAProxy (Ray Serve's) -> ingress.py (the same Guard; a Route from routes.py)
            -> router.py (a Ray RequestRouter: the replica that holds the grammar warm)
            -> replica.py (one engine; the request replayed through server.app, forwarding.py)

`structgen serve --replicas N` runs it on a local cluster bound to loopback
(cluster.py); `serve run server.ray_serve:build_app` runs it with Ray's own tools
(app.py). docs/scale-out.md has the figures and the story beyond one machine.
"""

from structgen.lazy import lazy_attributes

# Imported on first use, so that environment.py can run before Ray is imported.
_LAZY = {"ScaleOut": "server.ray_serve.app", "application": "server.ray_serve.app", "build_app": "server.ray_serve.app"}
__all__ = list(_LAZY)
__getattr__ = lazy_attributes(__name__, _LAZY)
