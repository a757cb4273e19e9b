"""The expansion of pending disjunctions (anyOf, if/then/else, dependencies, partial
negations) into branches, and `oneOf`, whose branches are made mutually exclusive
(strengthened, or intersected with the others' negations) or refused.

Owns: the branch budget and the oneOf strategy. A mixin of `compiler.SchemaCompiler`: it
uses the compiler's options, style, budget (`tick`, `refuse`) and the methods of the
other mixins through `self`.
"""

from __future__ import annotations

from structgen.errors import GrammarTooLargeError, UnsupportedKeywordError
from structgen.grammar import ir
from structgen.grammar.json_schema.normalized import Disjunction, Normalized

MAX_BRANCHES = 65536


class Combinators:
    """Disjunctions -> branches; oneOf exclusivity."""

    def expand(self, s: Normalized, depth: int) -> ir.Node:
        g = s.groups[0]
        base = s.copy()
        base.groups = s.groups[1:]
        branches: list[Normalized] = []
        if g.kind == "oneOf":
            branches = self._one_of(base, g)
        else:
            for alt_items in g.alts:
                b = base.copy()
                b.merge(self.normalize(alt_items), obj_at=g.slot)
                if not self.is_empty(b):
                    branches.append(b)
        if not g.exact and not branches and not self.is_empty(base) and not self.options.lenient:
            raise UnsupportedKeywordError(
                g.kind, g.ptr, "its subschema can only be negated in part, and that part excludes everything here"
            )
        self.branches += len(branches)
        if self.branches > MAX_BRANCHES:
            raise GrammarTooLargeError(
                f"the schema's anyOf/oneOf/if/dependencies combinations expand to over {MAX_BRANCHES:,} alternatives"
            )
        return ir.alt(*(self.compile_normalized(b, depth) for b in branches))

    def _one_of(self, base: Normalized, g: Disjunction) -> list[Normalized]:
        """Branch i is accepted only where no other branch can match: if branches i and
        j are not provably disjoint, branch i is strengthened (a property whose values
        differ between i and j becomes required in i), or failing that, intersected
        with the negation of branch j (a subset of it where it cannot be exact)."""
        plain: list[Normalized] = []
        for alt_items in g.alts:
            b = base.copy()
            b.groups = []
            for raw, ptr, chain in alt_items:
                self.ingest(b, raw, ptr, chain)
            plain.append(self.hull(b))
        live = [i for i, b in enumerate(plain) if not self.is_empty(b)]
        out: list[Normalized] = []
        for i in live:
            b = base.copy()
            b.merge(self.normalize(g.alts[i]), obj_at=g.slot)
            mine = plain[i]
            product = 1
            for j in live:
                if j == i or self.disjoint(mine, plain[j]):
                    continue
                strengthened = self._discriminate(mine, plain[j])
                if strengthened is not None:
                    how, name = strengthened
                    mine = mine.copy()
                    for t in (mine, b):
                        if how == "required":
                            t.required.setdefault(name, g.ptr)
                        else:
                            t.min_items = max(t.min_items, 1)
                    continue
                (raw, ptr, chain), = g.alts[j]
                neg, exact = self.negate(raw, ptr, chain)
                if neg is not None and not exact:
                    # a partial negation must leave something of branch i, else it says nothing
                    if all(self.is_empty(mine.merged(a)) for a in neg):
                        neg = None
                if neg is None:
                    if self.options.lenient:
                        continue
                    raise UnsupportedKeywordError(
                        "oneOf",
                        g.ptr,
                        f"cannot prove branches {i} and {j} mutually exclusive (nor negate branch {j}); "
                        "use anyOf if several branches may match",
                    )
                if product * max(len(neg), 1) > 256:
                    neg = neg[:1]  # a subset of the negation: sound, keeps the size bounded
                product *= max(len(neg), 1)
                self.add_alternatives(b, "oneOf-not", neg, g.ptr, g.chain)  # checked above
            if not self.is_empty(b):
                out.append(b)
        return out

    def _discriminate(self, a: Normalized, b: Normalized):
        """A strengthening of `a` that makes it disjoint from `b`: a property to
        require ("required", name), or ("nonempty", None) for arrays whose element
        schemas are disjoint. None if no cheap one is found."""
        kinds = self.effective_kinds(a)
        if kinds == frozenset({"array"}) and self.effective_kinds(b) & kinds:
            t = a.copy()
            t.min_items = max(t.min_items, 1)
            e1 = self.normalize(self.elem_items(a, 0))
            e2 = self.normalize(self.elem_items(b, 0))
            if not self.is_empty(t) and self.disjoint(self.hull(e1), self.hull(e2)):
                return ("nonempty", None)
        if "object" not in kinds:
            return None
        names: list[str] = []
        for x in a.objs + b.objs:
            for n in x.props:
                if n not in names and n not in a.required and n not in a.forbidden:
                    names.append(n)
        for n in names[:64]:
            t = a.copy()
            t.required[n] = ""
            if not self.is_empty(t) and self.disjoint(t, b):
                return ("required", n)
        return None

    def hull(self, s: Normalized, level: int = 0) -> Normalized:
        """`s` with its kinds narrowed to those its pending groups allow (every value
        satisfies one alternative of each group): a sound summary for disjointness."""
        if not s.groups or level > 2:
            return s
        t = s.copy()
        t.groups = []
        for g in s.groups:
            if not g.exact:
                continue  # its alternatives are a subset of the keyword's values: no summary
            kinds: frozenset = frozenset()
            for alt_items in g.alts:
                kinds |= self.effective_kinds(self.hull(self.normalize(alt_items), level + 1))
            t.set_types(kinds)
        return t
