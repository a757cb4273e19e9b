"""`structgen serve --replicas 1 --ray-address ADDR` joining a cluster that `ray start`
started, as a user with a Ray cluster does: where the user has a Ray token (any local
`ray.init` leaves one in their home, as does `ray get-auth-token --generate`), Ray 2.60
starts that cluster with token authentication, and the server must present the token."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

pytest.importorskip("ray.serve")

from tests.engine.tiny_models import make_tokenized_checkpoint  # noqa: E402
from tests.server.serve_process import free_port, serve_process  # noqa: E402

RAY_CLI = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())"]


@pytest.fixture
def head_node(tmp_path):
    """A head node started by `ray start --block` in a home of its own, with a token
    there; stopped by stopping that command, which leaves other clusters alone."""
    port = free_port()
    env = dict(os.environ, HOME=str(tmp_path / "home"), RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_AUTH_MODE", None)
    subprocess.run([*RAY_CLI, "get-auth-token", "--generate"], env=env, check=True, capture_output=True)
    log = open(tmp_path / "head.log", "w")
    head = subprocess.Popen([*RAY_CLI, "start", "--head", "--block", "--port", str(port),
                             "--node-ip-address", "127.0.0.1", "--num-cpus", "2",
                             "--include-dashboard", "false", "--disable-usage-stats"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in (tmp_path / "head.log").read_text():  # (token authentication on)
        assert head.poll() is None and time.monotonic() < deadline, (tmp_path / "head.log").read_text()
        time.sleep(0.5)
    yield f"127.0.0.1:{port}", env
    head.terminate()
    head.wait(timeout=60)
    log.close()


def test_joins_a_cluster_with_token_authentication(head_node, tmp_path):
    address, env = head_node
    assert "Token authentication is enabled" in (tmp_path / "head.log").read_text()
    if not make_tokenized_checkpoint(tmp_path / "tiny"):
        pytest.skip("no SmolLM2 tokenizer at hand")
    args = ["--replicas", "1", "--ray-address", address, "--model", str(tmp_path / "tiny"), "--compile-workers", "0",
            "--drain-seconds", "2", "--served-model-name", "tiny"]
    with serve_process(tmp_path / "serve.log", 300, args, HOME=env["HOME"]) as server:
        reply = httpx.post(server.url + "/v1/chat/completions", timeout=120, json={
            "model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-structgen-replica"]
