"""The public compile functions and the compiled-grammar cache.

Owns: `compile_json_schema`, `compile_regex`, `compile_choice`, `compile_grammar` (lark or
GBNF text), `compile_tool_calls` (free text or one tagged call; front-end -> IR -> NFA ->
lazy DFA -> `CompiledGrammar`), their budgets, an LRU cache keyed by (kind, canonical
text, options, vocabulary fingerprint); a JSON Schema compile then warms its grammar
(`warmup`: masks computed ahead along an example document, `warm_s`). A compile's Python
half (`front`) runs in a worker process where `compile_workers` is started (the server
does), else in the calling thread. Must not import the engine.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterator, Sequence

from structgen import background, compile_workers, gc_pause, warmup
from structgen.automata import kernels
from structgen.automata.dfa import LazyDFA
from structgen.automata.example import covering_example
from structgen.automata.flat import FlatDFA, FlatIR, FlatUnsupported
from structgen.automata.languages import AUTOMATA
from structgen.automata.nfa import LazyNFA
from structgen.automata.token_trie import token_trie
from structgen.errors import CompileCancelledError, GrammarTooLargeError, SchemaError, StructgenError
from structgen.grammar import ir
from structgen.matcher import CompiledGrammar

DEFAULT_MAX_STATES = 50_000_000  # IR positions a grammar may expand to (built lazily)
DEFAULT_MAX_DFA_STATES = 200_000  # DFA states a grammar may grow to while decoding
DEFAULT_TIMEOUT_S = 10.0
# The compiled-grammar cache holds at most this much memory (grammars grow as they are
# used, so it is checked at every lookup, and counted afresh every CACHE_RECOUNT_S);
# the least recently used go first. An evicted
# grammar keeps serving the requests that hold it, and until they let it go its memory
# still counts against the budget: otherwise 32 streams each holding a large evicted
# grammar would sit on top of a full cache.
DEFAULT_CACHE_BYTES = min(4 << 30, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8)

_cache: "OrderedDict[tuple, CompiledGrammar]" = OrderedDict()
_evicted_in_use: "weakref.WeakSet[CompiledGrammar]" = weakref.WeakSet()  # dropped, still held by requests
_building: dict[tuple, Future] = {}  # compiles under way, by key: a second request for one waits
_cache_lock = threading.Lock()
_cache_stats = {"hits": 0, "misses": 0, "evictions": 0, "evicted_bytes": 0}  # bytes: as counted when evicted
_cache_budget = {"bytes": DEFAULT_CACHE_BYTES}
# Counting the cache's bytes reads every grammar's arrays (~10 us a grammar): done at
# every lookup, it cost a cache hit 9 ms with 1,000 grammars cached. A lookup counts
# them all again only CACHE_RECOUNT_S after the last full count; in between, the total
# is that count, plus the grammars added and less those evicted since (what grammars
# grow meanwhile is counted at the next full count). Changing the budget counts at once.
CACHE_RECOUNT_S = 0.5
_cache_total = {"bytes": 0, "counted_at": float("-inf")}


def clear_cache() -> None:
    """Forget every compiled grammar, and the tool-call schemas' alternatives compiled in
    this process (`json_schema.alternatives`)."""
    from structgen.grammar.json_schema import clear_alternatives

    clear_alternatives()
    with _cache_lock:
        _cache.clear()
        _evicted_in_use.clear()
        _cache_total.update(bytes=0, counted_at=float("-inf"))


def set_cache_bytes(budget: int) -> None:
    """The cache's memory budget in bytes (a server option)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise StructgenError(f"the grammar cache budget must be a number of bytes >= 0, got {budget!r}")
    with _cache_lock:
        _cache_budget["bytes"] = budget
        _evict_locked(recount=True)


def cache_info() -> dict:
    with _cache_lock:
        return {"size": len(_cache), "bytes": _cache_bytes_locked(), "budget_bytes": _cache_budget["bytes"],
                "evicted_in_use": len(_evicted_in_use), "evicted_in_use_bytes": _evicted_in_use_bytes_locked(),
                **_cache_stats}


