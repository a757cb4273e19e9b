# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The engine's compiled CPU kernels, C in the headers beside this file:
- int8_rows.h: float32 activations times int8 weights in blocks of 32 with a float32
  scale each, into float32 (`matmul_rows`);
- rms_norm_rows.h: RMSNorm of float32 rows, with the residual add before it (`rms_norm`).
Owns only the calls into C, with the GIL released. Arrays are passed as addresses: the
callers (int8_matmul.py, norm_cpu.py) check dtype, device, shape and contiguity first."""

from libc.stdint cimport int8_t, int64_t, uintptr_t

cdef extern from "int8_rows.h":
    void int8_rows(const int8_t *q, const float *scale, const float *x, float *out, int64_t begin,
                   int64_t end, int64_t k, int64_t n, int64_t ldo, int portable) nogil

cdef extern from "rms_norm_rows.h":
    void rms_norm_rows(const float *x, const float *delta, float *total, const float *weight, float *out,
                       int64_t n, int64_t k, double eps) nogil


def matmul_rows(uintptr_t q, uintptr_t scale, uintptr_t x, uintptr_t out, int64_t rows, int64_t k, int64_t n,
                bint portable=False):
    """out [n, rows] = x [n, k] @ (q [rows, k] * scale [rows, k / 32], per block of 32).T"""
    with nogil:
        int8_rows(<const int8_t *>q, <const float *>scale, <const float *>x, <float *>out, 0, rows, k, n, rows,
                  portable)


def rms_norm(uintptr_t x, uintptr_t delta, uintptr_t total, uintptr_t weight, uintptr_t out, int64_t n, int64_t k,
             double eps):
    """out = rms_norm(x (+ delta, written to total)) * weight, n rows of k; delta 0: no add."""
    with nogil:
        rms_norm_rows(<const float *>x, <const float *>delta, <float *>total, <const float *>weight, <float *>out,
                      n, k, eps)
