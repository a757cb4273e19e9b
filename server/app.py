"""The OpenAI-compatible HTTP API on top of `AsyncEngine`.

Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
GET /metrics (Prometheus). A request flows: body (pydantic, `protocol.py`) -> prompt ids
(chat template) and grammar (`structured.py`, compiled off the event loop) -> sampling
parameters -> `AsyncEngine.generate` -> one JSON response or an SSE stream. A client
that disconnects mid-stream cancels its request, which frees its KV blocks. Every bad
input is an OpenAI error body with a 4xx status; nothing a client sends can stop the
engine. Owns HTTP concerns only.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from server.errors import APIError, error_response
from server.guard import DEFAULT_MAX_BODY_BYTES, Guard
from server.metrics import Metrics
from server.protocol import ChatCompletionRequest, CompletionRequest
from server.structured import OutputSpec, UnsupportedRequestError, compile_spec, output_spec, tool_calls_from
from server.tool_calls import TOOL_TAGS, tools_prompt
from structgen.chat import render_chat
from structgen.engine.async_engine import AsyncEngine, EngineDeadError, EngineOverloadedError
from structgen.engine.engine import PromptTooLongError
from structgen.engine.sampling_params import InvalidParameterError, SamplingParams
from structgen.errors import CompileCancelledError, SchemaError, StructgenError
from structgen.grammar.nesting import make_room_for_deep_input

def create_app(engine: AsyncEngine, *, model_name: str | None = None, api_key: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, disable_additional_properties: bool = True) -> FastAPI:
    """disable_additional_properties: an object schema that declares properties and is
    silent on `additionalProperties` gets no undeclared ones (a request's
    `structured_outputs.disable_additional_properties` overrides it)."""
    make_room_for_deep_input()  # bodies and schemas up to the nesting limits parse and compile
    app = FastAPI(title="structgen", version="0.1.0",
                  description="OpenAI-compatible structured generation")
    served = model_name or engine.engine.model_name
    metrics = Metrics()
    app.state.engine, app.state.metrics = engine, metrics

    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes,
                       count_response=lambda endpoint, status: metrics.requests.labels(endpoint, status).inc())

    @app.exception_handler(APIError)
    async def on_api_error(_: Request, err: APIError):
        return error_response(err)

    @app.exception_handler(Exception)
    async def on_bug(_: Request, exc: Exception):
        """A bug of ours still answers as an OpenAI error (the traceback goes to the log)."""
        return error_response(APIError(500, f"internal error ({type(exc).__name__}); the server log has the "
                                            "details", "server_error"))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException):
        """Unknown routes, wrong methods and bodies the framework cannot read, as OpenAI errors."""
        if exc.status_code == 404:
            message = f"no route {request.url.path!r}; this server serves /v1/chat/completions, " \
                      "/v1/completions, /v1/models, /health and /metrics"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        type_ = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return error_response(APIError(exc.status_code, message, type_, headers=getattr(exc, "headers", None)))

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(_: Request, exc: RequestValidationError):
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":  # its location is an offset in the text, not a parameter
            reason = (first.get("ctx") or {}).get("error")
            return error_response(APIError(400, "the request body is not valid JSON" + (f": {reason}" if reason else "")))
        param = _param_name(first.get("loc", ()))
        message = _union_message(errors, param) if param else first.get("msg", "invalid request")
        if first.get("type") == "extra_forbidden":
            message = f"unknown parameter {param!r}"
        return error_response(APIError(400, f"{message} (param: {param})" if param else message, param=param))

    @app.get("/health")
    async def health():
        if engine.dead is not None:
            raise APIError(503, f"engine stopped: {engine.dead!r}", "server_error")
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": served, "object": "model", "created": 0,
                                            "owned_by": "structgen",
                                            "max_model_len": engine.engine.max_model_len}]}

    @app.get("/metrics")
    async def prometheus():
        stats = engine.engine.stats()
        metrics.waiting.set(stats.waiting + len(engine.engine.compiling))
        metrics.running.set(stats.running)
        metrics.kv_used.set(stats.blocks.used)
        metrics.kv_total.set(stats.blocks.total)
        return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, http: Request):
        _check_model(body.model, served)
        tok = engine.engine.tokenizer
        prompt_ids = _chat_prompt_ids(tok, body)
        return await _complete(http, body, [prompt_ids], chat=True)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, http: Request):
        _check_model(body.model, served)
        return await _complete(http, body, _completion_prompts(engine.engine.tokenizer, body.prompt), chat=False)

    async def _complete(http: Request, body, prompts: list[list[int]], chat: bool):
        spec = _output_spec(body, disable_additional_properties)
        grammar, compile_s, hit = await _compile(spec, http)
        metrics.compile_time.observe(compile_s) if spec.kind else None
        if hit:
            metrics.compile_cache_hits.inc()
        eng = engine.engine
        token_limit = min(eng.max_model_len, eng.blocks.num_blocks * eng.block_size)
        runs = [(p, _sampling_params(body, len(p), token_limit, i, chat))
                for p in prompts for i in range(body.n)]
        for prompt, params in runs:
            _check_fits(prompt, params)
        created, rid = int(time.time()), f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        try:  # admitted (all n choices) or refused here, before any response byte is sent
            streams = engine.submit_many([(p, sp, f"{rid}-{i}") for i, (p, sp) in enumerate(runs)],
                                         grammar=grammar, jump_forward=body.jump_forward)
        except EngineOverloadedError as err:
            raise APIError(429, str(err), "rate_limit_error", headers={"Retry-After": "1"}) from err
        except EngineDeadError as err:
            raise APIError(503, str(err), "server_error", headers={"Retry-After": "30"}) from err
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            events = _sse(http, streams, runs, spec, rid, created, chat, include_usage)
            return StreamingResponse(events, media_type="text/event-stream")
        finals = await asyncio.gather(*[_final(s) for s in streams])
        return _response(finals, runs, spec, rid, created, chat, body)

    async def _compile(spec: OutputSpec, http: Request):
        try:
            return await compile_spec(spec, engine.engine.vocab, client_gone=http.is_disconnected)
        except CompileCancelledError as err:
            metrics.compiles_cancelled.inc()
            raise APIError(400, str(err), code="client_disconnected") from err
        except SchemaError as err:
            param, message = spec.locate(err)
            raise APIError(400, message, param=param, code="invalid_schema") from err
        except StructgenError as err:
            raise APIError(400, str(err), param=spec.param, code="invalid_grammar") from err

    async def _final(stream):
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
        _observe(final)
        return final

    def _observe(out) -> None:
        if out is None or out.metrics is None:
            return
        m = out.metrics
        done = m.finished_time or time.monotonic()
        metrics.e2e.observe(done - m.arrival_time)
        if m.first_token_time is not None:
            metrics.ttft.observe(m.first_token_time - m.arrival_time)
            if len(out.token_ids) > 1:
                metrics.tpot.observe((done - m.first_token_time) / (len(out.token_ids) - 1))
        metrics.forced_tokens.inc(m.num_forced_tokens)
        metrics.output_tokens.inc(len(out.token_ids))

    async def _sse(http, streams, runs, spec, rid, created, chat, include_usage):
        kind = "chat.completion.chunk" if chat else "text_completion"
        queue: asyncio.Queue = asyncio.Queue()

        async def pump(index, stream):
            try:
                async for out in stream:
                    await queue.put((index, out))
            except Exception as exc:  # reported in-band: the status line is already sent
                await queue.put((index, exc))
            finally:
                await queue.put((index, None))

        def chunk(index, delta_or_text, finish=None, extra=None):
            if chat:
                choice = {"index": index, "delta": delta_or_text, "logprobs": None, "finish_reason": finish}
            else:
                choice = {"index": index, "text": delta_or_text, "logprobs": None, "finish_reason": finish}
            if extra:
                choice.update(extra)
            payload = {"id": rid, "object": kind, "created": created, "model": served, "choices": [choice]}
            return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

        tasks = [asyncio.create_task(pump(i, s)) for i, s in enumerate(streams)]
        finals: dict[int, Any] = {}
        try:
            held = [_HeldText() for _ in streams]
            if chat:
                for i in range(len(streams)):
                    yield chunk(i, {"role": "assistant", "content": ""})
            open_streams = len(streams)
            while open_streams:
                index, item = await queue.get()
                if item is None:
                    open_streams -= 1
                    continue
                if isinstance(item, Exception):
                    err = {"error": {"message": str(item), "type": "server_error", "param": None, "code": None}}
                    yield f"data: {json.dumps(err)}\n\n"
                    continue
                if spec.auto_tools:
                    if text := held[index].feed(item.new_text, item.finished):
                        yield chunk(index, {"content": text})
                elif spec.tool_names is None and spec.single_tool is None and item.new_text:
                    yield chunk(index, {"content": item.new_text} if chat else item.new_text)
                if item.finished:
                    finals[index] = item
                    _observe(item)
                    finish, extra = _finish_reason(item, spec), {}
                    delta: Any = {} if chat else ""
                    if chat and (calls := _tool_calls(spec, item, rid, index)) is not None:
                        delta = {"tool_calls": [{"index": k, **c} for k, c in enumerate(calls)]}
                    yield chunk(index, delta, finish, extra)
            if include_usage:
                usage = _usage([finals[i] for i in sorted(finals)], runs)
                payload = {"id": rid, "object": kind, "created": created, "model": served,
                           "choices": [], "usage": usage}
                yield f"data: {json.dumps(payload)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            for task in tasks:  # a disconnect lands here: cancelling aborts the requests
                task.cancel()
            for stream in streams:
                await stream.aclose()

    def _response(finals, runs, spec, rid, created, chat, body):
        choices = []
        for index, out in enumerate(finals):
            finish = _finish_reason(out, spec)
            if chat:
                message: dict[str, Any] = {"role": "assistant", "content": out.text}
                calls = _tool_calls(spec, out, rid, index)
                if calls is not None:
                    message = {"role": "assistant", "content": None, "tool_calls": calls}
                choice = {"index": index, "message": message, "finish_reason": finish,
                          "logprobs": _chat_logprobs(out, engine.engine.vocab) if body.logprobs else None}
            else:
                choice = {"index": index, "text": out.text, "finish_reason": finish,
                          "logprobs": _completion_logprobs(out, engine.engine.vocab) if body.logprobs is not None else None}
            if out.incomplete and spec.kind is not None:
                choice["incomplete"] = True  # cut off before the structure was complete
            choices.append(choice)
        return {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": created,
                "model": served, "choices": choices, "usage": _usage(finals, runs)}

    def _check_fits(prompt: list[int], params: SamplingParams) -> None:
        try:
            engine.engine._check_prompt(prompt, params)
        except PromptTooLongError as err:
            raise APIError(400, str(err), param="messages", code="context_length_exceeded") from err
        except InvalidParameterError as err:
            raise APIError(400, str(err), param=err.param) from err

    return app


# -- helpers that need no app state ------------------------------------------------------


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


def _chat_prompt_ids(tok, body: ChatCompletionRequest) -> list[int]:
    messages = []
    for m in body.messages:
        content = m.content
        if isinstance(content, list):  # content parts: text only
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            if len(texts) != len(content):
                raise APIError(400, "only text content parts are supported", param="messages")
            content = "".join(texts)
        role = "system" if m.role == "developer" else m.role
        messages.append({"role": role, "content": content or ""})
    tools = [t.model_dump() for t in body.tools] if body.tools else None
    text = _render(tok, messages, tools)
    if tools and body.tool_choice != "none" and not all(t.function.name in text for t in body.tools):
        # the template ignores tools (SmolLM2's does): describe them in a system message
        described = tools_prompt(body.tools, body.tool_choice, body.parallel_tool_calls is not False)
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + described}
        else:
            messages.insert(0, {"role": "system", "content": described})
        text = _render(tok, messages, tools)
    return tok.encode(text, add_special_tokens=False)


def _render(tok, messages: list[dict], tools) -> str:
    try:
        return tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    except Exception:  # a template that refuses these roles or tools: plain ChatML
        return render_chat(tok, messages[-1]["content"], None) if len(messages) == 1 else _chatml(messages)


class _HeldText:
    """Streaming under tool_choice "auto": text is held while it could still be the start
    of a tool-call tag; a reply that is a call is sent as tool_calls at the end instead."""

    def __init__(self):
        self.text = ""
        self.sent = 0

    def feed(self, new_text: str, finished: bool) -> str:
        self.text += new_text
        tag = TOOL_TAGS[0]
        if self.text.startswith(tag) or (tag.startswith(self.text) and not finished):
            return ""  # a call, or maybe one: wait
        out, self.sent = self.text[self.sent :], len(self.text)
        return out


def _chatml(messages: list[dict]) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def _completion_prompts(tok, prompt) -> list[list[int]]:
    if isinstance(prompt, str):
        return [tok.encode(prompt, add_special_tokens=False)]
    if prompt and all(isinstance(p, int) for p in prompt):
        return [list(prompt)]
    out = []
    for p in prompt:
        out.append(tok.encode(p, add_special_tokens=False) if isinstance(p, str) else list(p))
    if not out:
        raise APIError(400, "prompt is empty", param="prompt")
    return out


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


def _finish_reason(out, spec: OutputSpec) -> str:
    if out.finish_reason == "stop" and (spec.tool_names is not None or spec.single_tool is not None):
        if not spec.auto_tools or out.text.startswith(TOOL_TAGS[0]):
            return "tool_calls"
    if out.finish_reason == "error":
        return "error"
    return "length" if out.finish_reason == "length" else "stop"


def _tool_calls(spec: OutputSpec, out, rid: str, index: int):
    """The reply's tool calls; one cut off by max_tokens keeps its partial arguments,
    so that clients see a tool call with finish_reason "length", as OpenAI sends it."""
    if out.finish_reason not in ("stop", "length"):
        return None
    return tool_calls_from(spec, out.text, f"call_{rid[-12:]}_{index}", complete=out.finish_reason == "stop")


def _param_name(location) -> str | None:
    """The request parameter a validation error is about, as the user wrote it: the
    path without "body" and without the union members pydantic names in it
    (`literal['none','auto','required']`, `NamedToolChoice`, `str`)."""
    parts = []
    for part in location:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]"] if parts else [f"[{part}]"]
        elif part != "body" and part not in _UNION_MEMBERS and re.fullmatch(r"[a-z_][a-z0-9_]*", part):
            parts.append(part)
    return ".".join(parts) or None


def _union_message(errors: list[dict], param: str) -> str:
    """The messages of the errors about `param`: a union (tool_choice is a string or an
    object) fails once per member, and each says what that member needed."""
    messages = []
    for error in errors:
        name = _param_name(error.get("loc", ())) or ""
        if name == param:
            messages.append(error.get("msg", ""))
        elif name.startswith(param + "."):
            messages.append(f"{name}: {error.get('msg', '')}")
    return "; or ".join(dict.fromkeys(messages))


_UNION_MEMBERS = {"str", "int", "float", "bool", "dict", "list", "none", "is_instance", "function_after"}


def _usage(finals, runs) -> dict:
    prompt = sum(len(p) for p, _ in runs[: len(finals)]) if finals else 0
    completion = sum(len(o.token_ids) for o in finals)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _token_text(vocab, token_id: int) -> str:
    return vocab.decode([token_id]).decode("utf-8", errors="replace")


def _chat_logprobs(out, vocab) -> dict:
    content = []
    for token_id, lp in zip(out.token_ids, out.logprobs or []):
        if lp is None:  # fast-forwarded by jump-forward: not sampled, no distribution
            continue
        content.append({"token": _token_text(vocab, lp.token_id), "logprob": lp.logprob,
                        "bytes": list(vocab.decode([lp.token_id])),
                        "top_logprobs": [{"token": _token_text(vocab, t), "logprob": v,
                                          "bytes": list(vocab.decode([t]))} for t, v in lp.top]})
    return {"content": content}


def _completion_logprobs(out, vocab) -> dict:
    sampled = [lp for lp in (out.logprobs or []) if lp is not None]
    return {"tokens": [_token_text(vocab, lp.token_id) for lp in sampled],
            "token_logprobs": [lp.logprob for lp in sampled],
            "top_logprobs": [{_token_text(vocab, t): v for t, v in lp.top} for lp in sampled],
            "text_offset": []}
