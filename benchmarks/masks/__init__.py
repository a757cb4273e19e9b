"""MaskBench's parts; benchmarks/maskbench.py is the run (options, inputs, tasks, the
results file) and can still be run as a script. CFGBench (benchmarks/cfgbench.py) shares
the tokenizer, the provenance, the worker process, the percentiles and the number format.

One concept per module (each module's docstring says what it owns):
  engines      the engines by name: structgen's adapter in four settings, and the peers'
  tokenizer    the SmolLM2 tokenizer every engine shares
  provenance   the checkout, structgen's source hash, the machine
  worker       the worker processes that run one engine each, and their restarts
  percentiles  summaries of timing samples, and the per-token histogram
  aggregate    the results file's figures from the workers' results
  printing     the markdown summary on stdout
"""
