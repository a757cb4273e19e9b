"""The Python API: `LLM` (synchronous, batched) and `AsyncLLM` (for asyncio apps).

    from structgen.api import LLM
    llm = LLM()                                   # embedded SmolLM2-135M-Instruct
    person = llm.generate_json("Describe a person.", Person)   # a pydantic model class
    llm.choose("Is the sky blue?", ["yes", "no"])

A prompt is a string (sent as one user message through the model's chat template; pass
`chat=False` for raw completion) or a list of chat messages. A list of prompts runs as
one batch. Structured calls return data that parses and validates, or raise
`IncompleteOutputError` when max_tokens ran out first — never a partial document.
Owns the convenience layer only; generation is the engine's.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Sequence

import structgen
from structgen.engine.async_engine import AsyncEngine
from structgen.engine.config import EngineConfig
from structgen.engine.engine import Engine
from structgen.engine.request import RequestOutput
from structgen.engine.sampling_params import SamplingParams
from structgen.errors import StructgenError

Prompt = str | Sequence[dict]


class IncompleteOutputError(StructgenError):
    """Generation stopped (max_tokens or the context) before the structure was complete."""

    def __init__(self, output: RequestOutput):
        self.output = output
        super().__init__(f"the output was cut off ({output.finish_reason}) before it was complete: "
                         f"{output.text[:80]!r}...; raise max_tokens")


@dataclass
class _Structured:
    """A grammar request: the compiled grammar, a system hint, and how to read the text."""

    grammar: Any
    system: str | None
    parse: Any  # text -> value


class _Common:
    """Prompt rendering and grammar building shared by LLM and AsyncLLM."""

    engine: Engine

    def _prompt_ids(self, prompt: Prompt, system: str | None, chat: bool) -> list[int]:
        tok = self.engine.tokenizer
        if tok is None:
            raise StructgenError("this model has no tokenizer: pass token ids to Engine directly")
        if isinstance(prompt, str) and not chat:
            return tok.encode(prompt, add_special_tokens=False)
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if system and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system})
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tok.encode(text, add_special_tokens=False)

    def _json(self, schema: Any, show_schema: bool, **options: Any) -> _Structured:
        model_class = schema if isinstance(schema, type) else None
        schema_dict = model_class.model_json_schema() if model_class is not None else schema
        grammar = structgen.compile_json_schema(schema_dict, self.engine.vocab, safe_integers=True, **options)

        def parse(text: str) -> Any:
            return model_class.model_validate_json(text) if model_class is not None else json.loads(text)

        hint = "Reply with one JSON value"
        shown = json.dumps(schema_dict, ensure_ascii=False)
        system = f"{hint} that follows this JSON Schema:\n{shown}" if show_schema else hint + "."
        return _Structured(grammar, system, parse)

    def _regex(self, pattern: str) -> _Structured:
        return _Structured(structgen.compile_regex(pattern, self.engine.vocab), None, str)

    def _choice(self, options: Sequence[str]) -> _Structured:
        system = "Answer with exactly one of: " + ", ".join(options)
        return _Structured(structgen.compile_choice(list(options), self.engine.vocab), system, str)

    def _grammar(self, grammar: Any, syntax: str) -> _Structured:
        if isinstance(grammar, str):
            grammar = structgen.compile_grammar(grammar, self.engine.vocab, syntax=syntax)
        return _Structured(grammar, None, str)


def _params(max_tokens: int, temperature: float, **sampling: Any) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=temperature, **sampling)


def _finish(output: RequestOutput, structured: _Structured) -> Any:
    if output.finish_reason != "stop":
        raise IncompleteOutputError(output)
    return structured.parse(output.text)


class LLM(_Common):
    """Synchronous, batched generation on an `Engine` (engine options pass through)."""

    def __init__(self, model: Any = None, **engine_options: Any):
        self.engine = Engine(EngineConfig(model=model, **engine_options))

    def generate(self, prompts: Prompt | list[Prompt], *, max_tokens: int = 256, temperature: float = 0.0,
                 chat: bool = True, system: str | None = None, **sampling: Any) -> Any:
        """Free text: one RequestOutput per prompt (a single one for a single prompt)."""
        return self._run(prompts, None, system, chat, _params(max_tokens, temperature, **sampling), raw=True)

    def generate_json(self, prompts: Prompt | list[Prompt], schema: Any, *, max_tokens: int = 512,
                      temperature: float = 0.0, show_schema: bool = True, whitespace: str = "default",
                      strict: bool = False, disable_additional_properties: bool = True, **sampling: Any) -> Any:
        """Data that validates against `schema` (a dict, or a pydantic model class: then an
        instance of it) for each prompt.

        strict: OpenAI's strict mode, no undeclared property ever. disable_additional_properties
        (the default): an object schema that declares properties and is silent on
        `additionalProperties` (as pydantic writes them) gets no undeclared ones; False
        follows JSON Schema's default, which lets a model add keys until max_tokens.
        Integers open on a side get I-JSON's bound there (|n| <= 2**53 - 1)."""
        structured = self._json(schema, show_schema, whitespace=whitespace, strict=strict,
                                disable_additional_properties=disable_additional_properties)
        return self._run(prompts, structured, None, True, _params(max_tokens, temperature, **sampling))

    def generate_regex(self, prompts: Prompt | list[Prompt], pattern: str, *, max_tokens: int = 256,
                       temperature: float = 0.0, **sampling: Any) -> Any:
        return self._run(prompts, self._regex(pattern), None, True, _params(max_tokens, temperature, **sampling))

    def choose(self, prompts: Prompt | list[Prompt], options: Sequence[str], *, temperature: float = 0.0,
               **sampling: Any) -> Any:
        budget = max(len(self.engine.tokenizer.encode(o, add_special_tokens=False)) for o in options) + 2
        return self._run(prompts, self._choice(options), None, True, _params(budget, temperature, **sampling))

    def generate_grammar(self, prompts: Prompt | list[Prompt], grammar: Any, *, syntax: str = "lark",
                         max_tokens: int = 256, temperature: float = 0.0, **sampling: Any) -> Any:
        """Text in the language of `grammar`: lark (default) or GBNF text, or a
        CompiledGrammar of any kind."""
        structured = self._grammar(grammar, syntax)
        return self._run(prompts, structured, None, True, _params(max_tokens, temperature, **sampling))

    def _run(self, prompts, structured: _Structured | None, system, chat, params, raw=False):
        single = isinstance(prompts, str) or (prompts and isinstance(prompts[0], dict))
        batch = [prompts] if single else list(prompts)
        hint = structured.system if structured is not None else system
        ids = [self._prompt_ids(p, hint, chat) for p in batch]
        grammars = [structured.grammar if structured is not None else None] * len(ids)
        outputs = self.engine.generate(ids, params, grammars=grammars)
        results = outputs if raw else [_finish(o, structured) for o in outputs]
        return results[0] if single else results


