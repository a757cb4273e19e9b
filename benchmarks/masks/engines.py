"""The engines MaskBench runs, by name (`ENGINES`, in `ALL_ENGINES` order): structgen's
adapter in its four settings (schema property order with default whitespace, flexible
whitespace, any property order, warm masks at compile) and the peers' adapters
(benchmarks/peers.py, which states the adapter protocol).

Owns how structgen is driven: a cold compile (`structgen.clear_cache()` first), one
matcher per instance, the int32 bitmask. Must not time anything: the worker's loop
(benchmarks/walk.py) does.
"""

from __future__ import annotations

import subprocess

import numpy as np

from benchmarks.masks.provenance import REPO
from benchmarks.peers import PEERS, Adapter

ALL_ENGINES = ["structgen", "structgen-flexible", "structgen-any-order", "structgen-warm", "llguidance", "xgrammar",
               "outlines-core"]


class StructgenAdapter(Adapter):
    """structgen: Vocabulary.from_tokenizer, compile_json_schema(schema, vocab, whitespace=...),
    one matcher per instance, int32 bitmask from allocate_bitmask. The compile cache is
    cleared before every compile (structgen.clear_cache()) so that TTFM is a cold compile."""

    name = "structgen"
    dist = "structgen"
    module = "structgen"
    whitespace = "default"
    property_order = "schema"

    @classmethod
    def available(cls):
        try:
            import structgen
        except Exception as e:  # pragma: no cover - depends on the tree's state
            return False, f"structgen not importable: {e!r}"
        missing = []
        for n in ("Vocabulary", "compile_json_schema", "allocate_bitmask"):
            try:
                getattr(structgen, n)
            except Exception as e:  # lazy attributes import their modules
                missing.append(f"{n} ({type(e).__name__}: {e})")
        if missing:
            return False, "structgen lacks " + ", ".join(missing)
        return True, ""

    @classmethod
    def version(cls):
        try:
            import structgen

            v = getattr(structgen, "__version__", "?")
        except Exception:
            v = "?"
        try:
            rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                 text=True, timeout=10).stdout.strip()
        except Exception:
            rev = ""
        return f"{v} ({rev})" if rev else v

    @classmethod
    def settings(cls):
        return {"whitespace": cls.whitespace, "property_order": cls.property_order,
                "warm_s": "default" if cls.warm_s is None else cls.warm_s,
                "cache": "structgen.clear_cache() before each compile, if present"}

    @classmethod
    def prepare(cls, tokenizer):
        import structgen

        return {"vocab": structgen.Vocabulary.from_tokenizer(tokenizer), "eos": tokenizer.eos_token_id}

    def _setup(self, state):
        import structgen

        self.sg = structgen
        self.vocab = state["vocab"]
        self.vocab_size = int(self.vocab.vocab_size)
        bm = structgen.allocate_bitmask(1, self.vocab_size)
        self.bitmask = bm
        self.mask_words = bm.numpy()[0] if hasattr(bm, "numpy") and not isinstance(bm, np.ndarray) else bm[0]
        eos = None
        for attr in ("eos_token_ids", "eos_ids", "eos_token_id", "eos_id"):
            if getattr(self.vocab, attr, None) is not None:
                eos = getattr(self.vocab, attr)
                break
        if eos is None or (isinstance(eos, (tuple, list)) and not eos):
            eos = state["eos"]
        self.eos_ids = [int(e) for e in eos] if isinstance(eos, (list, tuple, set, frozenset)) else [int(eos)]
        self._clear = getattr(structgen, "clear_cache", None)
        # Per-vocabulary setup, untimed like the peers' tokenizer setup: the token trie
        # (and its compiled walk) that `structgen serve` also builds before serving.
        try:
            structgen.compile_choice(["ready"], self.vocab).matcher().fill_bitmask(self.bitmask, 0)
        except Exception:  # pragma: no cover - an older tree: the first compile builds it
            pass

    @classmethod
    def probe(cls, state) -> tuple[bool, str]:
        """Can this structgen tree compile and walk a trivial schema at all?"""
        try:
            ad = cls.from_state(state)
            m = ad.matcher(ad.compile({"type": "object", "properties": {"a": {"type": "integer"}}}))
            ad.fill(m)
            return True, ""
        except Exception as e:
            return False, f"structgen cannot compile a trivial schema yet: {type(e).__name__}: {e}"[:500]

    def before_compile(self):
        if self._clear is not None:
            self._clear()

    warm_s = None  # None: the compile's default (trees that predate the option have none)

    def compile(self, schema):
        options = {} if self.property_order == "schema" else {"property_order": self.property_order}
        if self.warm_s is not None:
            options["warm_s"] = self.warm_s
        return self.sg.compile_json_schema(schema, self.vocab, whitespace=self.whitespace, **options)

    def matcher(self, compiled):
        return compiled.matcher()

    def fill(self, m):
        m.fill_bitmask(self.bitmask, 0)

    def advance(self, m, tok):
        return bool(m.accept_token(tok))

    def accepting(self, m):
        return bool(m.is_accepting())

    def error(self, m):
        return ""


class StructgenFlexibleAdapter(StructgenAdapter):
    name = "structgen-flexible"
    whitespace = "flexible"


class StructgenAnyOrderAdapter(StructgenAdapter):
    """Object members in any order (property_order="any"): what the default's schema order
    costs in validation errors (instances that list keys in another order), and what
    tracking the members written costs in mask time."""

    name = "structgen-any-order"
    property_order = "any"


class StructgenWarmAdapter(StructgenAdapter):
    """The compile also computes the masks of the states an example document passes
    through (warm_s=0.5): how much of TBM's tail moves into TTFM."""

    name = "structgen-warm"
    warm_s = 0.5


ENGINES: dict[str, type[Adapter]] = {
    StructgenAdapter.name: StructgenAdapter,
    StructgenFlexibleAdapter.name: StructgenFlexibleAdapter,
    StructgenAnyOrderAdapter.name: StructgenAnyOrderAdapter,
    StructgenWarmAdapter.name: StructgenWarmAdapter,
    **PEERS,
}
