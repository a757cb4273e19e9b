"""Attention kernels: one signature (`attention_torch.AttentionMetadata`), two backends.

`attention_torch` is the CPU implementation and the oracle the tests hold the Triton
kernels (`attention_triton`) to. Nothing here knows about requests or the scheduler.
"""
