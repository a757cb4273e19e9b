"""Masks computed ahead of decoding: the warm-up of a compiled grammar.

Owns: which states a warm-up computes (those an example output passes through, the
costliest first), how long it may take (the WARM_* budget), and the walk along the
example in pieces between looks at the clock. A JSON Schema compile warms its grammar
once (`warm_json`); `CompiledGrammar.warm` does the same along bytes a user chooses.
The grammar computes the tables (`CompiledGrammar.compute_tables`) and says how far it
has grown (`grown_to`). Must not know how a mask is computed, nor import the compiler or
the matcher.
"""

from __future__ import annotations

import re
import time
from typing import Iterable

from structgen import background
from structgen.automata.token_trie import token_trie
from structgen.errors import GrammarTooLargeError

# Time a JSON Schema compile spends computing, ahead of decoding, the token tables of
# the states an example output passes through, writing the example included
# (`warm_json`). By default (`warm_s=None`)
# it is as long as the compile itself took, and 2.5 times that less 10 ms for a large one
# (a compile over 6.7 ms), at least WARM_MIN_S and at most WARM_MAX_S, and never past
# the compile's `timeout_s`; none for a compile under WARM_FROM_COMPILE_S. It moves
# first-visit time from decoding steps into the compile (see README, MaskBench). A large
# schema has most of the stalls (on MaskBench-dev a third of the tokens are in the
# schemas compiling over 5 ms, and a whole example takes them 2-10 times the compile to
# warm), and its compile is already most of its first request's wait. A small schema's
# first visits are cheap: on MaskBench-dev, the schemas compiling under 2 ms had the
# same worst tokens with and without warm-up (a median of 50-60 us each), while warming
# them doubled their time to first mask; leaving them out took TTFM's p50 from 3.16 to
# 2.53 ms and TBM's p99 from 63.8 to 67.9 us (same process, interleaved, 752 schemas).
WARM_PER_COMPILE = 1.0
WARM_PER_LARGE_COMPILE = 2.5
WARM_LARGE_OFFSET_S = 0.01  # the two lines meet at a compile of 6.7 ms
WARM_MIN_S = 0.001
WARM_MAX_S = 0.05  # at 0.1, a 100 ms compile warmed 100 ms more (TTFM max ~200 ms)
WARM_FROM_COMPILE_S = 0.002  # compiles quicker than this get no automatic warm-up
DEFAULT_WARM_S = None  # the automatic budget above; 0 leaves every mask to its first use
# Warming stops at this share of a grammar's state and table budgets: what it computes
# ahead must never bring a fresh grammar near being `exhausted`.
WARM_BUDGET_SHARE = 0.25
WARM_PATH_PIECE_S = 0.001  # time to walk an example between two looks at the clock
# The walk along the example stops at a state of more items than this (a quarter of what
# decoding may build): such a state costs milliseconds, and an example can go where
# outputs seldom do -- a recursive rule nested four deep, into a state that decoding
# refuses as too ambiguous after ~100 ms of building it in one compiled call, where the
# walk cannot look at the clock.
WARM_MAX_STATE_ITEMS = 5_000
WARM_CHUNK = 16  # states warmed in one compiled call, between two looks at the clock

# Where an output's tokens start the states worth computing ahead: after each comma and
# colon, and after the quote that opens a key or a string (`{"`, `, "`, `: "`, `["`).
# Tokenizers split JSON at these bytes, and a key's start is the costliest first visit
# there is: it holds every name that may come next.
_JSON_BOUNDARY = re.compile(rb'([{\[,:])\s*("?)')


