"""POST /v1/chat/completions and /v1/completions. A request flows: prompt ids
(prompts.py) and grammar (structured.py, compiled off the event loop and cancelled if the
client leaves) -> sampling parameters -> the engine -> one JSON response
(responses.py) or an SSE stream (streaming.py). Every bad input is an OpenAI error with a
4xx status; an overloaded engine answers 429, a stopped one 503. Owns this flow only."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from server import streaming
from server.errors import APIError
from server.prompts import chat_prompt_ids, completion_prompts
from server.protocol import ChatCompletionRequest, CompletionRequest
from server.responses import observe, response_body
from server.state import ServerState, state_of
from server.structured import (Compile, OutputSpec, UnsupportedRequestError, output_spec, start_compile,
                               wait_compiled)
from structgen.engine.async_engine import EngineDeadError, EngineOverloadedError
from structgen.engine.engine import PromptTooLongError
from structgen.engine.sampling_params import InvalidParameterError, SamplingParams
from structgen.errors import CompileCancelledError, SchemaError, StructgenError

router = APIRouter()
GRAMMAR_CACHE_HEADER = "x-structgen-grammar-cache"  # "hit" or "miss", on requests with a grammar


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, http: Request):
    state = state_of(http)
    _check_model(body.model, state.served)
    prompt_ids = chat_prompt_ids(state.engine.engine.tokenizer, body)
    return await _complete(state, http, body, [prompt_ids], chat=True)


@router.post("/v1/completions")
async def completions(body: CompletionRequest, http: Request):
    state = state_of(http)
    _check_model(body.model, state.served)
    return await _complete(state, http, body, completion_prompts(state.engine.engine.tokenizer, body.prompt),
                           chat=False)


async def _complete(state: ServerState, http: Request, body, prompts: list[list[int]], chat: bool):
    spec = _output_spec(body, state.disable_additional_properties)
    with _admission_errors():  # room held before compiling: a refused request waits for no compile
        reservation = state.engine.reserve(len(prompts) * body.n)
    try:
        return await _admitted(state, http, body, prompts, chat, spec, reservation)
    finally:
        reservation.release()  # unless the requests took the room


async def _admitted(state: ServerState, http: Request, body, prompts: list[list[int]], chat: bool,
                    spec: OutputSpec, reservation):
    engine = state.engine.engine
    token_limit = min(engine.max_model_len, engine.blocks.num_blocks * engine.block_size)
    runs = [(p, _sampling_params(body, len(p), token_limit, i, chat)) for p in prompts for i in range(body.n)]
    for prompt, params in runs:
        _check_fits(engine, prompt, params)
    created, rid = int(time.time()), f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    compiling = start_compile(spec, engine.vocab)
    streams = []
    try:
        if compiling is not None:  # the engine computes the prompts while the grammar compiles
            streams = _submit(state, runs, rid, compiling.future, body, reservation)
        grammar, hit = await _compile(state, spec, http, compiling)
        if compiling is None:
            streams = _submit(state, runs, rid, None, body, reservation)
    except BaseException:  # a 400 for the grammar, or the client left: the prompts stop
        for stream in streams:
            await stream.aclose()
        raise
    headers = {GRAMMAR_CACHE_HEADER: "hit" if hit else "miss"} if spec.kind else {}
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = streaming.events(state, streams, runs, spec, rid, created, chat, include_usage)
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)
    finals = await asyncio.gather(*[_final(state, s) for s in streams])
    return JSONResponse(response_body(finals, runs, spec, rid, created, chat, body, state.served, engine.vocab),
                        headers=headers)


def _submit(state: ServerState, runs: list, rid: str, grammar, body, reservation) -> list:
    """The engine's streams of the runs, with their grammar (or the Future of one still compiling)."""
    with _admission_errors():  # the engine may have stopped meanwhile
        return state.engine.submit_many([(p, sp, f"{rid}-{i}") for i, (p, sp) in enumerate(runs)],
                                        grammar=grammar, jump_forward=body.jump_forward, reservation=reservation)


