"""Constrained decoding in the engine with the real SmolLM2 model: masks, EOS, early
finish, incomplete outputs, async compiles, and jump-forward (canonical tokens, matcher
consistency, fewer forward passes). Sampling at temperature 1.0 is the fuzzer."""

from __future__ import annotations

import json
import random
import threading
from concurrent.futures import Future

import jsonschema
import pytest

import structgen
from structgen.chat import render_chat
from structgen.engine import Engine, SamplingParams
from structgen.engine.jump_forward import extendable_tokens, plan_jump
from structgen.validation import schema_error
from tests.paths import GRAMMARS, MASKBENCH

PROFILE = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
           "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def engine():
    return Engine(kv_cache_bytes=256 << 20, max_num_seqs=32)


def chat_ids(engine, text, schema=None):
    """A chat prompt; the schema is shown to the model when it is short enough to help."""
    system = None
    if schema is not None:
        shown = json.dumps(schema)
        system = "Reply with JSON" + (f" following this schema: {shown}" if len(shown) < 2000 else ".")
    return engine.tokenizer.encode(render_chat(engine.tokenizer, text, system), add_special_tokens=False)


def run_to_completion(engine) -> dict:
    """Step until every request finished: request id -> its final output."""
    finished = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                finished[out.request_id] = out
    return finished


def replay(grammar, token_ids, eos_ids):
    """A fresh matcher accepts the whole output, token by token (EOS included)."""
    matcher = grammar.matcher()
    for token in token_ids:
        assert matcher.accept_token(token), f"token {token} refused on replay"
    return matcher


# -- planning a jump -------------------------------------------------------------------


def test_plan_jump_is_canonical_and_backs_off_extendable_tail(engine):
    vocab, tok = engine.vocab, engine.tokenizer
    tail = tok.encode("{", add_special_tokens=False)
    jump = plan_jump(tail, b'"name": "', vocab, tok, max_new_tokens=100)
    assert jump is not None
    new_ids = tail[: len(tail) - jump.rollback] + jump.append
    spelled = vocab.decode(new_ids)
    full = b'{"name": "'
    assert full.startswith(spelled) and len(spelled) > 1
    canonical = tok.encode(full.decode(), add_special_tokens=False)
    assert new_ids == canonical[: len(new_ids)]  # a prefix of the tokenizer's own ids
    backed_off = 1 if canonical[-1] in extendable_tokens(vocab) else 0
    assert len(new_ids) == len(canonical) - backed_off
    assert jump.new_bytes == spelled[len(b"{"):]


def test_plan_jump_respects_the_token_cap_and_split_characters(engine):
    vocab, tok = engine.vocab, engine.tokenizer
    tail = tok.encode("[", add_special_tokens=False)
    capped = plan_jump(tail, b'"aaaa bbbb cccc dddd eeee",', vocab, tok, max_new_tokens=2)
    assert capped is not None and len(capped.append) - capped.rollback <= 2
    assert plan_jump(tail, "é".encode()[:1], vocab, tok, max_new_tokens=10) is None


# -- masks, EOS, finish ----------------------------------------------------------------


@pytest.mark.parametrize("jump", [True, False])
def test_profile_schema_greedy_validates(engine, jump):
    grammar = structgen.compile_json_schema(PROFILE, engine.vocab)
    prompt = chat_ids(engine, "Describe a person.", PROFILE)
    out = engine.generate([prompt], SamplingParams(max_tokens=60, temperature=0.0),
                          grammars=[grammar])[0] if jump else _no_jump(engine, prompt, grammar)
    assert out.finish_reason == "stop" and not out.incomplete
    jsonschema.validate(json.loads(out.text), PROFILE)
    replay(grammar, out.token_ids, engine.eos_token_ids)
    if jump:
        assert out.metrics.num_forced_tokens > 0 and out.metrics.num_jumps > 0
    else:
        assert out.metrics.num_forced_tokens == 0


def _no_jump(engine, prompt, grammar):
    rid = engine.add_request(prompt, SamplingParams(max_tokens=60, temperature=0.0), grammar=grammar,
                             jump_forward=False)
    return _run_until(engine, rid)


def _run_until(engine, request_id):
    while True:
        for out in engine.step():
            if out.request_id == request_id and out.finished:
                return out


