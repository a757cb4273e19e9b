"""What a finished request's outputs become in an OpenAI response: the choices (text or
tool calls, finish reasons, logprobs), the usage, and the latency metrics each output
adds. Shared by whole responses and by the streaming path; owns the response shape only."""

from __future__ import annotations

import time
from typing import Any

from server.metrics import Metrics
from server.structured import OutputSpec, tool_calls_from
from server.tool_calls import TOOL_TAGS


def response_body(finals, runs, spec: OutputSpec, rid: str, created: int, chat: bool, body, served: str,
                  vocab) -> dict:
    """The JSON of a whole (not streamed) response."""
    choices = []
    for index, out in enumerate(finals):
        finish = finish_reason(out, spec)
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": out.text}
            calls = tool_calls(spec, out, rid, index)
            if calls is not None:
                message = {"role": "assistant", "content": None, "tool_calls": calls}
            choice = {"index": index, "message": message, "finish_reason": finish,
                      "logprobs": _chat_logprobs(out, vocab) if body.logprobs else None}
        else:
            choice = {"index": index, "text": out.text, "finish_reason": finish,
                      "logprobs": _completion_logprobs(out, vocab) if body.logprobs is not None else None}
        if out.incomplete and spec.kind is not None:
            choice["incomplete"] = True  # cut off before the structure was complete
        choices.append(choice)
    return {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": created,
            "model": served, "choices": choices, "usage": usage(finals, runs)}


def finish_reason(out, spec: OutputSpec) -> str:
    if out.finish_reason == "stop" and (spec.tool_names is not None or spec.single_tool is not None):
        if not spec.auto_tools or out.text.startswith(TOOL_TAGS[0]):
            return "tool_calls"
    if out.finish_reason == "error":
        return "error"
    return "length" if out.finish_reason == "length" else "stop"


def tool_calls(spec: OutputSpec, out, rid: str, index: int):
    """The reply's tool calls; one cut off by max_tokens keeps its partial arguments,
    so that clients see a tool call with finish_reason "length", as OpenAI sends it."""
    if out.finish_reason not in ("stop", "length"):
        return None
    return tool_calls_from(spec, out.text, f"call_{rid[-12:]}_{index}", complete=out.finish_reason == "stop")


def usage(finals, runs) -> dict:
    prompt = sum(len(p) for p, _ in runs[: len(finals)]) if finals else 0
    completion = sum(len(o.token_ids) for o in finals)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def observe(metrics: Metrics, out) -> None:
    """A finished output's latencies and token counts, into the server's metrics."""
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
