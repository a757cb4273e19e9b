"""`structgen serve --replicas 2` as a user starts it: a real local Ray cluster on
loopback, Ray Serve's proxy, the ingress and two engine replicas of a tiny random-weight
model with SmolLM2's tokenizer, driven by the real `openai` client and httpx.

The routing and fault checks here; the client suite (tests/server/clients) runs against
this application too."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import time

import httpx
import jsonschema
import pytest

pytest.importorskip("ray.serve")

from structgen.background import BACKGROUND  # noqa: E402
from tests.engine.tiny_models import make_tokenized_checkpoint  # noqa: E402
from tests.server.serve_process import fields_after_comm, serve_process  # noqa: E402

START_TIMEOUT_S = 300
RAY_WORKER_NICENESS = 15  # Ray's default for its worker processes (`RAY_worker_niceness`)
REPLICA_PROCESS = "ServeReplica:structgen:EngineReplica"
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    model = tmp_path_factory.mktemp("tiny")
    if not make_tokenized_checkpoint(model):
        pytest.skip("no SmolLM2 tokenizer at hand")
    return model


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model):
    log = tmp_path_factory.mktemp("ray") / "serve.log"
    args = ["--replicas", "2", "--model", str(tiny_model), "--compile-workers", "0", "--drain-seconds", "5",
            "--served-model-name", "tiny"]
    with serve_process(log, START_TIMEOUT_S, args) as started:
        yield started


@pytest.fixture(scope="module")
def base_url(server) -> str:
    return server.url


def numbered_schema(i: int, min_length: int | None = None) -> dict:
    value = {"type": "integer"} if min_length is None else {"type": "string", "minLength": min_length}
    return {"type": "object", "properties": {f"field{i}": value}, "required": [f"field{i}"],
            "additionalProperties": False}


def schema_body(schema: dict, max_tokens: int = 40, **more) -> dict:
    return {"model": "tiny", "messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": max_tokens,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}, **more}




def metric(base_url: str, name: str, labels: str = "") -> float:
    """The sum of the samples of `name` whose labels include `labels` ('result="hit"');
    0 before any."""
    samples = [line for line in httpx.get(base_url + "/metrics", timeout=30).text.splitlines()
               if line.startswith(name + " ") or (line.startswith(name + "{") and labels in line)]
    return sum(float(line.rsplit(" ", 1)[1]) for line in samples)


def test_constrained_output_validates_through_the_openai_client(base_url):
    import openai

    client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="tiny", messages=[{"role": "user", "content": "Describe a person."}], max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    completion = raw.parse()
    assert raw.headers.get("x-structgen-replica")
    if completion.choices[0].finish_reason == "stop":
        jsonschema.validate(json.loads(completion.choices[0].message.content), PERSON)
    else:  # a random-weight model may run out of tokens; what it wrote is still a valid prefix
        assert completion.choices[0].message.content.startswith("{")


def test_one_schema_is_served_by_one_replica(base_url):
    replicas, hits_before = set(), metric(base_url, "structgen_replica_grammar_cache_total", 'result="hit"')
    for _ in range(5):
        response = httpx.post(base_url + "/v1/chat/completions", json=schema_body(numbered_schema(0)), timeout=120)
        assert response.status_code == 200, response.text
        replicas.add(response.headers["x-structgen-replica"])
    assert len(replicas) == 1, replicas
    assert metric(base_url, "structgen_replica_grammar_cache_total", 'result="hit"') == hits_before + 4


def replicas_answering(base_url: str, first_schema: int, within_s: float = 0.0) -> set[str]:
    """The replicas that answer requests for schemas new to the cluster, stopping at two:
    40 schemas, then more for up to `within_s` (a replica Ray restarts takes ~30 s)."""
    seen, deadline = set(), time.monotonic() + within_s
    for i in itertools.count(first_schema):  # a replica the ingress has not heard of yet gets none
        seen.add(httpx.post(base_url + "/v1/chat/completions", json=schema_body(numbered_schema(i), max_tokens=5),
                            timeout=120).headers["x-structgen-replica"])
        if len(seen) == 2 or (i >= first_schema + 40 and time.monotonic() > deadline):
            return seen


def test_schemas_spread_over_both_replicas_and_errors_are_openai_bodies(base_url):
    # /health answers once one replica is up; the second may still be starting (on a
    # loaded machine it was, once: all 40 schemas went to the first), so it gets time
    seen = replicas_answering(base_url, 1, within_s=60)
    assert len(seen) == 2, seen
    bad = httpx.post(base_url + "/v1/chat/completions", json=schema_body({"type": "object", "minProperties": -1}),
                     timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_schema", bad.text
    assert httpx.get(base_url + "/nowhere", timeout=60).json()["error"]["type"] == "invalid_request_error"


def test_a_killed_replicas_pending_requests_complete_on_the_other(server):
    """Three long requests go to each replica (no replica is loaded past the router's
    bound); one replica's process is killed. Every request still answers 200, each from
    the replica left, and Ray starts a new one."""
    base_url = server.url
    by_replica: dict[str, list[int]] = {}
    for i in range(100, 140):  # long outputs: strings of at least 4,000 characters
        response = httpx.post(base_url + "/v1/chat/completions", json=schema_body(numbered_schema(i, 4000),
                                                                                  max_tokens=1), timeout=120)
        by_replica.setdefault(response.headers["x-structgen-replica"], []).append(i)
        if len(by_replica) == 2 and all(len(v) >= 3 for v in by_replica.values()):
            break
    first, second = by_replica.values()
    chosen = [i for pair in zip(first[:3], second[:3]) for i in pair]  # alternating: loads stay even
    assert len(chosen) == 6, by_replica
    retries_before = metric(base_url, "structgen_replica_retries_total")

    async def requests_with_a_kill():
        async with httpx.AsyncClient(timeout=300) as client:
            pending = [asyncio.create_task(client.post(
                base_url + "/v1/chat/completions",
                json=schema_body(numbered_schema(i, 4000), max_tokens=800)))
                for i in chosen]
            await asyncio.sleep(2.0)
            assert not any(task.done() for task in pending), "the requests finished before the kill"
            os.kill(server.descendants(REPLICA_PROCESS)[0], signal.SIGKILL)
            return await asyncio.gather(*pending)

    responses = asyncio.run(requests_with_a_kill())
    assert [r.status_code for r in responses] == [200] * 6, [r.text[:200] for r in responses]
    # the killed replica answered none: one of the two first replicas served them all,
    # with the replica Ray started in its place when it came up in time for a retry
    assert len({r.headers["x-structgen-replica"] for r in responses} & set(by_replica)) == 1
    assert metric(base_url, "structgen_replica_retries_total") >= retries_before + 2  # at least two were pending
    deadline = time.monotonic() + 60
    while len(server.descendants(REPLICA_PROCESS)) < 2:
        assert time.monotonic() < deadline, "Ray did not restart the killed replica within 60 s"
        time.sleep(1)
    assert httpx.get(base_url + "/health", timeout=30).status_code == 200


def thread_niceness(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                out.append(int(fields_after_comm(stat.read())[16]))  # proc(5)'s field 19, nice
        except (OSError, IndexError):
            continue
    return out


def test_replica_threads_run_at_the_engines_priority_not_rays_default(server, base_url):
    """Ray runs its workers at niceness 15 unless told otherwise, and an engine replica
    is a worker: at 15 its engine thread gave its core to every Ray thread at 0. A
    cluster `structgen serve` starts runs them at 0, so no thread of a replica is at
    15 (structgen's background work runs at its own niceness, below the engine's). Both
    replicas answer first: one Ray has just restarted is counted once it serves."""
    assert len(replicas_answering(base_url, 300, within_s=120)) == 2
    replicas = server.descendants(REPLICA_PROCESS)
    assert len(replicas) == 2, replicas
    for pid in replicas:
        niceness = thread_niceness(pid)
        assert min(niceness) == 0, niceness  # the engine's threads and Ray's
        assert max(niceness) <= BACKGROUND < RAY_WORKER_NICENESS, niceness


def test_a_second_cluster_on_the_machine_answers_with_its_own_replicas(tiny_model, base_url, tmp_path):
    """Ray Serve's HAProxy mode gives its side ports (statistics, metrics, the fallback
    proxy HAProxy sends to while the ingress is down) fixed numbers. A second cluster
    given those found the first's fallback proxy on its port, and answered even /health
    and /v1/models from the first cluster's replicas."""
    first = replicas_answering(base_url, 400, within_s=120)
    args = ["--replicas", "1", "--model", str(tiny_model), "--compile-workers", "0", "--drain-seconds", "2",
            "--served-model-name", "second"]
    with serve_process(tmp_path / "second.log", START_TIMEOUT_S, args) as second:
        models = httpx.get(second.url + "/v1/models", timeout=30)
        assert [m["id"] for m in models.json()["data"]] == ["second"]
        answered_by = {httpx.post(second.url + "/v1/chat/completions", timeout=120,
                                  json={**schema_body(numbered_schema(i), max_tokens=5), "model": "second"}
                                  ).headers["x-structgen-replica"] for i in range(500, 506)}
        assert len(answered_by) == 1 and not answered_by & first, (answered_by, first)
    assert replicas_answering(base_url, 600) == first  # and the first cluster still has its own


