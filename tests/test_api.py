"""The Python API on the real SmolLM2 model: structured calls return validated data
(pydantic instances for model classes), batches, chat message lists, the async twin."""

from __future__ import annotations

import asyncio
import re

import pytest
from pydantic import BaseModel, Field

import structgen
from structgen.api import AsyncLLM, IncompleteOutputError, LLM


class Person(BaseModel):
    name: str = Field(max_length=20)
    age: int = Field(ge=0, le=120)


@pytest.fixture(scope="module")
def llm():
    return LLM(kv_cache_bytes=128 << 20)


def test_generate_json_with_a_pydantic_class(llm):
    person = llm.generate_json("Describe a person.", Person)
    assert isinstance(person, Person) and 0 <= person.age <= 120


def test_batched_json_dict_schema_and_message_lists(llm):
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4}
    prompts = ["List some numbers.", [{"role": "user", "content": "Give me primes."}]]
    results = llm.generate_json(prompts, schema)
    assert len(results) == 2 and all(isinstance(r, list) and 1 <= len(r) <= 4 for r in results)


def test_regex_choice_and_free_text(llm):
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", llm.generate_regex("Today's date?", r"\d{4}-\d{2}-\d{2}"))
    assert llm.choose("Is fire hot?", ["yes", "no"]) in ("yes", "no")
    out = llm.generate("Say hi.", max_tokens=10)
    assert out.text and out.finish_reason in ("stop", "length")


def test_incomplete_output_raises(llm):
    with pytest.raises(IncompleteOutputError, match="max_tokens"):
        llm.generate_json("Describe a person.", Person, max_tokens=3)


ARITHMETIC = r"""
start: sum
?sum: sum "+" product | product
?product: product "*" atom | atom
?atom: NUMBER | "(" sum ")"
NUMBER: /[0-9]+/
"""


def test_generate_grammar_lark_and_gbnf(llm):
    import lark

    text = llm.generate_grammar("Write an arithmetic expression.", ARITHMETIC, max_tokens=40, temperature=1.0, seed=3)
    lark.Lark(ARITHMETIC, parser="earley", lexer="dynamic_complete").parse(text)  # raises if not in the language
    gbnf = 'root ::= "(" [a-c]+ ")" ( "," " "? "(" [a-c]+ ")" )*'
    outs = llm.generate_grammar(["List groups.", "More groups."], gbnf, syntax="gbnf", max_tokens=30, temperature=1.0)
    for out in outs:
        assert re.fullmatch(r"\([a-c]+\)(, ?\([a-c]+\))*", out), out
    with pytest.raises(structgen.GrammarError, match="line 2"):
        llm.generate_grammar("x", 'start: "a"\nb: : :')


def test_async_llm_batches_concurrent_calls():
    llm = AsyncLLM(kv_cache_bytes=64 << 20)

    async def main():
        people = asyncio.gather(*[llm.generate_json(f"Describe person {i}.", Person) for i in range(3)])
        choice = llm.choose("Is ice cold?", ["yes", "no"])
        deltas = [d async for d in llm.stream("Count to three.", max_tokens=12)]
        return await people, await choice, deltas

    try:
        people, choice, deltas = asyncio.run(main())
    finally:
        llm.shutdown()
    assert all(isinstance(p, Person) for p in people) and choice in ("yes", "no") and "".join(deltas)
