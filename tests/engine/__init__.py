"""Tests of structgen.engine: scheduling, KV blocks, kernels, sampling, whole-engine runs on tiny checkpoints."""
