"""A request's outputs as Server-Sent Events (`stream: true`): one chunk per piece of new
text (or per `stream_interval` tokens of it, after the first), a last chunk per choice
with its finish reason (and tool calls), the usage when asked, then `[DONE]`. A client
that disconnects cancels the requests it started. Owns the event stream only; the
chunks' contents come from responses.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from server.responses import finish_reason, observe, tool_calls, usage
from server.state import ServerState
from server.structured import OutputSpec
from server.tool_calls import TOOL_TAGS


async def events(state: ServerState, streams, runs, spec: OutputSpec, rid: str, created: int, chat: bool,
                 include_usage: bool) -> AsyncIterator[str]:
    kind = "chat.completion.chunk" if chat else "text_completion"
    queue: asyncio.Queue = asyncio.Queue()

    def chunk(index, delta_or_text, finish=None):
        if chat:
            choice = {"index": index, "delta": delta_or_text, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": index, "text": delta_or_text, "logprobs": None, "finish_reason": finish}
        payload = {"id": rid, "object": kind, "created": created, "model": state.served, "choices": [choice]}
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    tasks = [asyncio.create_task(_pump(queue, i, s)) for i, s in enumerate(streams)]
    finals: dict[int, Any] = {}
    try:
        held = [_HeldText() for _ in streams]
        paced = [_Paced(state.stream_interval) for _ in streams]
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
                if text := paced[index].feed("", 0, finished=True):
                    yield chunk(index, {"content": text} if chat else text)
                err = {"error": {"message": str(item), "type": "server_error", "param": None, "code": None}}
                yield f"data: {json.dumps(err)}\n\n"
                continue
            text = ""
            if spec.auto_tools:
                text = held[index].feed(item.new_text, item.finished)
            elif spec.tool_names is None and spec.single_tool is None:
                text = item.new_text
            if text := paced[index].feed(text, len(item.new_token_ids), item.finished):
                yield chunk(index, {"content": text} if chat else text)
            if item.finished:
                finals[index] = item
                observe(state.metrics, item)
                delta: Any = {} if chat else ""
                if chat and (calls := tool_calls(spec, item, rid, index)) is not None:
                    delta = {"tool_calls": [{"index": k, **c} for k, c in enumerate(calls)]}
                yield chunk(index, delta, finish_reason(item, spec))
        if include_usage:
            payload = {"id": rid, "object": kind, "created": created, "model": state.served,
                       "choices": [], "usage": usage([finals[i] for i in sorted(finals)], runs)}
            yield f"data: {json.dumps(payload)}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        for task in tasks:  # a disconnect lands here: cancelling aborts the requests
            task.cancel()
        for stream in streams:
            await stream.aclose()


async def _pump(queue: asyncio.Queue, index: int, stream) -> None:
    try:
        async for out in stream:
            await queue.put((index, out))
    except Exception as exc:  # reported in-band: the status line is already sent
        await queue.put((index, exc))
    finally:
        await queue.put((index, None))


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


class _Paced:
    """The stream interval: text is held until it spans `interval` tokens; a stream's
    first text, and its last, go out at once (the time to first token is unchanged).
    Each chunk costs the HTTP stack, and under Ray Serve two Ray messages, about the same
    whatever it holds."""

    def __init__(self, interval: int):
        self.interval = interval
        self.text = ""
        self.tokens = 0
        self.sent_any = False

    def feed(self, new_text: str, new_tokens: int, finished: bool) -> str:
        self.text += new_text
        self.tokens += max(new_tokens, 1 if new_text else 0)
        if not self.text or (self.sent_any and self.tokens < self.interval and not finished):
            return ""
        out, self.text, self.tokens, self.sent_any = self.text, "", 0, True
        return out
