"""Tests of benchmarks/: `structgen bench` and the load generator, shortened."""
