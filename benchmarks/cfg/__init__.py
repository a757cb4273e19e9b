"""CFGBench's parts; benchmarks/cfgbench.py is the run (options, sections in turn, the
results file) and can still be run as a script. It shares MaskBench's parts
(benchmarks/masks/): the tokenizer, the provenance, the worker process, the percentiles
and the number format.

One concept per module (each module's docstring says what it owns):
  adapters        the engines, compiling JSON Schema, lark and GBNF specs
  worker          the worker process, with repeated cold compiles and a walk budget
  harness         the workers of a run, warmed up, and a task's timeouts
  outcomes        a walk's counts, failures and time summaries
  json_object     section 1: any JSON object
  recursive       section 2: schemas with recursive rules
  sentence_pools  built-in sentences for the grammars
  sentences       the sentences of one grammar, labelled by lark
  grammars        section 3: grammars/*.lark and their .gbnf twins
"""
