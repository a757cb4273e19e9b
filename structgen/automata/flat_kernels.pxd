# The C-level interface of flat_kernels.pyx, for the token walk (token_kernels.pyx),
# which builds rows from compiled code. Layouts: see flat.py (FlatIR, the store).

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

cimport numpy as cnp


# The layout constants (flat.py's; tests/automata/test_flat.py checks they are equal).
cdef enum:
    K_BYTES = 0
    K_BYTESET = 1
    K_CONCAT = 2
    K_ALT = 3
    K_REPEAT = 4
    K_GRAPH = 5
    K_REF = 6
    K_MEMBERS = 7
    F_C = 1
    F_L = 2
    F_R = 3
    F_G = 4
    F_M = 5
    F_W = 6
    OP_ENTER = 0
    OP_RESUME = 1
    OP_GRAPH = 2
    OP_MEMBERS = 3
    R_CLOSE_NONE = 0
    R_CLOSE_SOME = 1
    R_EXTRA_FIRST = 2
    R_EXTRA_LATER = 3
    R_MIN = 4
    R_MAX = 5
    R_WORDS = 6
    R_REQUIRED = 7
    MASK_BITS = 62
    DONE = 0
    ACCEPT = 0
    DEAD = -1
    G_TWIN_NODE = 0
    G_TWIN_STATE = 1
    G_ZONE_TOP = 2
    G_COUNTED_FIELDS = 3
    UNBOUNDED = -1
    NO_ROOM = -2
    M_FRAMES = 0
    M_ITEMS = 1
    M_SETS = 2
    M_SET_ITEMS = 3
    M_STATES = 4
    M_HASHED = 5
    M_FAILED = 6
    M_DRAINED = 7
    GROW_HASH = 6
    GROW_SETS = 3
    GROW_SET_ITEMS = 4
    GROW_STATES = 5
    FAILED_AMBIGUOUS = 7
    FAILED_NESTING = 8
    FAILED_MEMORY = 9
    T_FRAME = 0
    T_ITEM = 1
    T_CLOSURE = 2
    T_SINGLE = 3
    T_STATE_OF_SET = 4
    T_STATE_HASH = 5
    FRAME_COLS = 5
    ITEM_COLS = 6
    SLOT_COLS = 6
    FRAME_RESUMED = 4
    ITEM_TARGET = 4
    ITEM_TARGET_STATE = 5
    HASH_VALUE = 5
    QUOTE = 0x22
    BODY_FRAME_DEPTH = 4


cdef struct IR:
    # FlatIR.arrays, in that order; numpy bools are bytes, bitsets 4 words a row
    const int64_t* kind
    const int64_t* a
    const int64_t* b
    const int64_t* c
    const int64_t* kids
    const uint8_t* data
    const uint64_t* bitsets
    const uint8_t* nonempty
    const uint8_t* g_final
    const int64_t* g_edge_start
    const int64_t* g_dst
    const int64_t* g_label
    const uint8_t* g_live
    const int64_t* g_free
    const int64_t* g_room


cdef struct Store:
    # the store (flat._new_store): frames 5 columns a row, items 6, hash slots 6, and
    # the smaller table being drained into `slots` (none: 0 rows)
    int64_t* meta
    int64_t* frames
    int64_t* items
    int64_t* set_start
    int64_t* set_pool
    int64_t* state_set
    int64_t* state_next
    int64_t* slots
    int64_t* old_slots
    int64_t n_frames
    int64_t n_items
    int64_t n_set_start
    int64_t n_set_pool
    int64_t n_state_set
    int64_t n_slots
    int64_t n_old_slots


cdef struct Rows:
    # the per-state arrays of a TableDFA: rows of 256 int32, loops 4 words a row;
    # NULL where an entry is not given them (it reads `accepting` only)
    int32_t* table
    uint8_t* expanded
    uint64_t* loops
    uint8_t* accepting
    int64_t n_states


cdef inline void* buffer_of(object array, Py_ssize_t itemsize, bint write) except? NULL:
    """The data of a C-contiguous numpy array of items of `itemsize` bytes (writable
    where `write`): what the kernels index with raw pointers."""
    if not cnp.PyArray_Check(array):
        raise TypeError(f"a kernel takes numpy arrays, not {type(array).__name__}")
    cdef cnp.ndarray arr = <cnp.ndarray>array
    if not cnp.PyArray_IS_C_CONTIGUOUS(arr) or cnp.PyArray_ITEMSIZE(arr) != itemsize:
        raise ValueError(f"a kernel takes C-contiguous arrays of {itemsize}-byte items, not {array.dtype} "
                         f"of strides {array.strides}")
    if write and not cnp.PyArray_ISWRITEABLE(arr):
        raise ValueError("a kernel writes an array that is read-only")
    return cnp.PyArray_DATA(arr)


cdef IR ir_of(tuple arrays) except *
cdef Store store_of(list store) except *
cdef Rows rows_of(object table, object expanded, object loops, object accepting) except *

cdef void expand_rows(const IR* g, Store* st, Rows* r, const int64_t* sids, int64_t n, int64_t max_items,
                      int64_t max_nesting) noexcept nogil
cdef int64_t twin_of(const IR* g, Store* st, Rows* r, const int64_t* g_counted, const int64_t* node_twin,
                     int64_t sid, int64_t longest) noexcept nogil
cdef int64_t step(const IR* g, Store* st, Rows* r, int64_t sid, int64_t byte, int64_t max_items,
                  int64_t max_nesting) noexcept nogil
cdef int64_t body_exit(const IR* g, Store* st, Rows* r, int64_t sid, int64_t body, int64_t max_items,
                       int64_t max_nesting) noexcept nogil
cdef void known_loops(const IR* g, Store* st, Rows* r, int64_t sid, int64_t max_items,
                      int64_t max_nesting) noexcept nogil
cdef bint free_bits(const IR* g, const Store* st, const Rows* r, int64_t sid, uint64_t* free) noexcept nogil
cdef void sort_items(int64_t* items, int64_t n) noexcept nogil
cdef int64_t sorted_unique(int64_t* items, int64_t size) noexcept nogil
