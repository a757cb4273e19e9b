"""Kernels: one signature (`attention_torch.AttentionMetadata`), two backends.

A backend module is everything a decoder layer runs besides its matmuls: paged
attention and the KV-cache write, plus the element-wise ops (RMSNorm with the residual
add, RoPE, SiLU-and-multiply) that it re-exports from `elementwise_torch` or
`elementwise_triton`. `attention_torch` is the CPU implementation and the oracle the
tests hold the Triton kernels (`attention_triton`) to. Nothing here knows about
requests or the scheduler.
"""