def warm_json(grammar, budget_s: float | None, timeout_s: float) -> None:
    """Compute ahead the token tables of the states an example document (every optional
    property written once, `automata.example`) reaches, for about `budget_s`, writing the
    example included (checked between states; None: the automatic budget, see
    WARM_PER_COMPILE): first at its
    boundaries (the start of each key and value, the costliest first visits), then
    where a tokenizer most likely ends a token inside names, numbers and counted strings
    (the example cut greedily into the longest tokens, afresh at each boundary), then,
    where the budget was chosen (not None), at every other byte. The automatic budget
    leaves those out: a token rarely starts there, and on MaskBench-dev warming them took
    a quarter of TTFM's p90 for 1% of the token time.
    TBM's tail is these first visits; here they are paid once per schema, when it is
    compiled, instead of in a decoding step. Once per grammar: a cached grammar that was
    warmed is not warmed again."""
    if "warm_s" in grammar.stats:
        return
    compile_s = grammar.stats.get("compile_s", 0.0)
    every_byte = budget_s is not None
    if budget_s is None:
        budget_s = min(WARM_MAX_S, max(WARM_MIN_S, WARM_PER_COMPILE * compile_s,
                                       WARM_PER_LARGE_COMPILE * compile_s - WARM_LARGE_OFFSET_S))
        if compile_s < WARM_FROM_COMPILE_S:
            budget_s = 0.0
    budget_s = min(budget_s, max(0.0, timeout_s - compile_s))  # the compile's own limit
    if budget_s <= 0:  # nothing to warm: not even the example is worth making
        grammar.stats.update(warm_s=0.0, warmed_states=0)
        return
    t0 = time.perf_counter()
    with background.busy():
        example = grammar.example()
        offsets = warm_offsets(example, token_trie(grammar.vocab), every_byte)
        warmed = warm(grammar, example, offsets, budget_s - (time.perf_counter() - t0))
    grammar.stats.update(warm_s=time.perf_counter() - t0, warmed_states=warmed)


def json_boundaries(example: bytes) -> list[int]:
    """The offsets of an example just past each of its `_JSON_BOUNDARY`s."""
    out = []
    for m in _JSON_BOUNDARY.finditer(example):
        if m.group(1) in b",:":
            out.append(m.end(1))
        if m.group(2):
            out.append(m.end(2))
    return out


def warm_offsets(example: bytes, trie, every_byte: bool = True) -> list[int]:
    """The offsets of an example whose states `warm_json` computes, in its order: the
    JSON boundaries, then the likely token starts between them, then (`every_byte`)
    every other one."""
    boundaries = json_boundaries(example)
    first = set(boundaries)
    likely = [i for i in trie.token_starts(example, boundaries) if i not in first]
    if not every_byte:
        return boundaries + likely
    first.update(likely)
    return boundaries + likely + [i for i in range(len(example) + 1) if i not in first]


def warm(grammar, data: bytes, offsets: Iterable[int], budget_s: float) -> int:
    """Compute now the token tables of the states after `data[:i]` for each i in
    `offsets`, in the order given (offsets outside the data, or past where it leaves
    the language, are skipped), until `budget_s` is spent (checked between states and
    between pieces of the walk along `data`) or the grammar has grown to
    WARM_BUDGET_SHARE of its state or table budget; returns how many tables were
    computed. `data` is an example output (see `automata.example`): its states are
    the ones every output passes through, whose first visit would otherwise stall a
    decoding step."""
    deadline = time.perf_counter() + budget_s
    path = _path_until(grammar.dfa, data, deadline)
    states = list(dict.fromkeys(path[i] for i in offsets if 0 <= i < len(path) and path[i] >= 0))
    warmed = 0
    for at in range(0, len(states), WARM_CHUNK):
        if time.perf_counter() > deadline or grammar.grown_to(WARM_BUDGET_SHARE):
            break
        try:
            warmed += grammar.compute_tables(states[at:at + WARM_CHUNK])
        except GrammarTooLargeError:
            break  # a budget met ahead: decoding meets it only if it comes here
    return warmed


def _path_until(dfa, data: bytes, deadline: float) -> list[int]:
    """The states after each prefix of `data` (see `dfa.path`), up to where the data
    leaves the language, meets a state budget, or `deadline` passes. Walked in pieces
    sized to take about WARM_PATH_PIECE_S each, so that the clock is looked at often
    enough: a step through an unbuilt row unions the targets of every item of its
    state, and a state of an object whose members may come in any order can hold
    thousands (a 2 KB example took 12 s in one piece). The walk also stops before a
    state of more than WARM_MAX_STATE_ITEMS items."""
    path, start, size = [dfa.start], 0, 8
    while start < len(data) and path[-1] >= 0:
        t0 = time.perf_counter()
        if t0 > deadline:
            break
        try:
            with dfa.lock:
                path += dfa.path(path[-1], data[start:start + size], WARM_MAX_STATE_ITEMS).tolist()[1:]
        except GrammarTooLargeError:
            break
        start += size
        per_byte = (time.perf_counter() - t0) / size
        size = max(1, min(4096, int(WARM_PATH_PIECE_S / max(per_byte, 1e-9))))
    while path and path[-1] < 0:
        path.pop()
    return path
