"""The compiled-grammar cache is bounded by memory: grammars are measured as they grow,
the least recently used are evicted past the budget, an evicted grammar keeps serving
whoever holds it and counts against the budget until they let it go, and one grammar's
masks stop growing at their cap."""

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


def walk_masks(grammar, text: str, vocab, tokenizer) -> None:
    """Take a new matcher of `grammar` along `text`, a mask before each token (which
    grows the grammar: its states and their masks are built as they are reached)."""
    m = grammar.matcher()
    for token in tokenizer.encode(text, add_special_tokens=False):
        m.fill_bitmask(structgen.allocate_bitmask(1, vocab.vocab_size), 0)
        assert m.accept_token(token)


def test_grammars_grow_and_the_cache_counts_their_bytes(smollm2_vocab, smollm2_tokenizer, small_budget):
    grammar = structgen.compile_json_schema(schema(0), smollm2_vocab, warm_s=0)
    before = grammar.nbytes()
    walk_masks(grammar, '{"field0": "abc', smollm2_vocab, smollm2_tokenizer)
    assert grammar.nbytes() > before
    assert structgen.cache_info()["bytes"] == grammar.nbytes()


def test_the_least_recently_used_go_first_and_an_evicted_grammar_still_serves(smollm2_vocab, smollm2_tokenizer,
                                                                              small_budget):
    sizes = [structgen.compile_json_schema(schema(i), smollm2_vocab).nbytes() for i in range(3)]
    first = structgen.compile_json_schema(schema(0), smollm2_vocab)  # now the most recently used
    evictions = structgen.cache_info()["evictions"]
    budget = sizes[0] + sizes[2]
    structgen.set_cache_bytes(budget)
    info = structgen.cache_info()
    assert info["bytes"] <= budget and info["evictions"] == evictions + 1 and info["size"] == 2
    assert info["evicted_in_use"] == 0  # nothing held schema 1's grammar: it is gone
    assert structgen.compile_json_schema(schema(0), smollm2_vocab) is first
    structgen.set_cache_bytes(0)
    assert structgen.cache_info()["size"] == 0
    held = first.matcher()  # evicted, still whole
    for token in smollm2_tokenizer.encode('{"field0": "x"}', add_special_tokens=False):
        assert held.accept_token(token)
    assert held.is_accepting()
    assert structgen.compile_json_schema(schema(0), smollm2_vocab) is not first


def test_the_cache_counts_the_bytes_it_evicts(smollm2_vocab, small_budget):
    """The running total `memory.keep_releasing` watches in the server."""
    sizes = [structgen.compile_json_schema(schema(i), smollm2_vocab).nbytes() for i in range(3)]
    before = compiler.evicted_bytes()
    structgen.set_cache_bytes(sizes[2])  # the two least recently used go
    assert compiler.evicted_bytes() == structgen.cache_info()["evicted_bytes"] == before + sizes[0] + sizes[1]


def test_an_evicted_grammar_in_use_counts_against_the_budget_until_released(smollm2_vocab, small_budget):
    in_use = structgen.compile_json_schema(schema(1), smollm2_vocab)
    held, in_use_bytes = in_use.matcher(), in_use.nbytes()
    del in_use
    other_bytes = structgen.compile_json_schema(schema(0), smollm2_vocab).nbytes()  # the most recently used
    structgen.set_cache_bytes(in_use_bytes + other_bytes - 1)
    # schema 1's grammar went first, but a request still holds it: schema 0's had to go too
    info = structgen.cache_info()
    assert info["size"] == 0 and info["evicted_in_use"] == 1 and info["evicted_in_use_bytes"] == in_use_bytes
    del held
    info = structgen.cache_info()
    assert info["evicted_in_use"] == 0 and info["evicted_in_use_bytes"] == 0
    structgen.compile_json_schema(schema(0), smollm2_vocab)
    assert structgen.cache_info()["size"] == 1  # with the held one released, it fits again


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


def test_a_grammar_compiled_by_several_requests_at_once_is_compiled_once(smollm2_vocab, small_budget):
    import threading

    big = {"enum": [f"value number {i}" for i in range(4000)]}  # a compile of a few hundred ms
    start, results = threading.Barrier(4), []

    def compile_it():
        start.wait()
        results.append(structgen.compile_json_schema(big, smollm2_vocab))

    before = structgen.cache_info()
    threads = [threading.Thread(target=compile_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = structgen.cache_info()
    assert len(results) == 4 and all(grammar is results[0] for grammar in results)
    assert after["misses"] - before["misses"] == 1 and after["hits"] - before["hits"] == 3


def test_a_hit_counts_the_cache_afresh_only_once_its_recount_interval_passed(smollm2_vocab, smollm2_tokenizer,
                                                                             small_budget, monkeypatch):
    """Counting the cache reads every grammar's arrays, so a hit counts it afresh only
    CACHE_RECOUNT_S after the last full count: until then it counts no grammar; after it,
    it finds what a grammar grew and evicts past the budget."""
    for i in range(4):
        structgen.compile_json_schema(schema(i), smollm2_vocab, warm_s=0)
    monkeypatch.setattr(compiler, "CACHE_RECOUNT_S", 3600.0)
    structgen.set_cache_bytes(structgen.cache_info()["bytes"])  # full, and counted at once
    grown = structgen.compile_json_schema(schema(1), smollm2_vocab, warm_s=0)  # a hit: now the most recent
    before = grown.nbytes()
    walk_masks(grown, '{"field1": "abc', smollm2_vocab, smollm2_tokenizer)
    assert grown.nbytes() > before
    del grown
    counted = []
    real_nbytes = matcher.CompiledGrammar.nbytes
    monkeypatch.setattr(matcher.CompiledGrammar, "nbytes", lambda self: counted.append(self) or real_nbytes(self))
    evictions = structgen.cache_info()["evictions"]
    counted.clear()
    for _ in range(3):  # hits inside the interval: the growth is not counted yet
        structgen.compile_json_schema(schema(3), smollm2_vocab, warm_s=0)
    assert counted == [] and structgen.cache_info()["evictions"] == evictions
    monkeypatch.setattr(compiler, "CACHE_RECOUNT_S", 0.0)
    structgen.compile_json_schema(schema(3), smollm2_vocab, warm_s=0)  # past it: counted, over, the oldest go
    info = structgen.cache_info()
    assert len(counted) >= 4 and info["evictions"] > evictions and info["bytes"] <= info["budget_bytes"]