def test_jump_forward_saves_forward_passes_and_keeps_the_text(engine):
    grammar = structgen.compile_json_schema(PROFILE, engine.vocab)
    prompt = chat_ids(engine, "Describe a person named Ann.", PROFILE)
    params = SamplingParams(max_tokens=60, temperature=0.0)
    steps_before = engine.stats().steps
    off = _no_jump(engine, prompt, grammar)
    steps_off = engine.stats().steps - steps_before
    rid = engine.add_request(prompt, params, grammar=grammar, jump_forward=True)
    on = _run_until(engine, rid)
    steps_on = engine.stats().steps - steps_before - steps_off
    assert json.loads(on.text) == json.loads(off.text)
    assert steps_on < steps_off
    assert on.metrics.num_sampled_tokens + on.metrics.num_forced_tokens == len(on.token_ids)


def test_length_cut_is_flagged_incomplete(engine):
    grammar = structgen.compile_json_schema(PROFILE, engine.vocab)
    out = engine.generate([chat_ids(engine, "Describe a person.", PROFILE)],
                          SamplingParams(max_tokens=3, temperature=0.0), grammars=[grammar])[0]
    assert out.finish_reason == "length" and out.incomplete
    with pytest.raises(ValueError):
        json.loads(out.text)


def test_choice_finishes_as_soon_as_complete(engine):
    grammar = structgen.compile_choice(["yes", "no", "maybe"], engine.vocab)
    out = engine.generate([chat_ids(engine, "Is the sky blue? Answer yes or no.")],
                          SamplingParams(max_tokens=20, temperature=0.0), grammars=[grammar])[0]
    assert out.text in ("yes", "no", "maybe") and out.finish_reason == "stop"


def test_regex_requests_match(engine):
    pattern = r"[0-9]{3}-[0-9]{4}"
    grammar = structgen.compile_regex(pattern, engine.vocab)
    import re

    outs = engine.generate([chat_ids(engine, "Give me a phone number.")] * 4,
                           [SamplingParams(max_tokens=20, temperature=1.0, seed=s) for s in range(4)],
                           grammars=[grammar] * 4)
    for out in outs:
        assert out.finish_reason == "stop" and re.fullmatch(pattern, out.text), out.text


def test_unconstrained_and_constrained_share_a_batch(engine):
    grammar = structgen.compile_json_schema({"type": "array", "items": {"type": "integer"}, "maxItems": 3},
                                            engine.vocab)
    prompt = chat_ids(engine, "List numbers.")
    outs = engine.generate([prompt, prompt], SamplingParams(max_tokens=30, temperature=0.0),
                           grammars=[grammar, None])
    assert isinstance(json.loads(outs[0].text), list)
    assert outs[1].metrics.mask_time_s == 0.0 and outs[0].metrics.mask_time_s > 0.0


class FirstMaskWaits:
    """A real matcher whose first mask is only filled once `gate` is set: a first visit
    to a state as slow as the test needs (a 20,000-value `enum`'s first mask walks the
    vocabulary through every value's prefix, ~0.4 s on 2 cores, but under load the
    decode steps slow down as much, so its real time cannot pin down the order)."""

    def __init__(self, matcher, gate: threading.Event):
        self.matcher, self.gate = matcher, gate
        self.gate_timed_out = False

    def fill_bitmask(self, rows, index) -> None:
        self.gate_timed_out |= not self.gate.wait(timeout=30)
        self.matcher.fill_bitmask(rows, index)

    def __getattr__(self, name):
        return getattr(self.matcher, name)


def test_a_late_mask_holds_up_only_its_own_request(engine):
    """While one request's mask is late, the stream beside it keeps getting tokens and
    that request sits out; once its mask is ready it samples from its kept logits under
    its mask like any other. (An engine that waited for the mask would stop the stream:
    no token of it while the request is held, and the gate's timeout to get past.)"""
    words = ["apple", "banana", "cherry", "damson", "elderberry", "fig", "grape"]
    gate = threading.Event()
    late = FirstMaskWaits(structgen.compile_json_schema({"enum": words}, engine.vocab).matcher(), gate)
    slow = engine.add_request(chat_ids(engine, "Pick a fruit."), SamplingParams(max_tokens=12, temperature=0.0),
                              matcher=late)
    stream = engine.add_request(chat_ids(engine, "Tell a story."),
                                SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True))
    tokens_while_held, finished = 0, {}
    while engine.has_unfinished_requests():
        outputs = engine.step()
        held = slow in engine.requests and engine.requests[slow].awaiting_mask
        tokens_while_held += held * sum(len(o.new_token_ids) for o in outputs if o.request_id == stream)
        if tokens_while_held >= 5:
            gate.set()
        finished.update({o.request_id: o for o in outputs if o.finished})
    assert tokens_while_held >= 5 and not late.gate_timed_out  # the mask came when the gate opened
    assert json.loads(finished[slow].text) in words
    assert len(finished[stream].token_ids) == 40
    assert engine.blocks.stats().used == 0


