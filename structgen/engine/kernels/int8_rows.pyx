# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled int8 block matmul (int8_rows.h): float32 activations times int8
weights in blocks of 32 with a float32 scale each, into float32. Owns only the call
into C, with the GIL released; the caller checks the shapes."""

from libc.stdint cimport int8_t, int64_t

cdef extern from "int8_rows.h":
    void int8_rows(const int8_t *q, const float *scale, const float *x, float *out, int64_t begin,
                   int64_t end, int64_t k, int64_t n, int64_t ldo, int portable) nogil


def matmul_rows(const int8_t[:, ::1] q, const float[:, ::1] scale, const float[:, ::1] x, float[:, ::1] out,
                int64_t begin, int64_t end, bint portable=False):
    """out[:, begin:end] = x @ (q * scale, per block of 32)[begin:end].T"""
    with nogil:
        int8_rows(&q[0, 0], &scale[0, 0], &x[0, 0], &out[0, 0], begin, end, q.shape[1], x.shape[0],
                  out.shape[1], portable)
