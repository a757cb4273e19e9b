"""The engines CFGBench runs (`CFG_ENGINES`): structgen, llguidance and xgrammar, each
compiling a spec `{"kind": "json_schema" | "lark" | "gbnf" | "builtin_json", ...}` with
its library's defaults; everything else is MaskBench's adapter (benchmarks/masks/engines.py,
benchmarks/peers.py).

Must not time anything: the worker's loop (benchmarks/walk.py) does.
"""

from __future__ import annotations

import json

from benchmarks.masks.engines import StructgenAdapter
from benchmarks.peers import LLGuidanceAdapter, XGrammarAdapter


class SGCfg(StructgenAdapter):
    """structgen: compile_json_schema(schema, vocab) (default whitespace) or
    compile_grammar(text, vocab, syntax=...)."""

    @classmethod
    def settings(cls):
        return {"json_schema": "compile_json_schema(schema, vocab) (whitespace='default')",
                "grammar": "compile_grammar(text, vocab, syntax='lark'|'gbnf') (default limits)",
                "cache": "structgen.clear_cache() before each compile"}

    def compile(self, spec):
        if "kind" not in spec:  # a bare schema (maskbench's probe)
            spec = {"kind": "json_schema", "schema": spec}
        k = spec["kind"]
        if k == "json_schema":
            return self.sg.compile_json_schema(spec["schema"], self.vocab)
        if k in ("lark", "gbnf"):
            kw = {"max_states": spec["max_states"]} if "max_states" in spec else {}
            return self.sg.compile_grammar(spec["text"], self.vocab, syntax=k, **kw)
        raise ValueError(f"structgen: no {k!r}")


class LLGCfg(LLGuidanceAdapter):
    @classmethod
    def settings(cls):
        return {"json_schema": "LLMatcher.grammar_from_json_schema(schema) (default options)",
                "grammar": "LLMatcher.grammar_from_lark(text)", "limits": "default",
                "matcher": "deep_copy() of the compiled LLMatcher per instance"}

    def compile(self, spec):
        LLMatcher = self.llg.LLMatcher
        k = spec["kind"]
        if k == "json_schema":
            g = LLMatcher.grammar_from_json_schema(spec["schema"])
        elif k == "lark":
            g = LLMatcher.grammar_from_lark(spec["text"])
        else:
            raise ValueError(f"llguidance: no {k!r}")
        return self.matcher_of(g)


class XGRCfg(XGrammarAdapter):
    @classmethod
    def settings(cls):
        return {"json_schema": "compile_json_schema(json.dumps(schema), **options) (section 2: defaults "
                               "any_whitespace=True, strict_mode=True)",
                "builtin_json": "compile_builtin_json_grammar()",
                "grammar": "compile_grammar(gbnf twin text) (xgrammar EBNF, root rule `root`)",
                "GrammarCompiler": "max_threads=8 (default), cache_enabled=False (cold compiles)"}

    def compile(self, spec):
        k = spec["kind"]
        if k == "json_schema":
            return self.compiler.compile_json_schema(json.dumps(spec["schema"]), **spec.get("options", {}))
        if k == "builtin_json":
            return self.compiler.compile_builtin_json_grammar()
        if k == "gbnf":
            return self.compiler.compile_grammar(spec["text"])
        raise ValueError(f"xgrammar: no {k!r}")


CFG_ENGINES = {"structgen": SGCfg, "llguidance": LLGCfg, "xgrammar": XGRCfg}