# -- grammars that are still compiling -------------------------------------------------


@pytest.fixture(params=[True, False], ids=["prefill-while-compiling", "wait-to-be-scheduled"])
def compile_overlap(engine, request):
    """The engine with each setting of `prefill_while_compiling`, restored after."""
    before = engine.prefill_while_compiling
    engine.prefill_while_compiling = request.param
    yield engine
    engine.prefill_while_compiling = before


def test_compiling_grammar_waits_beside_the_batch_and_failures_are_reported(compile_overlap):
    engine = compile_overlap
    pending: Future = Future()
    failing: Future = Future()
    prompt = chat_ids(engine, "Describe a person.", PROFILE)
    waiting_id = engine.add_request(prompt, SamplingParams(max_tokens=60, temperature=0.0), grammar=pending)
    failing_id = engine.add_request(prompt, SamplingParams(max_tokens=60), grammar=failing)
    other = engine.add_request(chat_ids(engine, "Hi"), SamplingParams(max_tokens=5, temperature=0.0))
    for _ in range(3):
        engine.step()
    assert engine.requests[waiting_id].matcher is None  # still waiting; the batch ran
    failing.set_exception(structgen.SchemaError("bad schema", "/properties/x"))
    pending.set_result(structgen.compile_json_schema(PROFILE, engine.vocab))
    finished = run_to_completion(engine)
    assert finished[failing_id].finish_reason == "error" and "/properties/x" in finished[failing_id].error
    jsonschema.validate(json.loads(finished[waiting_id].text), PROFILE)
    assert finished[other].finish_reason in ("stop", "length")
    assert engine.blocks.stats().used == 0


@pytest.mark.parametrize("compile_overlap", [True], ids=["prefill-while-compiling"], indirect=True)
def test_a_prompt_is_computed_while_its_grammar_compiles(compile_overlap):
    """The prompt of a request whose grammar is still compiling is computed beside the
    batch; the request then holds its logits, samples nothing and keeps its blocks until
    the grammar is there, and samples from those logits under the grammar's first mask:
    the same output as a request given the compiled grammar at once. A compile that
    fails after the prompt was computed frees its blocks."""
    engine = compile_overlap
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    prompt = chat_ids(engine, "Name a large city and its population.", schema)
    grammar = structgen.compile_json_schema(schema, engine.vocab)
    params = SamplingParams(max_tokens=40, temperature=0.0)
    direct = engine.add_request(prompt, params, grammar=grammar)
    expected = run_to_completion(engine)[direct]

    pending, failing = Future(), Future()
    waiting_id = engine.add_request(prompt, params, grammar=pending)
    failing_id = engine.add_request(chat_ids(engine, "Another city, please."), params, grammar=failing)
    stream = engine.add_request(chat_ids(engine, "Tell a story."),
                                SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True))
    stream_tokens = 0
    for _ in range(6):
        stream_tokens += sum(len(o.new_token_ids) for o in engine.step() if o.request_id == stream)
    waiting, failed = engine.requests[waiting_id], engine.requests[failing_id]
    for request in (waiting, failed):
        assert request.num_computed_tokens == request.num_prompt_tokens  # computed while compiling
        assert request.awaiting_mask and request.matcher is None and request.num_output_tokens == 0
    assert stream_tokens >= 4  # the batch went on beside them
    failing.set_exception(structgen.SchemaError("bad schema", "/properties/city"))
    reported = {o.request_id: o for o in engine.step()}
    assert reported[failing_id].finish_reason == "error" and "/properties/city" in reported[failing_id].error
    assert failing_id not in engine.requests and not failed.block_table
    pending.set_result(grammar)
    finished = run_to_completion(engine)
    assert finished[waiting_id].token_ids == expected.token_ids
    jsonschema.validate(json.loads(finished[waiting_id].text), schema)
    assert engine.blocks.stats().used == 0


# -- the fuzzer ------------------------------------------------------------------------


def maskbench_schemas(count: int, seed: int = 0):
    files = sorted(MASKBENCH.glob("*.json"))
    random.Random(seed).shuffle(files)
    for path in files:
        yield path.name, json.loads(path.read_text())["schema"]


