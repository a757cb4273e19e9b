# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The count behind `ir.expanded_size`, in compiled code: every compile counts every
node its IR reaches, and in Python the walk took a tenth of a median compile.

Owns the walk and the two passes of that count; ir.py says what is counted and owns the
rare kinds' positions and children (`own_positions`, `expanded_children` are handed in).
Reads IR objects only: must not build or change any, nor know automata or tokens.
"""

from cpython.long cimport PyLong_FromVoidPtr
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from structgen.grammar import ir

cdef object Bytes = ir.Bytes, ByteSet = ir.ByteSet, Concat = ir.Concat, Alt = ir.Alt, Repeat = ir.Repeat
cdef object Ref = ir.Ref
cdef int64_t MOST = (<int64_t>1) << 62  # counts saturate here: no automaton is that large
cdef object MOST_INT = 1 << 62  # (the same, as a Python int)
cdef tuple NO_CHILDREN = ()


cdef inline int64_t times(int64_t a, int64_t b) noexcept:
    """a * b, saturating at MOST (both >= 0)."""
    if a == 0 or b == 0:
        return 0
    if a > MOST // b:
        return MOST
    return a * b


def count_expanded(node, limit, dict lexemes, own_positions, expanded_children):
    """`ir.expanded_size`'s count of `node` (counts past 2^62 are 2^62): its positions,
    or a value past `limit` (None: no limit) as soon as the count passes it."""
    cdef dict index = {}  # id() of each node met -> its number, in the order met
    cdef list children_of = []  # per number: the children the count goes down to
    cdef list own = [], repeats = []  # per number (Python ints until the second pass)
    cdef list post = []  # numbers in post-order: a node's after all its children's
    cdef list roots = [node]
    cdef list stack = [node]
    cdef Py_ssize_t number
    while stack:  # iteratively: IR trees nest deep
        n = stack.pop()
        cls = type(n)
        if cls is int:  # the number of a node whose children are all done
            post.append(n)
            continue
        key = PyLong_FromVoidPtr(<void*>n)
        if key in index:
            continue
        number = len(own)
        index[key] = number
        kids, mine, repeat = NO_CHILDREN, 1, 1
        if cls is Concat or cls is Alt:
            if lexemes.get(key) is not n:
                kids = n.items
        elif cls is Bytes:
            mine = len(n.data)
        elif cls is Repeat:
            kids = (n.item,)
            high = n.max if n.max is not None else n.min
            repeat = high if high > 1 else 1
        elif cls is Ref:
            roots.append(n.target)
            stack.append(n.target)
        elif cls is not ByteSet:
            kids = expanded_children(n, cls)
            mine = own_positions(n, cls)
        children_of.append(kids)
        own.append(mine if mine < MOST_INT else MOST_INT)
        repeats.append(repeat if repeat < MOST_INT else MOST_INT)
        if kids:
            stack.append(number)
            stack.extend(kids)
        else:
            post.append(number)
    return second_pass(index, children_of, own, repeats, post, roots, limit)


cdef object second_pass(dict index, list children_of, list own, list repeats, list post, list roots, limit):
    """Each node's copies (the most along any path from a root), and the total."""
    cdef Py_ssize_t count = len(own), i, number, child
    cdef int64_t total = 0, mine, most = MOST if limit is None or limit >= MOST_INT else limit
    cdef int64_t* copies = <int64_t*>malloc(max(count, 1) * sizeof(int64_t))
    if copies == NULL:
        raise MemoryError("out of memory while counting a grammar's positions")
    try:
        for i in range(count):
            copies[i] = 0
        for root in roots:
            copies[<Py_ssize_t>index[PyLong_FromVoidPtr(<void*>root)]] = 1
        for i in range(len(post) - 1, -1, -1):
            number = post[i]
            mine = copies[number]
            total = total + times(<int64_t>own[number], mine)
            if total > MOST:
                total = MOST
            if total > most:
                return total
            mine = times(mine, <int64_t>repeats[number])
            for kid in children_of[number]:
                child = index[PyLong_FromVoidPtr(<void*>kid)]
                if copies[child] < mine:
                    copies[child] = mine
        return total
    finally:
        free(copies)