_WARM_UP_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                   "required": ["name"]}


def prepare(vocab) -> None:
    """Pay now what a process's first compile against `vocab` would: the front ends' and
    automata's imports, the vocabulary's token trie and string tables, and one small
    schema taken through every stage to its first mask. Serving start-up and
    `Vocabulary.default()` call it. Without the compiled kernels it does nothing, so
    that the first compile raises their error."""
    if kernels.missing():
        return
    compile_json_schema(_WARM_UP_SCHEMA, vocab).matcher().allowed_token_ids()


def start_workers(workers: int) -> None:
    """Run the Python half of compiles in `workers` processes (compile_workers), each
    with the front ends imported before its first job."""
    compile_workers.start(workers, warm_up=_import_front_ends)


def _import_front_ends() -> None:
    import structgen.grammar.json_schema  # noqa: F401


_cancel = threading.local()  # .event: what cancels the compiles of this thread (cancelled_by)


@contextmanager
def cancelled_by(event: threading.Event) -> Iterator[None]:
    """Compiles in this thread stop with CompileCancelledError once `event` is set (the
    server sets it when a client leaves): a compile worker running its front half is
    stopped at once; in-process, the compile stops after the stage it is in."""
    previous = getattr(_cancel, "event", None)
    _cancel.event = event
    try:
        yield
    finally:
        _cancel.event = previous


def evicted_bytes() -> int:
    """The bytes the cache has evicted so far, as counted when each went (a running
    total: the server releases freed memory as it grows, `memory.keep_releasing`)."""
    return _cache_stats["evicted_bytes"]


def _cached(key: tuple, build: Callable[[], CompiledGrammar]) -> CompiledGrammar:
    """The cached grammar of `key`, else `build()`'s, cached. A compile of `key` already
    under way in another thread is waited for rather than run twice (and counts as a
    hit); if that compile was cancelled (its client left), this one compiles instead."""
    while True:
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None and not hit.exhausted:
                _cache.move_to_end(key)
                _cache_stats["hits"] += 1
                _evict_locked(keep=key)
                return hit
            under_way = _building.get(key)
            if under_way is None:
                _building[key] = under_way = Future()
                _cache_stats["misses"] += 1
                break
        try:
            grammar = _wait_for(under_way)
        except CompileCancelledError:
            if _cancelled():
                raise
            continue  # the other compile's client left, not ours
        with _cache_lock:
            _cache_stats["hits"] += 1
        return grammar
    return _build_and_cache(key, build, under_way)


def _build_and_cache(key: tuple, build: Callable[[], CompiledGrammar], under_way: Future) -> CompiledGrammar:
    try:
        grammar = build()
    except BaseException as err:
        with _cache_lock:
            del _building[key]
        # A copy without the traceback for those waiting: the traceback holds this frame,
        # which holds the future, and that cycle would keep the failed compile's IR alive
        # until the collector's next pass.
        under_way.set_exception(copy.copy(err))
        raise
    grammar.stats["cache_key"] = key[:2]
    with _cache_lock:
        replaced = _cache.get(key)
        if replaced is not None and replaced is not grammar:  # an exhausted one
            _evicted_in_use.add(replaced)
            _cache_total["bytes"] -= replaced.nbytes()
        _cache[key] = grammar
        _cache_total["bytes"] += grammar.nbytes()
        del _building[key]
        _evict_locked(keep=key)
    under_way.set_result(grammar)
    return grammar


def _wait_for(under_way: Future) -> CompiledGrammar:
    """Another thread's compile's result, unless this thread's compile is cancelled first."""
    while True:
        try:
            return under_way.result(timeout=compile_workers.CANCEL_CHECK_S)
        except FutureTimeout:
            if _cancelled():
                raise CompileCancelledError("the client disconnected while its grammar compiled") from None


def _cancelled() -> bool:
    event = getattr(_cancel, "event", None)
    return event is not None and event.is_set()


