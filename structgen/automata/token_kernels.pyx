# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled kernels of the token masks (tokens.py, flat_tokens.py): the trie's
construction, the walk of the trie through a DFA table, and the walks over a flat
automaton that build the rows they meet (through flat_kernels' C interface).

Owns: the machine code of those algorithms only, compiled ahead of time. Must not
touch Python objects inside a kernel (each runs without the GIL; the automaton's lock
is taken on the Python side), raise from inside one, or grow an automaton's array: a
row that runs out of room fails the call through the store's meta[M_FAILED], and
flat.FlatDFA.run grows it and calls again. Layouts: token_trie.TokenTrie, flat.py.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

import numpy as np

cimport numpy as cnp

from structgen.automata.flat_kernels cimport (DEAD, FAILED_MEMORY, IR, M_FAILED, Rows, Store, body_exit, buffer_of,
                                              expand_rows, free_bits, ir_of, known_loops, rows_of, sort_items,
                                              sorted_unique, step, store_of, twin_of)

cnp.import_array()

cdef extern from *:
    """
    #if defined(_MSC_VER)
      static __inline int sg_popcount(unsigned int x) {
          x = x - ((x >> 1) & 0x55555555u);
          x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
          return (int)((((x + (x >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24);
      }
      #define SG_POPCOUNT(x) sg_popcount(x)
    #else
      #define SG_POPCOUNT(x) __builtin_popcount(x)
    #endif
    """
    int popcount32 "SG_POPCOUNT"(uint32_t x) noexcept nogil

cdef enum:
    # Pairs `walk` may leave to its caller: those blocked on a row not built yet, and,
    # once its stack or this many blocked pairs fill up, the rest of its stack.
    WALK_LEFT_MAX = 256
    WALK_STACK = 4096  # the stack's room past its start pairs: small, large blocks cost a page fault per call
    NEAR_MAX_BYTES = 12  # tokens.NEAR_MAX_BYTES
    # What `plain_tokens` returns for a state that is not plain (flat_tokens.NOT_PLAIN_*).
    NOT_PLAIN_LOOP = -1
    NOT_PLAIN_FREE = -2
    NOT_PLAIN_WIDE = -3
    NOT_PLAIN_FAILED = -4
    NOT_PLAIN_BODY = -5
    NOT_PLAIN_TWIN = -6
    NOT_PLAIN_SHORT_TWIN = -7
    # How `run` ended (tokens._RUN_*).
    RUN_BLOCKED = 0
    RUN_BROKEN = 1
    RUN_DEAD = 2
    RUN_FULL = 3

# For the test that these equal tokens.py's and flat_tokens.py's.
LAYOUT = dict(NEAR_MAX_BYTES=NEAR_MAX_BYTES, NOT_PLAIN_LOOP=NOT_PLAIN_LOOP,
              NOT_PLAIN_FREE=NOT_PLAIN_FREE, NOT_PLAIN_WIDE=NOT_PLAIN_WIDE, NOT_PLAIN_FAILED=NOT_PLAIN_FAILED,
              NOT_PLAIN_BODY=NOT_PLAIN_BODY, NOT_PLAIN_TWIN=NOT_PLAIN_TWIN,
              NOT_PLAIN_SHORT_TWIN=NOT_PLAIN_SHORT_TWIN, _RUN_BLOCKED=RUN_BLOCKED,
              _RUN_BROKEN=RUN_BROKEN, _RUN_DEAD=RUN_DEAD, _RUN_FULL=RUN_FULL)


cdef struct Trie:
    # a TokenTrie's arrays (see there); `below` 4 words a node
    const int32_t* edge_start
    const uint8_t* edge_byte
    const int32_t* edge_child
    const int32_t* token_start
    const int32_t* token_ids
    const int32_t* subtree_end
    const uint64_t* below


cdef struct Pairs:
    # (trie node, DFA state) pairs to walk on from
    int64_t* nodes
    int64_t* states
    int64_t n


cdef Trie trie_of(edge_start, edge_byte, edge_child, token_start, token_ids, subtree_end, below) except *:
    cdef Trie t
    t.edge_start = <const int32_t*>buffer_of(edge_start, 4, False)
    t.edge_byte = <const uint8_t*>buffer_of(edge_byte, 1, False)
    t.edge_child = <const int32_t*>buffer_of(edge_child, 4, False)
    t.token_start = <const int32_t*>buffer_of(token_start, 4, False)
    t.token_ids = <const int32_t*>buffer_of(token_ids, 4, False)
    t.subtree_end = <const int32_t*>buffer_of(subtree_end, 4, False)
    t.below = <const uint64_t*>buffer_of(below, 8, False)
    return t


cdef Pairs pairs_of(nodes, states) except *:
    cdef Pairs p
    p.nodes = <int64_t*>buffer_of(nodes, 8, False)
    p.states = <int64_t*>buffer_of(states, 8, False)
    p.n = len(nodes)
    if len(states) != p.n:
        raise ValueError("as many states as nodes")
    return p


# ------------------------------------------------------------ the trie

def made_of(token_bytes, token_end, loops):
    """Per token: whether every one of its bytes is in the 256-bit set `loops`."""
    cdef int64_t n = len(token_end), start = 0, t, i, b
    inside_array = np.ones(n, dtype=np.bool_)
    cdef uint8_t* inside = <uint8_t*>buffer_of(inside_array, 1, True)
    cdef const uint8_t* data = <const uint8_t*>buffer_of(token_bytes, 1, False)
    cdef const int64_t* end = <const int64_t*>buffer_of(token_end, 8, False)
    cdef const uint64_t* bits = <const uint64_t*>buffer_of(loops, 8, False)
    with nogil:
        for t in range(n):
            for i in range(start, end[t]):
                b = data[i]
                if not (bits[b >> 6] >> (b & 63)) & 1:
                    inside[t] = False
                    break
            start = end[t]
    return inside_array


def trie_nodes(token_bytes, token_end):
    """The nodes of the trie of tokens sorted by their bytes (token t is
    token_bytes[token_end[t - 1]:token_end[t]]), in depth-first preorder: each node's
    parent and the byte on its edge (node 0 is the root), and each token's node. A
    token shares the nodes of the prefix it has in common with the one before it."""
    cdef int64_t n_tokens = len(token_end), longest = 0, t, start, length, common, d, n_nodes = 1
    cdef int64_t previous = 0, previous_length = 0
    cdef const uint8_t* data = <const uint8_t*>buffer_of(token_bytes, 1, False)
    cdef const int64_t* end = <const int64_t*>buffer_of(token_end, 8, False)
    for t in range(n_tokens):
        length = end[t] - (end[t - 1] if t else 0)
        longest = length if length > longest else longest
    cdef int64_t total = end[n_tokens - 1] if n_tokens else 0
    parent_array = np.empty(total + 1, dtype=np.int64)
    byte_array = np.zeros(total + 1, dtype=np.uint8)
    node_array = np.empty(n_tokens, dtype=np.int64)
    path_array = np.zeros(longest + 1, dtype=np.int64)  # path[d]: the node of the current token's first d bytes
    cdef int64_t* parent = <int64_t*>buffer_of(parent_array, 8, True)
    cdef uint8_t* byte = <uint8_t*>buffer_of(byte_array, 1, True)
    cdef int64_t* node_of_token = <int64_t*>buffer_of(node_array, 8, True)
    cdef int64_t* path = <int64_t*>buffer_of(path_array, 8, True)
    with nogil:
        parent[0] = -1
        for t in range(n_tokens):
            start = end[t - 1] if t else 0
            length = end[t] - start
            common = 0
            while common < length and common < previous_length and data[start + common] == data[previous + common]:
                common += 1
            for d in range(common, length):
                parent[n_nodes] = path[d]
                byte[n_nodes] = data[start + d]
                path[d + 1] = n_nodes
                n_nodes += 1
            node_of_token[t] = path[length]
            previous, previous_length = start, length
    return parent_array[:n_nodes], byte_array[:n_nodes], node_array


def trie_edges(parent):
    """The trie's edges grouped by parent as CSR: `edge_start` (n + 1, int32), where
    each node's children begin, and `edge_child` (int32), the children in preorder within
    each parent -- which is byte order. A counting sort: one pass to count, one to place."""
    cdef int64_t n = len(parent), node, p
    start_array = np.zeros(n + 1, dtype=np.int32)
    child_array = np.empty(max(n - 1, 0), dtype=np.int32)
    cursor_array = np.empty(n, dtype=np.int32)
    cdef const int64_t* parent_ = <const int64_t*>buffer_of(parent, 8, False)
    cdef int32_t* start = <int32_t*>buffer_of(start_array, 4, True)
    cdef int32_t* child = <int32_t*>buffer_of(child_array, 4, True) if n > 1 else NULL
    cdef int32_t* cursor = <int32_t*>buffer_of(cursor_array, 4, True) if n else NULL
    with nogil:
        for node in range(1, n):
            start[parent_[node] + 1] += 1
        for node in range(n):
            start[node + 1] += start[node]
            cursor[node] = start[node]
        for node in range(1, n):
            p = parent_[node]
            child[cursor[p]] = <int32_t>node
            cursor[p] += 1
    return start_array, child_array


def subtree_facts(parent, byte):
    """Per node: one past its last descendant (preorder), and the set of bytes on the
    edges below it as 4 x 64 bits."""
    cdef int64_t n = len(parent), node, p, b, w
    end_array = np.arange(1, n + 1).astype(np.int32)
    below_array = np.zeros((n, 4), dtype=np.uint64)
    cdef const int64_t* parent_ = <const int64_t*>buffer_of(parent, 8, False)
    cdef const uint8_t* byte_ = <const uint8_t*>buffer_of(byte, 1, False)
    cdef int32_t* end = <int32_t*>buffer_of(end_array, 4, True)
    cdef uint64_t* below = <uint64_t*>buffer_of(below_array, 8, True)
    with nogil:
        for node in range(n - 1, 0, -1):  # children come after their parent in preorder
            p = parent_[node]
            if end[node] > end[p]:
                end[p] = end[node]
            b = byte_[node]
            below[4 * p + (b >> 6)] |= (<uint64_t>1) << (b & 63)
            for w in range(4):
                below[4 * p + w] |= below[4 * node + w]
    return end_array, below_array


def greedy_starts(edge_start, edge_byte, edge_child, token_start, codes, restarts):
    """See `TokenTrie.token_starts`. A byte no token starts with counts as one."""
    cdef const int32_t* e_start = <const int32_t*>buffer_of(edge_start, 4, False)
    cdef const uint8_t* e_byte = <const uint8_t*>buffer_of(edge_byte, 1, False)
    cdef const int32_t* e_child = <const int32_t*>buffer_of(edge_child, 4, False)
    cdef const int32_t* t_start = <const int32_t*>buffer_of(token_start, 4, False)
    cdef const uint8_t* data = <const uint8_t*>buffer_of(codes, 1, False)
    cdef const int64_t* again = <const int64_t*>buffer_of(restarts, 8, False)
    cdef int64_t size = len(codes), n_restarts = len(restarts), n = 0, pos = 0, r = 0, node, longest, i, child, e, nxt
    starts_array = np.empty(size + 1, dtype=np.int64)
    cdef int64_t* starts = <int64_t*>buffer_of(starts_array, 8, True)
    with nogil:
        while pos < size:
            starts[n] = pos
            n += 1
            node, longest, i = 0, 1, pos
            while i < size:
                child = -1
                for e in range(e_start[node], e_start[node + 1]):
                    if e_byte[e] == data[i]:
                        child = e_child[e]
                        break
                if child < 0:
                    break
                node = child
                i += 1
                if t_start[node + 1] > t_start[node]:  # a token ends here
                    longest = i - pos
            nxt = pos + longest
            while r < n_restarts and again[r] <= pos:  # the next restart past pos
                r += 1
            pos = again[r] if r < n_restarts and again[r] < nxt else nxt
        starts[n] = size
    return starts_array[: n + 1].copy()


# ------------------------------------------------------------ masks

cdef inline int64_t allow_range(uint32_t* words, const int32_t* token_ids, int64_t lo, int64_t hi) noexcept nogil:
    """Set the bits of the tokens `token_ids[lo:hi]` in `words`; returns how many."""
    cdef int64_t r, tid
    for r in range(lo, hi):
        tid = token_ids[r]
        words[tid >> 5] |= (<uint32_t>1) << (tid & 31)
    return hi - lo


def allow(words, token_ids, int64_t lo, int64_t hi):
    """Set the bits of the tokens `token_ids[lo:hi]` in `words` (uint32); returns how many."""
    cdef uint32_t* words_ = <uint32_t*>buffer_of(words, 4, True)
    cdef const int32_t* ids = <const int32_t*>buffer_of(token_ids, 4, False)
    if lo < 0 or hi > len(token_ids):
        raise IndexError("token range out of bounds")
    with nogil:
        hi = allow_range(words_, ids, lo, hi)
    return hi


def deny(words, token_ids, int64_t lo, int64_t hi):
    """Clear the bits of the tokens `token_ids[lo:hi]` in `words` (uint32)."""
    cdef uint32_t* words_ = <uint32_t*>buffer_of(words, 4, True)
    cdef const int32_t* ids = <const int32_t*>buffer_of(token_ids, 4, False)
    cdef int64_t r, tid
    if lo < 0 or hi > len(token_ids):
        raise IndexError("token range out of bounds")
    with nogil:
        for r in range(lo, hi):
            tid = ids[r]
            words_[tid >> 5] &= ~((<uint32_t>1) << (tid & 31))


cdef inline int64_t with_eos(uint32_t* words, const uint32_t* eos_words, int64_t n_words) noexcept nogil:
    """Allow the EOS tokens in `words` (none of them set before): how many."""
    cdef int64_t count = 0, w
    for w in range(n_words):
        count += popcount32(eos_words[w])
        words[w] |= eos_words[w]
    return count


cdef int walk(const Trie* t, const Rows* r, const Pairs* start, uint32_t* words, Pairs* left,
              int64_t* allowed) noexcept nogil:
    """Walk the trie from (node, DFA state) pairs whose node's own tokens are already
    counted. Sets the bit of every allowed token in `words`, adds how many to `allowed`,
    and leaves in `left` (allocated here) the pairs left to the caller: those it stopped
    at because their state's row is not built yet, and, when its stack or the blocked
    pairs filled up, the rest of its stack. -1 where memory ran out."""
    cdef int64_t capacity = start.n + WALK_STACK, top = 0, n_blocked = 0, count = 0, i, node, state, e, nxt, child, w
    cdef int64_t* buffer = <int64_t*>malloc((2 * capacity + 2 * WALK_LEFT_MAX) * 8)
    if buffer == NULL:
        return -1
    cdef int64_t* stack_nodes = buffer
    cdef int64_t* stack_states = buffer + capacity
    cdef int64_t* blocked_nodes = buffer + 2 * capacity
    cdef int64_t* blocked_states = blocked_nodes + WALK_LEFT_MAX
    cdef const uint64_t* loops
    cdef const uint64_t* below
    cdef const int32_t* row
    cdef bint looping
    for i in range(start.n):
        stack_nodes[top] = start.nodes[i]
        stack_states[top] = start.states[i]
        top += 1
    # (a node pushes at most 256 children)
    while top and top + 256 <= capacity and n_blocked < WALK_LEFT_MAX:
        top -= 1
        node = stack_nodes[top]
        state = stack_states[top]
        if not r.expanded[state]:
            blocked_nodes[n_blocked] = node
            blocked_states[n_blocked] = state
            n_blocked += 1
            continue
        # Most states loop on no byte: skip the subtree test (a cache miss on `below`).
        loops = r.loops + 4 * state
        if loops[0] | loops[1] | loops[2] | loops[3]:
            below = t.below + 4 * node
            looping = True
            for w in range(4):
                if below[w] & ~loops[w]:
                    looping = False
                    break
            if looping:  # every token below stays in `state`
                count += allow_range(words, t.token_ids, t.token_start[node + 1], t.token_start[t.subtree_end[node]])
                continue
        row = r.table + 256 * state
        for e in range(t.edge_start[node], t.edge_start[node + 1]):
            nxt = row[t.edge_byte[e]]
            if nxt < 0:
                continue
            child = t.edge_child[e]
            count += allow_range(words, t.token_ids, t.token_start[child], t.token_start[child + 1])
            if t.subtree_end[child] > child + 1:
                stack_nodes[top] = child
                stack_states[top] = nxt
                top += 1
    left.n = n_blocked + top
    left.nodes = <int64_t*>malloc((2 * left.n + 1) * 8)
    if left.nodes == NULL:
        free(buffer)
        return -1
    left.states = left.nodes + left.n
    memcpy(left.nodes, blocked_nodes, n_blocked * 8)
    memcpy(left.nodes + n_blocked, stack_nodes, top * 8)
    memcpy(left.states, blocked_states, n_blocked * 8)
    memcpy(left.states + n_blocked, stack_states, top * 8)
    free(buffer)
    allowed[0] += count
    return 0


cdef inline void fail_memory(Store* st) noexcept nogil:
    if st.meta[M_FAILED] == 0:
        st.meta[M_FAILED] = FAILED_MEMORY


cdef bint build_blocked(const IR* g, Store* st, Rows* r, const Pairs* left, int64_t max_items,
                        int64_t max_nesting) noexcept nogil:
    """Build the rows of the states a walk stopped at, in the order of their ids;
    whether the call goes on (False: it failed, see flat.M_FAILED)."""
    cdef int64_t* sids = <int64_t*>malloc((left.n + 1) * 8)
    if sids == NULL:
        fail_memory(st)
        return False
    memcpy(sids, left.states, left.n * 8)
    sort_items(sids, left.n)
    expand_rows(g, st, r, sids, sorted_unique(sids, left.n), max_items, max_nesting)
    free(sids)
    return st.meta[M_FAILED] == 0


cdef int64_t walk_rows(const IR* g, Store* st, Rows* r, const Trie* t, const Pairs* start, uint32_t* words,
                       int64_t max_items, int64_t max_nesting) noexcept nogil:
    """`walk` from (node, state) pairs, then the rows it stopped at, then `walk` again
    from there, until done: how many tokens it allowed. A row that finds the automaton's
    arrays full fails the call (flat.M_FAILED), which Python runs again once they are
    grown (`FlatDFA.run`): it sets the same bits again and counts afresh."""
    cdef int64_t allowed = 0
    cdef Pairs current = start[0]
    cdef Pairs left
    cdef int64_t* owned = NULL  # the pairs allocated here, freed once walked
    while current.n:
        if walk(t, r, &current, words, &left, &allowed) < 0:
            fail_memory(st)
            break
        free(owned)
        owned, current = left.nodes, left
        if current.n and not build_blocked(g, st, r, &current, max_items, max_nesting):
            break
    free(owned)
    return allowed


cdef int64_t walk_stepping(const IR* g, Store* st, Rows* r, const Trie* t, int64_t sid, uint32_t* words,
                           int64_t max_items, int64_t max_nesting) noexcept nogil:
    """The walk of the trie `t` from state `sid` that builds no row: a state whose row
    is built is read from it, any other steps on each byte its trie node goes on with
    (`flat_kernels.step`). For a trie of a few long tokens, along whose paths building
    each state's row would also make every state its other bytes lead to (a dozen a
    row inside a JSON string: the middles of multi-byte characters, the escapes). How
    many tokens it allowed; a call that fails (see flat.M_FAILED) stops at once."""
    cdef int64_t capacity = 1024, top = 1, count = 0, node, state, e, nxt, child
    cdef int64_t* stack = <int64_t*>malloc(2 * capacity * 8)  # (node, state) pairs
    cdef int64_t* grown
    if stack == NULL:
        fail_memory(st)
        return 0
    stack[0], stack[1] = 0, sid
    while top:
        top -= 1
        node, state = stack[2 * top], stack[2 * top + 1]
        if top + (t.edge_start[node + 1] - t.edge_start[node]) > capacity:
            capacity = 2 * capacity + (t.edge_start[node + 1] - t.edge_start[node])
            grown = <int64_t*>realloc(stack, 2 * capacity * 8)
            if grown == NULL:
                fail_memory(st)
                break
            stack = grown
        for e in range(t.edge_start[node], t.edge_start[node + 1]):
            if r.expanded[state]:
                nxt = r.table[256 * state + t.edge_byte[e]]
            else:
                nxt = step(g, st, r, state, t.edge_byte[e], max_items, max_nesting)
                if st.meta[M_FAILED]:
                    free(stack)
                    return count
            if nxt < 0:
                continue
            child = t.edge_child[e]
            count += allow_range(words, t.token_ids, t.token_start[child], t.token_start[child + 1])
            if t.subtree_end[child] > child + 1:
                stack[2 * top], stack[2 * top + 1] = child, nxt
                top += 1
    free(stack)
    return count


cdef void dominant(const int32_t* row, int64_t* target, int64_t* count, int64_t* live) noexcept nogil:
    """The state the row's live bytes lead to most (the smallest one on a tie) in
    `target`, how many do in `count`, and how many bytes are live in `live`; -1, 0, 0
    where none is. A row is a few runs of equal targets, so the distinct ones are few."""
    cdef int64_t values[256]
    cdef int64_t counts[256]
    cdef int64_t distinct = 0, previous = -1, slot = -1, best = -1, b, i, to
    live[0] = 0
    for b in range(256):
        to = row[b]
        if to < 0:
            continue
        live[0] += 1
        if to != previous:
            slot = -1
            for i in range(distinct):
                if values[i] == to:
                    slot = i
                    break
            if slot < 0:
                slot = distinct
                values[slot] = to
                counts[slot] = 0
                distinct += 1
            previous = to
        counts[slot] += 1
    for i in range(distinct):
        if best < 0 or counts[i] > counts[best] or (counts[i] == counts[best] and values[i] < values[best]):
            best = i
    if best < 0:
        target[0], count[0], live[0] = -1, 0, 0
    else:
        target[0], count[0] = values[best], counts[best]


def dominant_of(row):
    """(t, n, live) of a table row (see `dominant`)."""
    cdef const int32_t* row_ = <const int32_t*>buffer_of(row, 4, False)
    cdef int64_t target, count, live
    if len(row) != 256:
        raise ValueError("a table row has 256 states")
    with nogil:
        dominant(row_, &target, &count, &live)
    return target, count, live


def run(table, expanded, int64_t start, members, int64_t limit):
    """Follow the bytes `members` from `start` while they all lead to one live state:
    (steps taken, state reached, how it ended: blocked on an unbuilt row, broken (the
    bytes part ways), dead (they all leave the language) or full (`limit` steps))."""
    cdef const int32_t* table_ = <const int32_t*>buffer_of(table, 4, False)
    cdef const uint8_t* expanded_ = <const uint8_t*>buffer_of(expanded, 1, False)
    cdef const int64_t* bytes_ = <const int64_t*>buffer_of(members, 8, False)
    cdef int64_t n = len(members), state = start, step, i, nxt, how = RUN_FULL, steps = limit
    if n == 0:
        raise ValueError("a run follows at least one byte")
    with nogil:
        for step in range(limit):
            if not expanded_[state]:
                steps, how = step, RUN_BLOCKED
                break
            nxt = table_[256 * state + bytes_[0]]
            for i in range(1, n):
                if table_[256 * state + bytes_[i]] != nxt:
                    steps, how = step, RUN_BROKEN
                    break
            if how == RUN_BROKEN:
                break
            if nxt < 0:
                steps, how = step, RUN_DEAD
                break
            state = nxt
    return steps, state, how


def walk_table(table, expanded, loops, edge_start, edge_byte, edge_child, token_start, token_ids, subtree_end, below,
               start_nodes, start_states, words):
    """`walk` over a DFA whose rows are built from Python (`dfa.LazyDFA`): returns how
    many tokens it allowed in `words`, and the (node, state) pairs left (see `walk`),
    whose rows the caller builds before it walks on from them."""
    cdef Rows r
    r.table = <int32_t*>buffer_of(table, 4, False)
    r.expanded = <uint8_t*>buffer_of(expanded, 1, False)
    r.loops = <uint64_t*>buffer_of(loops, 8, False)
    r.accepting = NULL
    cdef Trie t = trie_of(edge_start, edge_byte, edge_child, token_start, token_ids, subtree_end, below)
    cdef Pairs start = pairs_of(start_nodes, start_states)
    cdef uint32_t* words_ = <uint32_t*>buffer_of(words, 4, True)
    cdef Pairs left
    cdef int64_t allowed = 0
    cdef int failed
    with nogil:
        failed = walk(&t, &r, &start, words_, &left, &allowed)
    if failed:
        raise MemoryError()
    left_nodes = np.empty(left.n, dtype=np.int64)
    left_states = np.empty(left.n, dtype=np.int64)
    if left.n:
        memcpy(buffer_of(left_nodes, 8, True), left.nodes, left.n * 8)
        memcpy(buffer_of(left_states, 8, True), left.states, left.n * 8)
    free(left.nodes)
    return allowed, left_nodes, left_states


# ------------------------------------------------------------ masks over a flat automaton

cdef int64_t plain_one(const IR* g, Store* st, Rows* r, const Trie* t, int64_t body, const uint32_t* eos_words,
                       int64_t n_words, const int64_t* g_counted, const int64_t* node_twin, int64_t longest,
                       int64_t shorter, int64_t sid, uint32_t* words, uint64_t* free_out, int64_t* aux,
                       int64_t max_items, int64_t max_nesting) noexcept nogil:
    """A plain state's mask in `words` (zeros on entry) -- no loop, no free bytes, few
    live bytes (so no near state and no counted run): its row, then the walk of the
    whole trie from it. Returns the allowed count, with its free bytes in `free_out` and
    DEAD in `aux`; for a state that is not plain, NOT_PLAIN_FREE (its free bytes in
    `free_out`) where it has free bytes beyond its loops, else NOT_PLAIN_WIDE where it
    may be near a state or start a counted run, else NOT_PLAIN_LOOP. Before all that, a
    state inside the JSON string body `body` (>= 0 where the grammar has one) is told
    apart, without its row: NOT_PLAIN_BODY, `aux` the state after the string's closing
    quote; and first, where `longest` > 0, a state with a twin: NOT_PLAIN_TWIN, `aux`
    the twin, where its count cannot bind within `longest` bytes (any token), and
    NOT_PLAIN_SHORT_TWIN where it cannot within `shorter` bytes only (0 < shorter <=
    longest). NOT_PLAIN_FAILED where the store was full (see flat.FlatDFA.run)."""
    cdef int64_t twin, closed, target, count, live, allowed
    cdef Pairs start
    cdef int64_t root = 0
    memset(free_out, 0, 4 * 8)
    aux[0] = DEAD
    if longest > 0:
        # the longest bound first: most counted states are far from binding and are
        # checked once (a twin within it is one within `shorter` too)
        twin = twin_of(g, st, r, g_counted, node_twin, sid, longest)
        if st.meta[M_FAILED]:
            return NOT_PLAIN_FAILED
        if twin >= 0:
            aux[0] = twin
            return NOT_PLAIN_TWIN
        if shorter > 0:
            twin = twin_of(g, st, r, g_counted, node_twin, sid, shorter)
            if st.meta[M_FAILED]:
                return NOT_PLAIN_FAILED
            if twin >= 0:
                aux[0] = twin
                return NOT_PLAIN_SHORT_TWIN
    if body >= 0:
        closed = body_exit(g, st, r, sid, body, max_items, max_nesting)
        if st.meta[M_FAILED]:
            return NOT_PLAIN_FAILED
        if closed >= 0:  # its loops, for the matcher's walks of its tokens (no row)
            known_loops(g, st, r, sid, max_items, max_nesting)
            if st.meta[M_FAILED]:
                return NOT_PLAIN_FAILED
            aux[0] = closed
            return NOT_PLAIN_BODY
    if not r.expanded[sid]:
        expand_rows(g, st, r, &sid, 1, max_items, max_nesting)
        if st.meta[M_FAILED]:
            return NOT_PLAIN_FAILED
    if free_bits(g, st, r, sid, free_out):
        return NOT_PLAIN_FREE
    dominant(r.table + 256 * sid, &target, &count, &live)  # as `tokens.dominant_target`
    if live > 2 * NEAR_MAX_BYTES and target != sid:
        return NOT_PLAIN_WIDE
    if r.loops[4 * sid] | r.loops[4 * sid + 1] | r.loops[4 * sid + 2] | r.loops[4 * sid + 3]:
        return NOT_PLAIN_LOOP
    start.nodes, start.states, start.n = &root, &sid, 1
    allowed = walk_rows(g, st, r, t, &start, words, max_items, max_nesting)
    if r.accepting[sid]:
        allowed += with_eos(words, eos_words, n_words)
    return allowed


def walk_building(tuple ir_arrays, list store, table, expanded, loops, accepting, edge_start, edge_byte, edge_child,
                  token_start, token_ids, subtree_end, below, nodes, states, words, int64_t max_items,
                  int64_t max_nesting):
    """`walk_rows` from Python (FlatTokens.walk_trie): how many tokens it allowed."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(table, expanded, loops, accepting)
    cdef Trie t = trie_of(edge_start, edge_byte, edge_child, token_start, token_ids, subtree_end, below)
    cdef Pairs start = pairs_of(nodes, states)
    cdef uint32_t* words_ = <uint32_t*>buffer_of(words, 4, True)
    cdef int64_t allowed
    with nogil:
        allowed = walk_rows(&g, &st, &r, &t, &start, words_, max_items, max_nesting)
    return allowed


def plain_tokens(tuple ir_arrays, list store, table, expanded, loops, accepting, edge_start, edge_byte, edge_child,
                 token_start, token_ids, subtree_end, below, int64_t body, eos_words, g_counted, node_twin,
                 int64_t longest, int64_t shorter, int64_t sid, int64_t max_items, int64_t max_nesting):
    """`state_tokens` in one call for a plain state (see `plain_one`). Returns (allowed
    count, mask words, free bytes, aux); for a state that is not plain, (NOT_PLAIN_...,
    no words, its free bytes or none, the state after its string or its twin or DEAD)."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(table, expanded, loops, accepting)
    cdef Trie t = trie_of(edge_start, edge_byte, edge_child, token_start, token_ids, subtree_end, below)
    cdef const uint32_t* eos = <const uint32_t*>buffer_of(eos_words, 4, False)
    cdef const int64_t* counted = <const int64_t*>buffer_of(g_counted, 8, False)
    cdef const int64_t* twins = <const int64_t*>buffer_of(node_twin, 8, False)
    cdef int64_t n_words = len(eos_words), allowed, aux
    words_array = np.zeros(n_words, dtype=np.uint32)
    free_array = np.zeros(4, dtype=np.uint64)
    cdef uint32_t* words = <uint32_t*>buffer_of(words_array, 4, True)
    cdef uint64_t* free_ = <uint64_t*>buffer_of(free_array, 8, True)
    with nogil:
        allowed = plain_one(&g, &st, &r, &t, body, eos, n_words, counted, twins, longest, shorter, sid, words, free_,
                            &aux, max_items, max_nesting)
    return allowed, words_array if allowed >= 0 else words_array[:0], free_array, aux


def plain_tokens_many(tuple ir_arrays, list store, table, expanded, loops, accepting, edge_start, edge_byte,
                      edge_child, token_start, token_ids, subtree_end, below, int64_t body, eos_words, g_counted,
                      node_twin, int64_t longest, int64_t shorter, sids, allowed, words, free, aux, done,
                      int64_t max_items, int64_t max_nesting):
    """`plain_tokens` for many states in one call (FlatTokens.plain_tables): for each k from
    done[0] on, allowed[k], words[k], free[k] and aux[k] as `plain_tokens` returns them
    (allowed[k] < 0: not plain, words[k] unused). done[0] counts the states finished,
    so that a call run again after its arrays were grown goes on from the one that
    failed."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(table, expanded, loops, accepting)
    cdef Trie t = trie_of(edge_start, edge_byte, edge_child, token_start, token_ids, subtree_end, below)
    cdef const uint32_t* eos = <const uint32_t*>buffer_of(eos_words, 4, False)
    cdef const int64_t* counted = <const int64_t*>buffer_of(g_counted, 8, False)
    cdef const int64_t* twins = <const int64_t*>buffer_of(node_twin, 8, False)
    cdef const int64_t* sids_ = <const int64_t*>buffer_of(sids, 8, False)
    cdef int64_t* allowed_ = <int64_t*>buffer_of(allowed, 8, True)
    cdef uint32_t* words_ = <uint32_t*>buffer_of(words, 4, True)
    cdef uint64_t* free_ = <uint64_t*>buffer_of(free, 8, True)
    cdef int64_t* aux_ = <int64_t*>buffer_of(aux, 8, True)
    cdef int64_t* done_ = <int64_t*>buffer_of(done, 8, True)
    cdef int64_t n = len(sids), n_words = len(eos_words), k, count, its_aux
    cdef uint64_t its_free[4]
    if len(allowed) < n or len(free) < n or len(aux) < n or words.shape[0] < n or words.shape[1] != n_words:
        raise ValueError("an output row per state")
    with nogil:
        for k in range(done_[0], n):
            memset(words_ + k * n_words, 0, n_words * 4)
            count = plain_one(&g, &st, &r, &t, body, eos, n_words, counted, twins, longest, shorter, sids_[k],
                              words_ + k * n_words, its_free, &its_aux, max_items, max_nesting)
            if st.meta[M_FAILED]:
                break
            allowed_[k] = count
            memcpy(free_ + 4 * k, its_free, sizeof(its_free))
            aux_[k] = its_aux
            done_[0] = k + 1


def sliced_tokens(tuple ir_arrays, list store, table, expanded, loops, accepting, edge_start, edge_byte, edge_child,
                  token_start, token_ids, subtree_end, below, slice_words, int64_t slice_count, eos_words,
                  bint stepping, int64_t sid, int64_t max_items, int64_t max_nesting):
    """`state_tokens` in one call for a state whose row is built and whose slice
    (`LoopSlice`: its loop set's, or its free bytes') is known: the slice's tokens,
    then the walk of the trie given -- the slice's other tokens -- from the state.
    With `stepping`, the walk is `walk_stepping`, which builds no row (a state whose
    twin gives its short tokens, with a trie of the few long ones). Returns (allowed
    count, mask words)."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(table, expanded, loops, accepting)
    cdef Trie t = trie_of(edge_start, edge_byte, edge_child, token_start, token_ids, subtree_end, below)
    cdef const uint32_t* eos = <const uint32_t*>buffer_of(eos_words, 4, False)
    cdef int64_t n_words = len(eos_words), allowed, root = 0
    words_array = np.array(slice_words, dtype=np.uint32, copy=True)
    if len(words_array) != n_words:
        raise ValueError("the slice's mask has the vocabulary's words")
    cdef uint32_t* words = <uint32_t*>buffer_of(words_array, 4, True)
    cdef Pairs start
    start.nodes, start.states, start.n = &root, &sid, 1
    with nogil:
        if stepping:
            allowed = slice_count + walk_stepping(&g, &st, &r, &t, sid, words, max_items, max_nesting)
        else:
            allowed = slice_count + walk_rows(&g, &st, &r, &t, &start, words, max_items, max_nesting)
        if r.accepting[sid]:
            allowed += with_eos(words, eos, n_words)
    return allowed, words_array


def sliced_tokens_many(tuple ir_arrays, list store, table, expanded, loops, accepting, list tries, list slice_words,
                       slice_counts, eos_words, kinds, sids, eos_flags, allowed, words, done, int64_t max_items,
                       int64_t max_nesting):
    """`sliced_tokens` for many states in one call (FlatTokens.sliced_tables). State k
    walks the trie `tries[kinds[k]]` (a tuple of a TokenTrie's arrays, as `sliced_tokens`
    takes them) from `sids[k]`, its mask starting from `slice_words[kinds[k]]`
    (`slice_counts[kinds[k]]` tokens), EOS added where `eos_flags[k]` and the state is
    accepting: allowed[k] and words[k] for each k from done[0] on (done[0]: as in
    `plain_tokens_many`)."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(table, expanded, loops, accepting)
    cdef int64_t n_kinds = len(tries), n = len(sids), n_words = len(eos_words), kind, k
    if len(slice_words) != n_kinds or len(slice_counts) != n_kinds:
        raise ValueError("a slice per trie")
    if len(kinds) != n or len(eos_flags) != n or len(allowed) < n or words.shape[0] < n or words.shape[1] != n_words:
        raise ValueError("an output row per state")
    cdef const int64_t* counts = <const int64_t*>buffer_of(slice_counts, 8, False)
    cdef const uint32_t* eos = <const uint32_t*>buffer_of(eos_words, 4, False)
    cdef const int64_t* kinds_ = <const int64_t*>buffer_of(kinds, 8, False)
    cdef const int64_t* sids_ = <const int64_t*>buffer_of(sids, 8, False)
    cdef const uint8_t* flags = <const uint8_t*>buffer_of(eos_flags, 1, False)
    cdef int64_t* allowed_ = <int64_t*>buffer_of(allowed, 8, True)
    cdef uint32_t* words_ = <uint32_t*>buffer_of(words, 4, True)
    cdef int64_t* done_ = <int64_t*>buffer_of(done, 8, True)
    for k in range(n):
        if kinds_[k] < 0 or kinds_[k] >= n_kinds:
            raise IndexError("a state's trie out of bounds")
    cdef Trie* t = <Trie*>malloc((n_kinds + 1) * sizeof(Trie))
    cdef const uint32_t** base = <const uint32_t**>malloc((n_kinds + 1) * sizeof(uint32_t*))
    if t == NULL or base == NULL:
        free(t)
        free(base)
        raise MemoryError()
    try:
        for kind in range(n_kinds):
            arrays = tries[kind]
            t[kind] = trie_of(arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], arrays[5], arrays[6])
            if len(slice_words[kind]) != n_words:
                raise ValueError("the slice's mask has the vocabulary's words")
            base[kind] = <const uint32_t*>buffer_of(slice_words[kind], 4, False)
        with nogil:
            sliced_many(&g, &st, &r, t, base, counts, eos, n_words, kinds_, sids_, flags, allowed_, words_, done_, n,
                        max_items, max_nesting)
    finally:
        free(t)
        free(base)


cdef void sliced_many(const IR* g, Store* st, Rows* r, const Trie* t, const uint32_t** base, const int64_t* counts,
                      const uint32_t* eos, int64_t n_words, const int64_t* kinds, const int64_t* sids,
                      const uint8_t* eos_flags, int64_t* allowed, uint32_t* words, int64_t* done, int64_t n,
                      int64_t max_items, int64_t max_nesting) noexcept nogil:
    """The loop of `sliced_tokens_many`."""
    cdef int64_t k, kind, root = 0, sid, count
    cdef uint32_t* row
    cdef Pairs start
    for k in range(done[0], n):
        kind, sid, row = kinds[k], sids[k], words + k * n_words
        memcpy(row, base[kind], n_words * 4)
        start.nodes, start.states, start.n = &root, &sid, 1
        count = counts[kind] + walk_rows(g, st, r, &t[kind], &start, row, max_items, max_nesting)
        if st.meta[M_FAILED]:
            break
        if eos_flags[k] and r.accepting[sid]:
            count += with_eos(row, eos, n_words)
        allowed[k] = count
        done[0] = k + 1
