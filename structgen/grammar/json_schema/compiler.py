"""The JSON Schema compiler (`SchemaCompiler`): one compile of one schema with its options,
its caches and its time budget, made of one mixin per concern.

Owns: the budget (`tick`, `refuse`), the value cache and recursion (`value`: a value met
again while it is compiled becomes an `ir.Ref`), and the dispatch of a normalized schema
to its alternatives, literals and kinds (`compile_normalized`). What each concern does
lives in its own module: reading raw schemas (`normalize`), negation (`negation`),
emptiness and disjointness (`disjointness`), anyOf/oneOf/if expansion (`combinators`),
enum/const (`literals`), any value (`any_value`) and the lowering of numbers
(`numeric`), strings (`strings`), arrays (`arrays`) and objects (`objects`). Must not
know the automata.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from structgen.errors import GrammarTooLargeError, SchemaError, UnsupportedKeywordError
from structgen.grammar import ir
from structgen.grammar.json_schema.any_value import AnyValues
from structgen.grammar.json_schema.arrays import Arrays
from structgen.grammar.json_schema.combinators import Combinators
from structgen.grammar.json_schema.disjointness import Disjointness
from structgen.grammar.json_schema.keywords import canon
from structgen.grammar.json_schema.literals import Literals
from structgen.grammar.json_schema.negation import Negating
from structgen.grammar.json_schema.normalize import Normalizing
from structgen.grammar.json_schema.normalized import Normalized
from structgen.grammar.json_schema.numeric import Numbers
from structgen.grammar.json_schema.objects import Objects
from structgen.grammar.json_schema.options import JsonOptions
from structgen.grammar.json_schema.references import Resolver
from structgen.grammar.json_schema.strings import Strings
from structgen.grammar.json_schema.style import Style
from structgen.grammar.languages import Languages
from structgen.grammar.nesting import MAX_SCHEMA_LEVELS


class SchemaCompiler(Normalizing, Negating, Disjointness, Combinators, Literals, AnyValues, Numbers, Strings,
                     Arrays, Objects):
    """One compile of one schema: `compile_root` gives the IR of the whole schema."""

    def __init__(self, schema: Any, options: JsonOptions, deadline: float | None = None, resolver=None,
                 languages: Languages | None = None):
        self.options = options
        self.languages = languages
        self.style = Style(options)
        self.root = schema
        self.resolver = resolver or Resolver(schema)
        self.deadline = deadline if deadline is not None else time.monotonic() + options.timeout_s
        self.cache: dict = {}
        self.in_progress: dict = {}  # value key -> Ref once the value is met again (recursion)
        self.keep: list = []
        self.body_cache: dict = {}
        self.normalized_cache: dict = {}  # `normalized`: conjunction key -> (Normalized, items)
        self.shared_kinds: dict = {}  # id of a Normalized `normalized` made -> {level: its effective kinds}
        self.pattern_nfas: dict = {}
        self.values_checked: dict[int, dict] = {}  # the raw subschemas whose keyword values passed (`ingest`)
        self.depth = 0
        self._ticks = 0
        self.branches = 0  # alternatives created by expanding anyOf/oneOf/if/... (budget)
        self._twin: SchemaCompiler | None = None

    # -- budget

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks & 63 == 0 and time.monotonic() > self.deadline:
            raise GrammarTooLargeError(
                f"compiling the schema exceeded its time budget ({self.options.timeout_s:g} s); "
                "simplify the schema (deeply nested anyOf/oneOf/allOf multiply)"
            )

    def refuse(self, keyword: str, ptr: str, reason: str = "") -> None:
        """Raise UnsupportedKeywordError unless lenient (then the caller ignores it)."""
        if not self.options.lenient:
            raise UnsupportedKeywordError(keyword, ptr, reason)

    @property
    def twin(self) -> "SchemaCompiler":
        """A compact-style compiler sharing the resolver, for testing single values."""
        if self._twin is None:
            if self.options.style == "compact":
                self._twin = self
            else:
                opts = replace(self.options, whitespace="compact", indent=None)
                self._twin = SchemaCompiler(self.root, opts, self.deadline, self.resolver, self.languages)
        return self._twin

    # -- entry

    def compile_root(self, check_size: bool = True) -> ir.Node:
        """check_size=False: the caller checks the expanded size of what it builds from
        this (a union of alternatives checks the union once)."""
        node = self.value([(self.root, "", ())], 0)
        if not check_size:
            return node
        size = ir.expanded_size(node, limit=self.options.max_states)
        if size > self.options.max_states:
            raise GrammarTooLargeError(
                f"the schema's grammar would need more than {self.options.max_states:,} states "
                "(tighten large bounds such as maxLength/maxItems, or raise max_states)"
            )
        return node

    def value(self, items: list, depth: int) -> ir.Node:
        """IR of a JSON value satisfying every item of the conjunction, at `depth`.

        A value met again while it is being compiled is a recursive schema: the inner
        use becomes an `ir.Ref` whose target is set once the outer one is built."""
        items = self.through_refs(items)
        key = (tuple(id(it[0]) for it in items), self.style.depth_key(depth))
        if self.options.strict_pointers:  # one subschema object may sit both in and out of a strict part
            key += (tuple(self.strict_at(it[1]) for it in items),)
        got = self.cache.get(key)
        if got is not None:
            return got
        ptr = items[0][1] if items else ""
        if key in self.in_progress:
            ref = self.in_progress[key]
            if ref is None:
                ref = self.in_progress[key] = ir.Ref(ptr or "#")
            return ref
        self.keep.append(items)
        self.tick()
        self.depth += 1
        if self.depth > MAX_SCHEMA_LEVELS + 24:
            if self.style.mode == "indent":
                raise UnsupportedKeywordError(
                    "$ref", ptr, "schema nesting too deep: a recursive schema needs whitespace 'default', "
                    "'compact' or 'flexible' (the indentation of 'indent' depends on the depth)")
            raise SchemaError(f"the schema nests values deeper than {MAX_SCHEMA_LEVELS} levels, the limit", ptr)
        self.in_progress[key] = None
        try:
            # A new value starts a new $ref chain: a chain only detects $ref cycles that
            # never descend into a property or item.
            s = self.normalized([(raw, p, ()) for raw, p, _ in items])
            node = self.compile_normalized(s, depth)
        finally:
            self.depth -= 1
            ref = self.in_progress.pop(key)
        if ref is not None:
            ref.target = node
            node = ref
        self.cache[key] = node
        return node

    def through_refs(self, items: list) -> list:
        """`items` with each schema that is only a `$ref` (and annotations) replaced by
        what it refers to: the value of a definition is then compiled once, whichever
        of the places that refer to it meets it first, and not once per place. Left as
        they are where a chain of such references loops (normalizing reports the loop),
        and under strict pointers (whether a place is strict depends on where it is)."""
        if self.options.strict_pointers:
            return items
        out = []
        for raw, ptr, chain in items:
            seen = set()
            while isinstance(raw, dict) and _only_a_ref(effective := self.resolver.effective(raw)):
                target, tptr = self.resolver.resolve(effective["$ref"], effective, ptr + "/$ref")  # as `ingest` does
                if tptr in seen:
                    return items
                seen.add(tptr)
                raw, ptr = target, tptr
            out.append((raw, ptr, chain))
        return out

    # ------------------------------------------------------------ compile a normalized schema

    def compile_normalized(self, s: Normalized, depth: int) -> ir.Node:
        self.tick()
        kinds = self.effective_kinds(s)
        if not kinds:
            return ir.NOTHING
        if s.groups:
            return self.expand(s, depth)
        if s.is_unconstrained():
            return self.any_value(depth, self.any_depth)
        if s.enum is not None:
            return self.lower_enum(s, depth)
        excl = {canon(v) for v in s.not_values}
        parts: list[ir.Node] = []
        if "null" in kinds and canon(None) not in excl:
            parts.append(ir.lit("null"))
        if "boolean" in kinds:
            for v, t in ((True, "true"), (False, "false")):
                if canon(v) not in excl:
                    parts.append(ir.lit(t))
        if "int" in kinds or "frac" in kinds:
            parts.append(self.lower_number(s, kinds))
        if "string" in kinds:
            parts.append(self.lower_string(s))
        if "array" in kinds:
            parts.append(self.lower_array(s, depth))
        if "object" in kinds:
            parts.append(self.lower_object(s, depth))
        return ir.alt(*parts)


# Keywords beside a `$ref` that change nothing about the values it allows, nor where its
# references lead (unlike `$id`, `$anchor`, `$defs`).
_PURE_ANNOTATIONS = frozenset({"title", "description", "examples", "example", "default", "$comment", "deprecated",
                               "readOnly", "writeOnly", "markdownDescription"})


def _only_a_ref(raw: dict) -> bool:
    """Whether a schema object is a `$ref` and pure annotations."""
    return "$ref" in raw and all(key == "$ref" or key in _PURE_ANNOTATIONS or key.startswith("x-") for key in raw)