def _cache_bytes_locked() -> int:
    return sum(grammar.nbytes() for grammar in _cache.values())


def _evicted_in_use_bytes_locked() -> int:
    return sum(grammar.nbytes() for grammar in list(_evicted_in_use))


def _evict_locked(keep: tuple | None = None, recount: bool = False) -> None:
    """Drop the least recently used grammars until the cache, plus the evicted grammars
    requests still hold, fits the budget (the one just used stays, whatever its size).
    The cache's bytes are counted afresh where `recount` or CACHE_RECOUNT_S has passed."""
    now = time.monotonic()
    if recount or now - _cache_total["counted_at"] >= CACHE_RECOUNT_S:
        _cache_total.update(bytes=_cache_bytes_locked(), counted_at=now)
    total = _cache_total["bytes"] + _evicted_in_use_bytes_locked()
    if total <= _cache_budget["bytes"]:
        return
    for key in list(_cache):
        if total <= _cache_budget["bytes"]:
            break
        if key != keep:
            evicted = _cache.pop(key)
            size, still_held = evicted.nbytes(), weakref.ref(evicted)
            _evicted_in_use.add(evicted)  # leaves the set when the last request lets it go
            del evicted
            _cache_stats["evictions"] += 1
            _cache_stats["evicted_bytes"] += size
            _cache_total["bytes"] -= size
            if still_held() is None:
                total -= size


@dataclass
class Front:
    """What a compile's Python half hands to the automaton: no vocabulary, and where it
    crosses from a worker process, arrays rather than the IR's objects."""

    flat: FlatIR | None  # the IR flattened for the compiled automaton, else None
    nfa: LazyNFA | None  # the IR's NFA (in the compiling process; None once sent)
    node: ir.Node | None  # the IR, where it is sent for the Python automaton
    empty: bool  # the language has no string
    example: bytes | None  # a covering example output (computed where it is sent)
    stats: dict


def front(kind: str, make_ir: Callable[[float], ir.Node], max_states: int, deadline: float, timeout_s: float,
          for_worker: bool = False) -> Front:
    """The IR of a grammar, checked against its budgets, and flattened for the compiled
    automaton where that takes it. for_worker: ready to be pickled to the serving process."""
    with gc_pause.paused():  # also where it runs in a compile worker
        return _front(kind, make_ir, max_states, deadline, timeout_s, for_worker)


def _front(kind: str, make_ir: Callable[[float], ir.Node], max_states: int, deadline: float, timeout_s: float,
           for_worker: bool) -> Front:
    t0 = time.perf_counter()
    node = make_ir(deadline)
    ir_s = time.perf_counter() - t0
    size = ir.expanded_size(node, limit=max_states)
    if size > max_states:
        raise GrammarTooLargeError(
            f"the {kind} would expand to more than {max_states:,} automaton positions "
            "(raise max_states, or tighten large bounds such as maxLength/maxItems)"
        )
    try:
        flat = _flattened(node)
        # with a flat IR, the NFA takes its liveness from there (computed in compiled code)
        nfa = LazyNFA(node, deadline=deadline, liveness=None if flat is None else flat.liveness())
    except RecursionError:  # within the input nesting limits this is a bug; still the user's error
        raise GrammarTooLargeError(f"the {kind} is nested too deeply to compile") from None
    if nfa.is_empty_language:
        raise SchemaError(f"the {kind} admits no value at all (its language is empty)", "")
    _check_deadline(kind, deadline, timeout_s)
    stats = {"ir_s": ir_s, "front_s": time.perf_counter() - t0, "ir_size": size}
    if not for_worker:
        return Front(flat, nfa, None, False, None, stats)
    example = covering_example(nfa.root, nfa) if kind == "json_schema" else None
    return Front(flat, None, None if flat is not None else node, False, example, stats)


def _flattened(node: ir.Node) -> FlatIR | None:
    if not _flat_automaton():
        return None
    try:
        return FlatIR(node)
    except FlatUnsupported:  # huge IRs, wide objects with a huge count bound
        return None