@pytest.mark.slow
@pytest.mark.parametrize("jump", [True, False])
def test_maskbench_schemas_sampled_at_temperature_one_validate(engine, jump):
    """Random sampling as a fuzzer over real schemas: every output that finished with
    "stop" validates. (benchmarks/constrained.py --validate runs 300+ schemas.)"""
    grammars, names = [], []
    for name, schema in maskbench_schemas(200, seed=1):
        try:
            grammars.append((structgen.compile_json_schema(schema, engine.vocab), schema))
            names.append(name)
        except structgen.StructgenError:
            continue
        if len(grammars) == 24:
            break
    prompts = [chat_ids(engine, "Produce an example.", schema) for _, schema in grammars]
    params = [SamplingParams(max_tokens=200, temperature=1.0, seed=i) for i in range(len(prompts))]
    ids = [engine.add_request(p, sp, grammar=g, jump_forward=jump)
           for p, sp, (g, _) in zip(prompts, params, grammars)]
    finished = run_to_completion(engine)
    stopped = 0
    for rid, (grammar, schema), name in zip(ids, grammars, names):
        out = finished[rid]
        replay(grammar, out.token_ids, engine.eos_token_ids)
        if out.finish_reason == "stop":
            stopped += 1
            assert schema_error(out.text, schema) is None, (name, out.text)
        else:
            assert out.incomplete
    # Not vacuous: a 135M model at temperature 1 often rambles inside strings until
    # max_tokens, but a good share of the outputs must finish and be validated above.
    assert stopped >= len(ids) // 4


def test_masks_filled_during_the_forward_give_the_same_outputs(engine):
    """overlap_masks=True (the GPU default: masks filled in a worker thread while the
    forward runs) changes timing only, never tokens."""
    overlapped = Engine(kv_cache_bytes=64 << 20, overlap_masks=True)
    grammar = structgen.compile_json_schema(PROFILE, engine.vocab)
    prompts = [chat_ids(engine, f"Describe person number {i}.", PROFILE) for i in range(3)]
    params = SamplingParams(max_tokens=60, temperature=0.0)
    expected = [o.token_ids for o in engine.generate(prompts, params, grammars=[grammar] * 3)]
    got = [o.token_ids for o in overlapped.generate(prompts, params, grammars=[grammar] * 3)]
    assert got == expected


def recursive_maskbench_schemas(count: int):
    """maskbench-dev schemas that compile to recursive rules (the context-free path)."""
    from structgen.grammar import ir
    from structgen.grammar.json_schema import schema_to_ir

    found = []
    for name, schema in maskbench_schemas(10_000, seed=2):
        try:
            refs = {r.name for r in ir.refs_in(schema_to_ir(schema))} - {"any JSON value"}
        except structgen.StructgenError:
            continue
        if refs:
            found.append((name, schema))
            if len(found) == count:
                break
    return found


@pytest.mark.slow
@pytest.mark.parametrize("jump", [True, False])
def test_recursive_schemas_json_object_and_lark_sampled_at_temperature_one(engine, jump):
    """The context-free path in the engine: recursive schemas, json_object and a lark
    grammar, sampled at temperature 1 with jump-forward on and off. Every output that
    finished validates (or parses); every token sequence replays through a fresh matcher."""
    import lark

    tree = {"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                                               "children": {"type": "array", "maxItems": 3,
                                                                            "items": {"$ref": "#/$defs/node"}}},
                               "required": ["name", "children"], "additionalProperties": False}},
            "$ref": "#/$defs/node"}
    schemas = [s for _, s in recursive_maskbench_schemas(3)] + [tree, {"type": "object"}]
    cases = [(structgen.compile_json_schema(s, engine.vocab), s, "schema") for s in schemas]
    for name in ("json.lark", "arithmetic.lark"):
        text = (GRAMMARS / name).read_text()
        cases.append((structgen.compile_grammar(text, engine.vocab), text, "lark"))
    prompts = [chat_ids(engine, "Produce an example.", s if kind == "schema" else {}) for _, s, kind in cases]
    params = [SamplingParams(max_tokens=160, temperature=1.0, min_p=0.1, seed=10 + i) for i in range(len(prompts))]
    ids = [engine.add_request(p, sp, grammar=g, jump_forward=jump) for p, sp, (g, _, _) in zip(prompts, params, cases)]
    finished = run_to_completion(engine)
    stopped = 0
    for rid, (grammar, source, kind) in zip(ids, cases):
        out = finished[rid]
        assert out.error is None, out.error
        replay(grammar, out.token_ids, engine.eos_token_ids)
        if out.finish_reason != "stop":
            assert out.incomplete
            continue
        stopped += 1
        if kind == "schema":
            assert schema_error(out.text, source) is None, out.text
        else:
            lark.Lark(source, parser="earley", lexer="dynamic_complete").parse(out.text)
    # Not vacuous: big recursive schemas at temperature 1 often run out of tokens inside
    # long strings (their replay is still checked above), but some must finish.
    assert stopped >= 2