class AsyncLLM(_Common):
    """The same calls as `LLM`, as coroutines; the engine steps in its own thread, so
    concurrent calls from many tasks are batched together."""

    def __init__(self, model: Any = None, *, max_waiting: int = 512, **engine_options: Any):
        self.engine = Engine(EngineConfig(model=model, **engine_options))
        self._runner = AsyncEngine(self.engine, max_waiting=max_waiting)

    async def generate(self, prompt: Prompt, *, max_tokens: int = 256, temperature: float = 0.0,
                       chat: bool = True, system: str | None = None, **sampling: Any) -> RequestOutput:
        return await self._one(prompt, None, system, chat, _params(max_tokens, temperature, **sampling))

    async def stream(self, prompt: Prompt, *, max_tokens: int = 256, temperature: float = 0.0,
                     chat: bool = True, **sampling: Any):
        """Text deltas as they are generated."""
        ids = self._prompt_ids(prompt, None, chat)
        async for out in self._runner.generate(ids, _params(max_tokens, temperature, **sampling)):
            if out.new_text:
                yield out.new_text

    async def generate_json(self, prompt: Prompt, schema: Any, *, max_tokens: int = 512,
                            temperature: float = 0.0, show_schema: bool = True, whitespace: str = "default",
                            strict: bool = False, disable_additional_properties: bool = True,
                            **sampling: Any) -> Any:
        """As `LLM.generate_json`, for one prompt."""
        structured = await asyncio.to_thread(self._json, schema, show_schema, whitespace=whitespace, strict=strict,
                                             disable_additional_properties=disable_additional_properties)
        out = await self._one(prompt, structured, None, True, _params(max_tokens, temperature, **sampling))
        return _finish(out, structured)

    async def generate_regex(self, prompt: Prompt, pattern: str, *, max_tokens: int = 256,
                             temperature: float = 0.0, **sampling: Any) -> str:
        structured = await asyncio.to_thread(self._regex, pattern)
        return _finish(await self._one(prompt, structured, None, True,
                                       _params(max_tokens, temperature, **sampling)), structured)

    async def generate_grammar(self, prompt: Prompt, grammar: Any, *, syntax: str = "lark", max_tokens: int = 256,
                               temperature: float = 0.0, **sampling: Any) -> str:
        structured = await asyncio.to_thread(self._grammar, grammar, syntax)
        return _finish(await self._one(prompt, structured, None, True,
                                       _params(max_tokens, temperature, **sampling)), structured)

    async def choose(self, prompt: Prompt, options: Sequence[str], *, temperature: float = 0.0) -> str:
        structured = await asyncio.to_thread(self._choice, options)
        budget = max(len(self.engine.tokenizer.encode(o, add_special_tokens=False)) for o in options) + 2
        return _finish(await self._one(prompt, structured, None, True, _params(budget, temperature)), structured)

    async def _one(self, prompt, structured, system, chat, params) -> RequestOutput:
        hint = structured.system if structured is not None else system
        ids = self._prompt_ids(prompt, hint, chat)
        final = None
        async for out in self._runner.generate(ids, params, grammar=structured.grammar if structured else None):
            final = out
        return final

    def shutdown(self) -> None:
        self._runner.shutdown()