def _check_deadline(kind: str, deadline: float, timeout_s: float) -> None:
    if time.monotonic() > deadline:
        raise GrammarTooLargeError(f"compiling the {kind} exceeded its {timeout_s:g} s budget")


def _build(
    kind: str,
    source: str,
    make_ir: Callable[[float], ir.Node],
    vocab,
    max_states: int,
    max_dfa_states: int,
    timeout_s: float,
) -> CompiledGrammar:
    kernels.require()  # one clear error where the compiled kernels are not built
    if _flat_automaton():
        FlatDFA.vocabulary_tables(token_trie(vocab))  # made once, outside the budget
    with background.busy(), gc_pause.paused():
        return _built(kind, source, make_ir, vocab, max_states, max_dfa_states, timeout_s)


def _built(kind: str, source: str, make_ir: Callable[[float], ir.Node], vocab, max_states: int,
           max_dfa_states: int, timeout_s: float) -> CompiledGrammar:
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    cancel = getattr(_cancel, "event", None)
    if compile_workers.active():
        made = compile_workers.run(front, kind, make_ir, max_states, deadline, timeout_s, True, cancel=cancel)
    else:
        made = front(kind, make_ir, max_states, deadline, timeout_s)
    if cancel is not None and cancel.is_set():
        raise CompileCancelledError(f"the {kind} compile was cancelled")
    dfa = _automaton(made, max_dfa_states)
    if dfa.start < 0:
        raise SchemaError(f"the {kind} admits no value at all (its language is empty)", "")
    _check_deadline(kind, deadline, timeout_s)
    stats = {**made.stats, "compile_s": time.perf_counter() - t0}
    return CompiledGrammar(kind, source, dfa, vocab, stats, example=made.example)


def _flat_automaton() -> bool:
    """The compiled automaton unless STRUCTGEN_AUTOMATON=python (A/B runs, debugging)."""
    return os.environ.get("STRUCTGEN_AUTOMATON", "flat") != "python"


def _automaton(made: Front, max_dfa_states: int):
    """The lazy DFA of a grammar: the compiled one (`flat.FlatDFA`: rows built in
    compiled code) where it takes the grammar, else (huge IRs, objects in any order of
    over ~60 properties with a count bound past 2^24, or STRUCTGEN_AUTOMATON=python)
    the Python one (`dfa.LazyDFA`)."""
    if made.flat is not None:
        dfa = FlatDFA.of_flat(made.flat, made.empty, max_states=max_dfa_states)
        dfa.nfa = made.nfa
        return dfa
    return LazyDFA(made.nfa or LazyNFA(made.node), max_states=max_dfa_states)


