"""Engine adapters for benchmarks/maskbench.py: one small class per grammar engine.

Every adapter drives its library the way that library's documentation recommends,
with the library's default settings, on a Hugging Face tokenizer shared by all engines.

Adapter protocol (all methods but `prepare` are called inside a maskbench worker process):

    a = Adapter(tokenizer)          # per-process setup (tokenizer conversion), not timed
    st = Adapter.prepare(tokenizer) # optional, in the parent: a picklable setup state, so that
    a = Adapter.from_state(st)      #   a restarted worker need not import transformers
    c = a.compile(schema_dict)      # timed (TTFM); raise on refusal/error
    m = a.matcher(c)                # fresh matcher for one instance (the first one: TTFM)
    a.fill(m)                       # fill the next-token mask into a.mask_words (timed, TBM)
    a.allowed(tok)                  # bit `tok` of the mask just filled
    a.advance(m, tok) -> bool       # matcher accepts the token (timed, TBM)
    a.accepting(m) -> bool          # the grammar is complete here (EOS may end it)

`a.mask_words` is a 1-D numpy int32 view of the bitmask (bit set = token allowed),
`a.eos_ids` the end-of-sequence ids. An engine whose library is not installed is
reported by `available()` and skipped by the benchmark.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from typing import Any


def pkg_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _bit(words, tok: int) -> bool:
    return (int(words[tok >> 5]) >> (tok & 31)) & 1 == 1


def token_bytes_table(tokenizer) -> dict[int, bytes]:
    """Exact bytes of every normal token id (special tokens left out), from structgen's
    Vocabulary: the same table for every engine, so no peer is fed a different vocabulary."""
    from structgen.vocab import Vocabulary

    vocab = Vocabulary.from_tokenizer(tokenizer)
    return {
        tid: data
        for tid, data in enumerate(vocab.token_bytes)
        if data and tid not in vocab.special_ids and tid not in vocab.eos_token_ids
    }


class Adapter:
    name = "?"
    dist = "?"  # distribution name, for the version
    module = "?"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if importlib.util.find_spec(cls.module) is None:
            return False, f"{cls.dist} not installed"
        return True, ""

    @classmethod
    def version(cls) -> str | None:
        return pkg_version(cls.dist)

    @classmethod
    def settings(cls) -> dict[str, Any]:
        return {}

    @classmethod
    def prepare(cls, tokenizer) -> Any:
        """Picklable setup state computed once in the parent, or None: the worker then loads
        the Hugging Face tokenizer itself and calls `cls(tokenizer)`."""
        return None

    @classmethod
    def from_state(cls, state) -> "Adapter":
        self = cls.__new__(cls)
        self._setup(state)
        return self

    def __init__(self, tokenizer):
        self._setup(self.prepare(tokenizer))

    def _setup(self, state) -> None:
        raise NotImplementedError

    def allowed(self, tok: int) -> bool:
        return _bit(self.mask_words, tok)


class LLGuidanceAdapter(Adapter):
    """llguidance: LLMatcher over an LLTokenizer built with llguidance.hf.from_tokenizer."""

    name = "llguidance"
    dist = "llguidance"
    module = "llguidance"

    @classmethod
    def settings(cls):
        return {"grammar": "LLMatcher.grammar_from_json_schema(schema) (default JSON options)",
                "limits": "default", "slices": "default"}

    def __init__(self, tokenizer):
        import llguidance
        import llguidance.hf
        import llguidance.numpy as lln

        self.llg = llguidance
        self.lln = lln
        self.tok = llguidance.hf.from_tokenizer(tokenizer)
        self.vocab_size = self.tok.vocab_size
        self.bitmask = lln.allocate_token_bitmask(1, self.vocab_size)
        self.mask_words = self.bitmask[0]
        self.eos_ids = [tokenizer.eos_token_id]

    def compile(self, schema):
        return self.matcher_of(self.llg.LLMatcher.grammar_from_json_schema(schema))

    def matcher_of(self, grammar: str):
        """An LLMatcher of `grammar` (from LLMatcher.grammar_from_*); raises on its error."""
        m = self.llg.LLMatcher(self.tok, grammar)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def matcher(self, compiled):
        # the compiled LLMatcher is kept in its initial state; each instance gets a copy
        return compiled.deep_copy()

    def fill(self, m):
        self.lln.fill_next_token_bitmask(m, self.bitmask, 0)

    def advance(self, m, tok):
        return m.consume_token(tok)

    def accepting(self, m):
        return m.is_accepting()

    def error(self, m):
        return m.get_error() if m.is_error() else ""


class XGrammarAdapter(Adapter):
    """xgrammar: GrammarCompiler.compile_json_schema with its defaults (any_whitespace=True,
    strict_mode=True), compiler cache disabled so that every compile is cold."""

    name = "xgrammar"
    dist = "xgrammar"
    module = "xgrammar"

    @classmethod
    def settings(cls):
        return {"compile_json_schema": "defaults (any_whitespace=True, strict_mode=True, any_order=False)",
                "GrammarCompiler": "max_threads=8 (default), cache_enabled=False (cold compiles)"}

    def __init__(self, tokenizer):
        import xgrammar as xgr

        self.xgr = xgr
        self.vocab_size = len(tokenizer)
        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=self.vocab_size)
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, self.info.vocab_size)
        self.mask_words = self.bitmask.numpy()[0]  # shares memory with the torch tensor
        self.eos_ids = list(self.info.stop_token_ids)

    def compile(self, schema):
        return self.compiler.compile_json_schema(json.dumps(schema))

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.bitmask, 0)

    def advance(self, m, tok):
        return m.accept_token(tok)

    def accepting(self, m):
        return m.is_completed()

    def error(self, m):
        return ""


class OutlinesCoreAdapter(Adapter):
    """outlines-core: build_regex_from_schema (default whitespace pattern) -> Index -> Guide.
    The Vocabulary is built offline from the tokenizer's token bytes (from_pretrained
    would download the tokenizer)."""

    name = "outlines-core"
    dist = "outlines_core"
    module = "outlines_core"

    @classmethod
    def settings(cls):
        return {"regex": "json_schema.build_regex_from_schema(schema) (default whitespace_pattern)",
                "Guide": "default max_rollback", "mask": "Guide.write_mask_into (int32 bitmask)"}

    @classmethod
    def prepare(cls, tokenizer):
        eos = tokenizer.eos_token_id
        table: dict[bytes, list[int]] = {}
        for tid, b in token_bytes_table(tokenizer).items():
            if tid != eos:
                table.setdefault(b, []).append(tid)
        return {"eos": eos, "table": table, "vocab_size": len(tokenizer)}

    def _setup(self, state):
        import numpy as np
        import outlines_core as oc
        from outlines_core.json_schema import build_regex_from_schema

        self.oc = oc
        self.build_regex = build_regex_from_schema
        eos = state["eos"]
        self.vocabulary = oc.Vocabulary(eos, state["table"])
        self.vocab_size = state["vocab_size"]
        self.bitmask = np.full((1, (self.vocab_size + 31) // 32), -1, dtype=np.int32)
        self.mask_words = self.bitmask[0]
        self.eos_ids = [eos]

    def compile(self, schema):
        regex = self.build_regex(json.dumps(schema))
        return self.oc.Index(regex, self.vocabulary)

    def matcher(self, compiled):
        return self.oc.Guide(compiled)

    def fill(self, m):
        m.write_mask_into(self.bitmask.ctypes.data, self.bitmask.size, 4)

    def advance(self, m, tok):
        try:
            m.advance(tok, return_tokens=False)
            return True
        except Exception:
            return False

    def accepting(self, m):
        return m.is_finished()

    def error(self, m):
        return ""


PEERS: dict[str, type[Adapter]] = {
    LLGuidanceAdapter.name: LLGuidanceAdapter,
    XGrammarAdapter.name: XGrammarAdapter,
    OutlinesCoreAdapter.name: OutlinesCoreAdapter,
}
