"""The compiled-grammar cache is bounded by memory: grammars are measured as they grow,
the least recently used are evicted past the budget, an evicted grammar keeps serving
whoever holds it, and one grammar's masks stop growing at their cap."""

from __future__ import annotations

import pytest

import structgen
from structgen import compiler, matcher


@pytest.fixture
def small_budget():
    before = structgen.cache_info()["budget_bytes"]
    structgen.clear_cache()
    yield
    structgen.set_cache_bytes(before)
    structgen.clear_cache()


def schema(i: int) -> dict:
    return {"type": "object", "properties": {f"field{i}": {"type": "string", "maxLength": 20 + i}},
            "required": [f"field{i}"]}


def test_grammars_grow_and_the_cache_counts_their_bytes(smollm2_vocab, smollm2_tokenizer, small_budget):
    grammar = structgen.compile_json_schema(schema(0), smollm2_vocab, warm_s=0)
    before = grammar.nbytes()
    m = grammar.matcher()
    for token in smollm2_tokenizer.encode('{"field0": "abc', add_special_tokens=False):
        m.fill_bitmask(structgen.allocate_bitmask(1, smollm2_vocab.vocab_size), 0)
        assert m.accept_token(token)
    assert grammar.nbytes() > before
    assert structgen.cache_info()["bytes"] == grammar.nbytes()


def test_the_least_recently_used_go_first_and_an_evicted_grammar_still_serves(smollm2_vocab, smollm2_tokenizer,
                                                                              small_budget):
    grammars = [structgen.compile_json_schema(schema(i), smollm2_vocab) for i in range(3)]
    structgen.compile_json_schema(schema(0), smollm2_vocab)  # now the most recently used
    evictions = structgen.cache_info()["evictions"]
    budget = grammars[0].nbytes() + grammars[2].nbytes()
    structgen.set_cache_bytes(budget)
    info = structgen.cache_info()
    assert info["bytes"] <= budget and info["evictions"] == evictions + 1 and info["size"] == 2
    assert structgen.compile_json_schema(schema(0), smollm2_vocab) is grammars[0]
    assert structgen.compile_json_schema(schema(2), smollm2_vocab) is grammars[2]
    held = grammars[1].matcher()  # evicted, still whole
    for token in smollm2_tokenizer.encode('{"field1": "x"}', add_special_tokens=False):
        assert held.accept_token(token)
    assert held.is_accepting()
    assert structgen.compile_json_schema(schema(1), smollm2_vocab) is not grammars[1]
    structgen.set_cache_bytes(0)
    assert structgen.cache_info()["size"] == 0


def test_a_grammar_forgets_its_oldest_masks_past_its_cap(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    monkeypatch.setattr(matcher, "TABLE_CAP", 5)
    grammar = structgen.compile_regex(r"[a-z]{0,30}", smollm2_vocab)
    m = grammar.matcher()
    mask = structgen.allocate_bitmask(1, smollm2_vocab.vocab_size)
    for token in smollm2_tokenizer.encode("abcdefghijklmnopqrstuvwxyzabc", add_special_tokens=False):
        m.fill_bitmask(mask, 0)
        assert m.accept_token(token)
    assert grammar.nbytes() <= grammar.dfa.nbytes() + 5 * (mask.nbytes + matcher.TABLE_OVERHEAD_BYTES)
    assert m.is_accepting()


def test_a_budget_must_be_bytes():
    with pytest.raises(structgen.StructgenError):
        compiler.set_cache_bytes(-1)