def compile_json_schema(
    schema: dict | bool | str,
    vocab,
    *,
    whitespace: str = "default",
    indent: int | None = None,
    strict: bool = False,
    lenient: bool = False,
    max_states: int = DEFAULT_MAX_STATES,
    max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    warm_s: float | None = warmup.DEFAULT_WARM_S,
    **json_options: Any,
) -> CompiledGrammar:
    """Compile a JSON Schema (dict, bool, or JSON text) to a token-level grammar.

    whitespace: "default" (exactly `json.dumps` separators), "compact", "flexible"
    (any JSON whitespace, bounded per run); indent=N: exactly `json.dumps(indent=N)`.
    strict: OpenAI strict mode (no undeclared properties). lenient: ignore unsupported
    keywords instead of refusing them -- this MAY UNDER-CONSTRAIN the output.
    timeout_s: the compile's time budget, past which it raises GrammarTooLargeError.
    warm_s: time the compile may spend computing the masks of the states an example
    document passes through (the start of each key and value first, then where a
    tokenizer most likely ends a token, then every other byte), so that decoding does
    not stop for them; None: as long as the compile took (more for a large schema, see
    warmup.WARM_PER_LARGE_COMPILE), within 1-100 ms, none for a compile under 2 ms
    (warmup.WARM_FROM_COMPILE_S), and not at every other byte (the
    default); 0 leaves every mask to its first use. Not part of the cache key: a cached
    grammar not warmed yet is warmed by the first call that asks.
    """
    from structgen.grammar.json_schema import JsonOptions, canonical_key, parse_schema

    schema = parse_schema(schema)
    if warm_s is not None and (isinstance(warm_s, bool) or not isinstance(warm_s, (int, float)) or not warm_s >= 0):
        raise StructgenError(f"warm_s must be a number of seconds >= 0 or None, got {warm_s!r}")
    if indent is not None:
        whitespace = "indent"
    options = JsonOptions(
        whitespace=whitespace, indent=indent, strict=strict, lenient=lenient, max_states=max_states,
        timeout_s=timeout_s, **json_options
    )
    source = canonical_key(schema, options)
    key = ("json_schema", source, max_states, max_dfa_states, vocab.fingerprint)

    make_ir = partial(_schema_ir, schema, options)
    grammar = _cached(
        key,
        lambda: _build("json_schema", source, make_ir, vocab, max_states, max_dfa_states, timeout_s),
    )
    if warm_s is None or warm_s > 0:
        with gc_pause.paused():
            warmup.warm_json(grammar, warm_s, timeout_s)
    return grammar


