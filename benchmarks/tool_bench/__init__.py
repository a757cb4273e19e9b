"""The tools suite's parts; benchmarks/tools.py is the run (options, engines' setup, the
results file) and can still be run as a script.

One concept per module (each module's docstring says what it owns):
  functions  the functions of MaskBench-dev's Glaive and BFCL records, seeded tool sets,
             the text of one valid call
  engines    what structgen (the server's grammar), xgrammar and llguidance compile
  measure    cold compiles to the first mask, the valid call's walk, the one-replaced reuse
  printing   the markdown summary on stdout
"""