@contextmanager
def _admission_errors() -> Iterator[None]:
    """A full engine as a 429, a stopped one as a 503, each with Retry-After."""
    try:
        yield
    except EngineOverloadedError as err:
        raise APIError(429, str(err), "rate_limit_error", headers={"Retry-After": "1"}) from err
    except EngineDeadError as err:
        raise APIError(503, str(err), "server_error", headers={"Retry-After": "30"}) from err


async def _compile(state: ServerState, spec: OutputSpec, http: Request, compiling: Compile | None):
    """(the request's grammar or None, whether the cache had it), or its compile error as a 400."""
    try:
        grammar, compile_s, hit = await wait_compiled(compiling, client_gone=http.is_disconnected)
    except CompileCancelledError as err:
        state.metrics.compiles_cancelled.inc()
        raise APIError(400, str(err), code="client_disconnected") from err
    except SchemaError as err:
        param, message = spec.locate(err)
        raise APIError(400, message, param=param, code="invalid_schema") from err
    except StructgenError as err:
        raise APIError(400, str(err), param=spec.param, code="invalid_grammar") from err
    if spec.kind:
        state.metrics.compile_time.labels(spec.kind).observe(compile_s)
    if hit:
        state.metrics.compile_cache_hits.inc()
    return grammar, hit


async def _final(state: ServerState, stream):
    final = None
    try:
        async for out in stream:
            final = out
    except EngineDeadError as err:
        raise APIError(503, str(err), "server_error", headers={"Retry-After": "30"}) from err
    except StructgenError as err:
        raise APIError(400, str(err)) from err
    finally:  # a client that left mid-request cancels this: abort what it started
        await stream.aclose()
    observe(state.metrics, final)
    return final


def _check_model(requested: str | None, served: str) -> None:
    if requested not in (None, "", served):
        raise APIError(404, f"model {requested!r} does not exist; this server serves {served!r}",
                       param="model", code="model_not_found")


def _output_spec(body, disable_additional_properties: bool) -> OutputSpec:
    try:
        return output_spec(body, disable_additional_properties=disable_additional_properties)
    except UnsupportedRequestError as err:
        raise APIError(400, str(err), param=err.param) from err
    except (ValueError, TypeError) as err:  # e.g. structured_outputs.json that is not JSON
        raise APIError(400, f"invalid structured output specification: {err}", param="structured_outputs") from err


def _check_fits(engine, prompt: list[int], params: SamplingParams) -> None:
    try:
        engine.check_prompt(prompt, params)
    except PromptTooLongError as err:
        raise APIError(400, str(err), param="messages", code="context_length_exceeded") from err
    except InvalidParameterError as err:
        raise APIError(400, str(err), param=err.param) from err


def _sampling_params(body, prompt_len: int, token_limit: int, index: int, chat: bool) -> SamplingParams:
    """`token_limit`: the most tokens one sequence can hold (context and KV pool); a chat
    request without max_tokens may use all that its prompt leaves."""
    max_tokens = getattr(body, "max_completion_tokens", None) or body.max_tokens
    if max_tokens is None:
        max_tokens = max(1, token_limit - prompt_len) if chat else 16
    if chat:
        logprobs = (body.top_logprobs or 0) if body.logprobs else None
    else:
        logprobs = body.logprobs
    seed = body.seed + index if body.seed is not None else None
    try:
        return SamplingParams(
            max_tokens=max_tokens, temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p, top_k=body.top_k or 0,
            min_p=body.min_p or 0.0, seed=seed, frequency_penalty=body.frequency_penalty,
            presence_penalty=body.presence_penalty, logprobs=logprobs, stop=body.stop or [],
            stop_token_ids=body.stop_token_ids or [], ignore_eos=body.ignore_eos,
        )
    except InvalidParameterError as err:
        raise APIError(400, str(err), param=err.param) from err
