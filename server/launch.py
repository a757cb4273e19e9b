"""One engine and its HTTP app, started from `ServeOptions`: what `structgen serve` runs
in its own process, and what each Ray Serve engine replica runs in its actor. Owns the
options, the start-up order (engine, app, vocabulary, grammar cache, compile workers,
frozen heap) and the stop; never the HTTP server that listens (uvicorn, or Ray's proxy).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, fields
from typing import Any

from fastapi import FastAPI
from pydantic import TypeAdapter, ValidationError

from server.guard import DEFAULT_MAX_BODY_BYTES
from structgen.compile_workers import DEFAULT_WORKERS
from structgen.engine.async_engine import AsyncEngine
from structgen.engine.config import AUTO, DEFAULT_GROUP_SIZE


@dataclass(frozen=True)
class ServeOptions:
    """Everything one engine process serves with; the defaults are `structgen serve`'s."""

    model: str | None = None  # a folder, a .gguf file; None: the embedded SmolLM2
    served_model_name: str | None = None
    api_key: str | None = None
    kv_cache_bytes: int | None = None
    quantization: str | None = AUTO  # native for the embedded model on CPU, float otherwise
    quantization_group_size: int = DEFAULT_GROUP_SIZE
    kv_cache_dtype: str | None = None  # None: the engine's default (EngineConfig.kv_cache_dtype)
    max_num_seqs: int | None = None
    max_waiting: int = 512  # requests queued beyond the running batch before 429s
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    jump_forward: bool = True
    allow_additional_properties: bool = False
    grammar_cache_bytes: int | None = None  # None: sized to the machine
    compile_workers: int = DEFAULT_WORKERS
    stream_interval: int = 1  # tokens per streamed chunk after a stream's first

    def __post_init__(self):
        if self.stream_interval < 1:
            raise ValueError(f"stream_interval must be at least 1 token, not {self.stream_interval}")

    @classmethod
    def from_mapping(cls, values: dict) -> "ServeOptions":
        return options_from(cls, values)


def options_from(cls: type, values: dict) -> Any:
    """The dataclass `cls` with the fields named in `values` (an argparse namespace's
    vars, or `serve run`'s key=value strings, converted to the fields' types); None
    means the default, and names that are not fields are ignored."""
    known = {f.name for f in fields(cls)}
    try:
        return TypeAdapter(cls).validate_python({k: v for k, v in values.items() if k in known and v is not None})
    except ValidationError as err:  # one line per field at fault, without pydantic's links
        raise ValueError("; ".join(_problem(e) for e in err.errors())) from None


def _problem(error: dict) -> str:
    where = ".".join(str(part) for part in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


@dataclass
class Served:
    """A started engine: its runner and the app that serves it."""

    runner: AsyncEngine
    app: FastAPI

    def stop(self) -> None:
        from structgen import compile_workers

        self.runner.shutdown()
        compile_workers.stop()


def start(options: ServeOptions) -> Served:
    """Load the model, build the app and warm what the first request needs; each phase
    is reported with its duration (`structgen.startup`)."""
    from server.app import create_app
    from structgen import memory, startup
    from structgen.compiler import evicted_bytes, prepare, set_cache_bytes, start_workers
    from structgen.engine.config import EngineConfig
    from structgen.engine.engine import Engine

    startup.report()
    memory.limit_arenas()  # before the engine and the server start their threads
    engine = Engine(EngineConfig(model=options.model, kv_cache_bytes=options.kv_cache_bytes,
                                 max_num_seqs=options.max_num_seqs, jump_forward=options.jump_forward,
                                 quantization=options.quantization,
                                 quantization_group_size=options.quantization_group_size,
                                 kv_cache_dtype=options.kv_cache_dtype))
    runner = AsyncEngine(engine, max_waiting=options.max_waiting)
    app = create_app(runner, model_name=options.served_model_name, api_key=options.api_key,
                     max_body_bytes=options.max_body_bytes,
                     disable_additional_properties=not options.allow_additional_properties,
                     stream_interval=options.stream_interval)
    with startup.phase("the vocabulary's token trie and a first constrained mask"):
        prepare(engine.vocab)
    if options.grammar_cache_bytes is not None:
        set_cache_bytes(options.grammar_cache_bytes)
    if options.compile_workers:
        with startup.phase(f"starting {options.compile_workers} compile worker processes"):
            start_workers(options.compile_workers)
    # What is loaded by now (torch, transformers, the model, the vocabulary: ~370k objects)
    # lives as long as the server; each full garbage collection scanned it for ~200 ms, a
    # stall of every stream. Frozen, the collector skips it.
    gc.collect()
    gc.freeze()
    memory.keep_releasing(evicted_bytes)
    return Served(runner, app)
