"""The engine behind an event loop: one thread steps the engine, coroutines stream.

Only the loop thread touches the `Engine`. Coroutines submit requests and aborts through
a thread-safe queue and receive each request's outputs on an `asyncio.Queue` fed from
the loop thread. A caller that stops listening (a client disconnecting) aborts its
request, which frees its KV blocks at the next step. The number of requests waiting to
be scheduled is bounded: past `max_waiting`, `submit` raises `EngineOverloadedError` at
once instead of queueing without limit -- checked and counted in one step under a lock,
so that a burst of callers cannot all pass the check before any of them is counted. A
caller with work to do before it can submit (a grammar to compile) `reserve`s its room
first: it is counted from then on, and refused before doing that work.

Owns the thread and the hand-off; scheduling, sampling and grammars stay in `Engine`.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from structgen.engine.engine import Engine
from structgen.engine.request import RequestOutput
from structgen.engine.sampling_params import SamplingParams
from structgen.errors import StructgenError


class EngineOverloadedError(StructgenError):
    """Too many requests are already waiting; retry later."""


class EngineDeadError(RuntimeError):
    """The engine loop stopped on an internal error; no request can be served."""


@dataclass
class _Listener:
    loop: asyncio.AbstractEventLoop
    outputs: asyncio.Queue


class AsyncEngine:
    def __init__(self, engine: Engine, max_waiting: int = 512):
        self.engine = engine
        self.max_waiting = max_waiting
        self._commands: queue.Queue = queue.Queue()
        self._listeners: dict[str, _Listener] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._stopping = False
        self.dead: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="structgen-engine", daemon=True)
        self._thread.start()

    # -- coroutine side ------------------------------------------------------------

    @property
    def num_in_flight(self) -> int:
        return self._in_flight

    def check_capacity(self, count: int = 1) -> None:
        """Raise EngineOverloadedError (before anything is sent) if `count` more requests
        would exceed the waiting limit, or EngineDeadError if the loop has stopped."""
        if self.dead is not None:
            raise EngineDeadError(f"the engine stopped: {self.dead!r}")
        if self._in_flight + count > self.max_waiting + self.engine.scheduler.max_num_seqs:
            raise EngineOverloadedError(f"{self._in_flight} requests are in flight; retry later")

    def reserve(self, count: int) -> "Reservation":
        """Hold room for `count` requests now (EngineOverloadedError if there is none), to
        be filled by `submit_many(..., reservation=...)` or given back by its `release()`."""
        with self._lock:
            self.check_capacity(count)
            self._in_flight += count
        return Reservation(count, self._give_back)

    def _give_back(self, count: int) -> None:
        with self._lock:
            self._in_flight -= count

    def submit(self, prompt_token_ids: list[int], params: SamplingParams, *, grammar: Any = None,
               request_id: str | None = None, jump_forward: bool | None = None) -> "RequestStream":
        """Submit one request now; its outputs come from the returned stream."""
        return self.submit_many([(prompt_token_ids, params, request_id)], grammar=grammar,
                                jump_forward=jump_forward)[0]

    def submit_many(self, requests: list[tuple[list[int], SamplingParams, str | None]], *,
                    grammar: Any = None, jump_forward: bool | None = None,
                    reservation: "Reservation | None" = None) -> list["RequestStream"]:
        """Submit (prompt ids, params, request id or None) requests together: all are
        admitted or, over capacity, none (EngineOverloadedError); with a `reservation` of
        as many, into its room. Bad input raises here, in the caller's thread (a 400
        before anything is sent)."""
        for prompt_token_ids, params, _ in requests:
            self.engine.check_prompt(prompt_token_ids, params)
        if reservation is not None:
            if self.dead is not None:
                raise EngineDeadError(f"the engine stopped: {self.dead!r}")
            reservation.fill(len(requests))
        else:
            with self._lock:
                self.check_capacity(len(requests))
                self._in_flight += len(requests)
        streams = []
        for prompt_token_ids, params, request_id in requests:
            request_id = request_id or f"req-{next(self._ids)}"
            listener = _Listener(asyncio.get_running_loop(), asyncio.Queue())
            self._listeners[request_id] = listener
            self._commands.put(("add", request_id, prompt_token_ids, params, grammar, jump_forward))
            streams.append(RequestStream(self, request_id, listener))
        return streams

    async def generate(self, prompt_token_ids: list[int], params: SamplingParams, *,
                       grammar: Any = None, request_id: str | None = None,
                       jump_forward: bool | None = None) -> AsyncIterator[RequestOutput]:
        """Submit a request and yield its outputs as they come; the last one is finished.
        Leaving the loop early (or being cancelled) aborts the request."""
        stream = self.submit(prompt_token_ids, params, grammar=grammar, request_id=request_id,
                             jump_forward=jump_forward)
        try:
            async for item in stream:
                yield item
        finally:
            await stream.aclose()

    def leave(self, request_id: str, running: bool) -> None:
        """A stream's caller stopped reading it: abort the request if it is still
        `running`, and stop counting it in flight."""
        if running:
            self._commands.put(("abort", request_id))
        self._release(request_id)

    def _release(self, request_id: str) -> None:
        """The request no longer counts as in flight (finished, failed or abandoned)."""
        if self._listeners.pop(request_id, None) is not None:
            with self._lock:
                self._in_flight -= 1

    def shutdown(self) -> None:
        self._stopping = True
        self._commands.put(("stop",))
        self._thread.join(timeout=10)

    # -- loop thread -----------------------------------------------------------------

    def _run(self) -> None:
        engine = self.engine
        try:
            while not self._stopping:
                block = not engine.has_unfinished_requests()
                self._drain_commands(block)
                if engine.has_unfinished_requests():
                    for out in engine.step():
                        self._deliver(out.request_id, out)
        except BaseException as exc:  # noqa: BLE001 - every listener must hear about it
            self.dead = exc
            for request_id in list(self._listeners):
                self._deliver(request_id, EngineDeadError(f"the engine stopped: {exc!r}"))

    def _drain_commands(self, block: bool) -> None:
        try:
            command = self._commands.get(timeout=0.5) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            self._apply(command)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return

    def _apply(self, command: tuple) -> None:
        kind = command[0]
        if kind == "add":
            _, request_id, prompt, params, grammar, jump_forward = command
            if request_id not in self._listeners:
                return  # its caller already left
            try:
                self.engine.add_request(prompt, params, request_id=request_id, grammar=grammar,
                                        jump_forward=jump_forward)
            except Exception as exc:  # bad input that slipped past the caller's checks
                self._deliver(request_id, exc)
        elif kind == "abort":
            self.engine.abort(command[1])
        elif kind == "stop":
            self._stopping = True

    def _deliver(self, request_id: str, item: Any) -> None:
        listener = self._listeners.get(request_id)
        if listener is None:
            return
        try:
            listener.loop.call_soon_threadsafe(listener.outputs.put_nowait, item)
        except RuntimeError:  # the caller's event loop is closed
            pass
        else:
            if not (isinstance(item, BaseException) or item.finished):
                return
        # Done with, even if its caller never reads the stream (a client that left
        # before its response began): it stops counting against the capacity now.
        self._release(request_id)


class Reservation:
    """Room for `count` requests held in an `AsyncEngine` between admission and submission."""

    def __init__(self, count: int, give_back: Callable[[int], None]):
        self.count = count
        self.held = True
        self._give_back = give_back

    def fill(self, count: int) -> None:
        """The reserved room becomes `count` submitted requests' (as many as reserved)."""
        if not self.held or count != self.count:
            raise ValueError(f"a reservation of {self.count} cannot take {count} requests (held: {self.held})")
        self.held = False

    def release(self) -> None:
        """Give the room back, unless requests took it; safe to call more than once."""
        if self.held:
            self.held = False
            self._give_back(self.count)


class RequestStream:
    """The outputs of one submitted request, as an async iterator; the last one is
    finished. `aclose()` before the end aborts the request (its KV blocks are freed at
    the next step); callers close every stream they stop reading."""

    def __init__(self, engine: AsyncEngine, request_id: str, listener: _Listener):
        self._engine = engine
        self.request_id = request_id
        self._listener = listener
        self._done = False
        self._closed = False

    def __aiter__(self) -> "RequestStream":
        return self

    async def __anext__(self) -> RequestOutput:
        if self._done or self._closed:
            raise StopAsyncIteration
        item = await self._listener.outputs.get()
        if isinstance(item, BaseException):
            self._done = True
            raise item
        self._done = item.finished
        return item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._engine.leave(self.request_id, running=not self._done)


def wait_until_idle(engine: AsyncEngine, timeout: float = 30.0) -> bool:
    """For tests and shutdown: True once no request is in flight."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine.num_in_flight == 0 and not engine.engine.has_unfinished_requests():
            return True
        time.sleep(0.01)
    return False