def test_rendezvous_moves_only_the_keys_of_a_replica_that_left():
    from server.ray_serve.router import rendezvous_score

    def owner(key: str, replicas: list[str]) -> str:
        return max(replicas, key=lambda replica: rendezvous_score(key, replica))

    keys = [f"key{i}" for i in range(600)]
    before = {key: owner(key, ["a", "b", "c"]) for key in keys}
    after = {key: owner(key, ["a", "b"]) for key in keys}
    assert all(after[key] == before[key] for key in keys if before[key] != "c")
    assert 150 < sum(before[key] == "c" for key in keys) < 250  # a third each, near enough


def test_scale_out_options_are_checked_and_passed_to_ray():
    from server.ray_serve.app import ScaleOut

    assert ScaleOut.from_mapping({"replicas": "3"}).sizing() == {"num_replicas": 3}
    scaled = ScaleOut.from_mapping({"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 8}).sizing()
    assert scaled["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 4, "initial_replicas": 2,
                                            "target_ongoing_requests": 8}
    with pytest.raises(ValueError, match="exceeds"):
        ScaleOut(min_replicas=3, max_replicas=2)
    with pytest.raises(ValueError, match="router"):
        ScaleOut(router="random")


def test_a_key_stays_on_its_warm_replica_until_the_wider_cold_bound():
    from server.ray_serve.router import COLD_SLACK, MIN_SLACK, choose

    ranking = ["a", "b", "c"]  # the key's rendezvous ranking
    # new to every replica: its first replica within the load bound
    assert choose(ranking, {"a": 0, "b": 0, "c": 0}, set(), 1.5) == "a"
    assert choose(ranking, {"a": MIN_SLACK + 1, "b": 0, "c": 0}, set(), 1.5) == "b"
    # warm on "c" alone: it keeps the key up to COLD_SLACK beyond the least busy, then "a" compiles it
    assert choose(ranking, {"a": 0, "b": 0, "c": COLD_SLACK}, {"c"}, 1.5) == "c"
    assert choose(ranking, {"a": 0, "b": 0, "c": COLD_SLACK + 1}, {"c"}, 1.5) == "a"
    # at larger loads the margins grow with the load factor
    assert choose(ranking, {"a": 20, "b": 20, "c": 39}, {"c"}, 1.5) == "c"
    assert choose(ranking, {"a": 20, "b": 20, "c": 41}, {"c"}, 1.5) == "a"
    # warm on two: the less busy of them, whatever the ranking
    assert choose(ranking, {"a": 3, "b": 0, "c": 1}, {"a", "c"}, 1.5) == "c"
    assert choose(ranking, {"a": 1, "b": 0, "c": 1}, {"a", "c"}, 1.5) == "a"


def test_a_key_served_while_one_replica_was_up_stays_on_it_when_another_comes():
    """Replicas start one by one: the router remembers where a key went while it knew of
    one replica only, so the next replica, even if it ranks first for the key, does not
    take it cold."""
    from types import SimpleNamespace

    from server.ray_serve.router import GrammarAffinityRouter, rendezvous_score
    from server.ray_serve.routes import BY_GRAMMAR, Route

    def replica(name: str):
        return SimpleNamespace(replica_id=SimpleNamespace(unique_id=name))

    def choose(key: str, replicas: list) -> list[list[str]]:
        pending = SimpleNamespace(kwargs={"route": Route(BY_GRAMMAR, key)})
        ranks = asyncio.run(router.choose_replicas(replicas, pending))
        return [[r.replica_id.unique_id for r in rank] for rank in ranks]

    router = GrammarAffinityRouter.__new__(GrammarAffinityRouter)  # the routing state only, no Ray
    router.initialize_state()
    key = next(f"key{i}" for i in range(100) if rendezvous_score(f"key{i}", "late") > rendezvous_score(f"key{i}", "early"))
    assert choose(key, [replica("early")]) == [["early"], []]
    assert choose(key, [replica("early"), replica("late")])[0] == ["early"]