def compile_regex(
    pattern: str,
    vocab,
    *,
    max_states: int = DEFAULT_MAX_STATES,
    max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CompiledGrammar:
    """Compile a regular expression (ECMA-262 syntax, full-match, over UTF-8 text)."""
    if not isinstance(pattern, str):
        raise StructgenError(f"regex must be a string, got {type(pattern).__name__}")
    key = ("regex", pattern, max_states, max_dfa_states, vocab.fingerprint)
    return _cached(
        key,
        lambda: _build(
            "regex", pattern, partial(_regex_ir, pattern), vocab, max_states, max_dfa_states, timeout_s
        ),
    )


def compile_choice(
    choices: Sequence[str],
    vocab,
    *,
    max_states: int = DEFAULT_MAX_STATES,
    max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CompiledGrammar:
    """Compile a list of literal strings: the output is exactly one of them."""
    if isinstance(choices, (str, bytes)) or not all(isinstance(c, str) for c in choices):
        raise StructgenError("choices must be a list of strings")
    if not choices:
        raise StructgenError("choices must not be empty")
    source = json.dumps(list(choices), ensure_ascii=False)
    key = ("choice", source, max_states, max_dfa_states, vocab.fingerprint)
    make_ir = partial(_choice_ir, tuple(choices))
    return _cached(key, lambda: _build("choice", source, make_ir, vocab, max_states, max_dfa_states, timeout_s))


GRAMMAR_SYNTAXES = ("lark", "gbnf")


def compile_grammar(
    text: str,
    vocab,
    *,
    syntax: str = "lark",
    start: str | None = None,
    max_states: int = DEFAULT_MAX_STATES,
    max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CompiledGrammar:
    """Compile a context-free grammar: lark EBNF (`syntax="lark"`, start rule `start`) or
    llama.cpp GBNF (`syntax="gbnf"`, start rule `root`). Recursion, ambiguity and left
    recursion are allowed; see `structgen.grammar.cfg` for what the language is."""
    if syntax not in GRAMMAR_SYNTAXES:
        raise StructgenError(f"unknown grammar syntax {syntax!r} (expected 'lark' or 'gbnf')")
    if not isinstance(text, str):
        raise StructgenError(f"a grammar must be a string, not {type(text).__name__}")
    if start is None:
        start = "start" if syntax == "lark" else "root"
    key = (syntax, text, start, max_states, max_dfa_states, vocab.fingerprint)

    make_ir = partial(_grammar_ir, syntax, text, start)
    return _cached(key, lambda: _build(syntax, text, make_ir, vocab, max_states, max_dfa_states, timeout_s))


def compile_tool_calls(
    call_schema: dict,
    vocab,
    *,
    open_tag: str = "<tool_call>",
    close_tag: str = "</tool_call>",
    allow_text: bool = True,
    parallel: bool = False,
    max_states: int = DEFAULT_MAX_STATES,
    max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    **json_options: Any,
) -> CompiledGrammar:
    """Tool calls written `open_tag JSON close_tag`, each JSON validating against
    `call_schema`. allow_text: the reply may instead be free text (OpenAI's tool_choice
    "auto"); free text may not begin with `open_tag`, so once the model starts the tag,
    the call must be valid. parallel: one call or more, each right after the one before
    (no separator, so that a model that would go on in text ends instead); otherwise
    exactly one. json_options: `JsonOptions` fields for `call_schema` (strict_pointers, ...).
    A `call_schema` that is only an anyOf (one alternative per tool) is compiled one
    alternative at a time, each a document of its own ($refs resolve inside it), and each
    alternative's IR is kept for the next tool set that has it (`json_schema.union_ir`)."""
    from structgen.grammar.json_schema import JsonOptions, canonical_key, parse_schema

    if not open_tag or not close_tag:
        raise StructgenError("open_tag and close_tag must be non-empty")
    call_schema = parse_schema(call_schema)
    options = JsonOptions(**json_options)
    source = json.dumps([canonical_key(call_schema, options), open_tag, close_tag, allow_text, parallel])
    key = ("tool_calls", source, max_states, max_dfa_states, vocab.fingerprint)

    make_ir = partial(_tool_calls_ir, call_schema, options, open_tag, close_tag, allow_text, parallel)
    return _cached(key, lambda: _build("tool_calls", source, make_ir, vocab, max_states, max_dfa_states, timeout_s))


# The IR of each kind of grammar, as module functions: a compile worker process is sent
# one with its arguments (`front`).


def _schema_ir(schema: Any, options: Any, deadline: float) -> ir.Node:
    from structgen.grammar.json_schema import schema_to_ir

    return schema_to_ir(schema, options, deadline=deadline, languages=AUTOMATA)


def _regex_ir(pattern: str, _deadline: float) -> ir.Node:
    from structgen.grammar.regex import regex_ir

    return regex_ir(pattern)


def _choice_ir(choices: tuple[str, ...], _deadline: float) -> ir.Node:
    return ir.alt(*(ir.lit(c) for c in dict.fromkeys(choices)))


def _grammar_ir(syntax: str, text: str, start: str, _deadline: float) -> ir.Node:
    from structgen.grammar.cfg import grammar_to_ir

    if syntax == "lark":
        from structgen.grammar.lark_grammar import parse_lark

        return grammar_to_ir(parse_lark(text, start), AUTOMATA)
    from structgen.grammar.gbnf import parse_gbnf

    return grammar_to_ir(parse_gbnf(text, start), AUTOMATA)


def _tool_calls_ir(call_schema: Any, options: Any, open_tag: str, close_tag: str, allow_text: bool, parallel: bool,
                   deadline: float) -> ir.Node:
    from structgen.grammar.json_schema import union_ir

    call = ir.seq(ir.lit(open_tag), union_ir(call_schema, options, deadline=deadline, languages=AUTOMATA),
                  ir.lit(close_tag))
    if parallel:
        call = ir.rep(call, 1, None)
    return ir.alt(_text_not_starting_with(open_tag), call) if allow_text else call


def _text_not_starting_with(prefix: str) -> ir.Node:
    """Any UTF-8 text except the ones that begin with `prefix`."""
    from structgen.grammar import charset as C

    anything = ir.rep(C.utf8_ir(C.ANY_CHAR), 0, None)
    branches = [ir.EMPTY]
    for i, ch in enumerate(prefix):
        other = C.complement(C.charset([(ord(ch), ord(ch))]))
        head = ir.lit(prefix[:i])
        branches.append(ir.seq(head, C.utf8_ir(other), anything))
        if i:
            branches.append(head)  # a proper prefix of the tag, then the end
    return ir.alt(*branches)
