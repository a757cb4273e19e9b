"""Object lowering: declared properties in schema order (or any order), required ones,
minProperties/maxProperties (a graph over property and count), propertyNames, and the
undeclared members that patternProperties/additionalProperties allow (one key class per
pattern, plus the keys no pattern matches).

Owns: the member layout of objects. A mixin of `compiler.SchemaCompiler`: it uses the
compiler's options, style, budget (`tick`, `refuse`) and the methods of the other mixins
through `self`.
"""

from __future__ import annotations

import json

from structgen.errors import GrammarTooLargeError, RegexError
from structgen.grammar import charset as C
from structgen.grammar import ir
from structgen.grammar import regex as rx
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.json_schema.char_nfa import CharNFA, excluding_nfa
from structgen.grammar.json_schema.graphs import StateNumbers, trimmed_graph
from structgen.grammar.json_schema.memo import BoundedCache
from structgen.grammar.json_schema.normalized import Normalized
from structgen.grammar.json_schema.strings import body_except


class Objects:
    """Object lowering."""

    def lower_object(self, s: Normalized, depth: int) -> ir.Node:
        st = self.style
        names: list[str] = []
        seen: set[str] = set()
        for x in s.objs:
            for n in x.props:
                if n not in seen:
                    seen.add(n)
                    names.append(n)
        for n in s.required:
            if n not in seen:
                seen.add(n)
                names.append(n)
        pn = self.normalize(s.prop_names) if s.prop_names else None
        if pn is not None and pn.is_unconstrained():
            pn = None
        colon = st.colon(depth)
        entries: list[tuple[ir.Node, bool]] = []
        for n in names:
            req = n in s.required
            if n in s.forbidden or (pn is not None and not self._name_ok(pn, n)):
                if req:
                    return ir.NOTHING
                continue
            v = self.value(self.conj_for(s, n), depth + 1)
            if ir.is_nothing(v):
                if req:
                    return ir.NOTHING
                continue
            entries.append((ir.seq(self.key_literal(n), colon, v), req))
        extra = self._extras(s, names, pn, depth)
        n_req = sum(1 for _, r in entries if r)
        n = len(entries)
        lo, hi = s.min_props, s.max_props
        if hi is not None and n_req > hi:
            return ir.NOTHING
        if extra is None and lo > n:
            return ir.NOTHING
        if self.options.property_order == "any" and n + (extra is not None) > 1:
            return st.members(depth, [e for e, _ in entries], [r for _, r in entries], extra, lo, hi)
        if extra is None and n_req == n and lo <= n and (hi is None or hi >= n):
            return st.container(depth, "{", "}", [e for e, _ in entries])  # all required: a sequence
        # Graph over (layer i = next declared property, c = entries written so far).
        # Without count bounds c only tells "none yet" (0) from "some" (1).
        counting = lo > n_req or (hi is not None and (extra is not None or hi < n))
        cap = (hi if hi is not None else lo) if counting else 1
        cap = max(cap, 1)
        if (n + 1) * (cap + 1) * 2 > self.options.max_states:
            raise GrammarTooLargeError(
                f"minProperties/maxProperties over {n} properties need too many states"
            )
        sid = StateNumbers()

        edges: list = []
        open_, sep = st.open(depth), st.sep(depth)
        close_some = ir.seq(st.close(depth), ir.lit("}"))
        close_none = st.empty(depth, "", "}")

        def entry(i: int, c: int, label: ir.Node, dst_layer: int) -> None:
            if counting and hi is not None and c + 1 > hi:
                return
            mid = sid(("mid", i, c if counting else 0))
            edges.append((sid((i, c)), mid, open_ if c == 0 else sep))
            edges.append((mid, sid((dst_layer, min(c + 1, cap))), label))

        for i, (label, req) in enumerate(entries):
            for c in range(cap + 1):
                entry(i, c, label, i + 1)
                if not req:
                    edges.append((sid((i, c)), sid((i + 1, c)), None))
        final = sid("end")
        for c in range(cap + 1):
            if extra is not None:
                entry(n, c, extra, n)
            if counting and c < lo:
                continue
            edges.append((sid((n, c)), final, close_none if c == 0 else close_some))
        return ir.seq(ir.lit("{"), trimmed_graph(len(sid), sid((0, 0)), [final], edges))

    def _name_ok(self, pn: Normalized, name: str) -> bool:
        """Whether a property name satisfies propertyNames."""
        if "string" not in self.effective_kinds(pn):
            return False
        if pn.groups:
            node = self.twin.compile_normalized(pn, 0)
            return ir_accepts(node, json.dumps(name, ensure_ascii=False).encode())
        if pn.enum is not None and all(v != name for v in pn.enum):
            return False
        if any(v == name for v in pn.not_values):
            return False
        return self.value_ok(pn, name)

    def _overlap(self, a: CharNFA, b: CharNFA) -> bool:
        try:
            return not a.intersect(b).is_empty()
        except GrammarTooLargeError:
            return True

    def _extras(self, s: Normalized, names: list[str], pn: Normalized | None, depth: int) -> ir.Node | None:
        """The IR of ONE undeclared `"key": value` entry, or None if none is allowed.

        Keys matching a patternProperties pattern form one class per pattern; their
        value must satisfy that pattern's schema, every other pattern that may match
        the same key, and additionalProperties of members lacking the pattern (a sound
        over-approximation). Keys matching no pattern are approximated by the keys whose
        first character no pattern can start with."""
        if self.strict_for(s):
            return None
        colon = self.style.colon(depth)
        taken = set(names) | s.forbidden
        # disable_additional_properties: only keys some patternProperties declares
        declared_only = any(x.silent for x in s.objs) and s.min_props <= len(names)
        if pn is not None and pn.enum is not None and not pn.groups:
            if declared_only:
                return None
            # finite propertyNames: the extras are those names
            entries = []
            for name in pn.enum:
                if not isinstance(name, str) or name in taken or not self._name_ok(pn, name):
                    continue
                v = self.value(self.conj_for(s, name), depth + 1)
                if not ir.is_nothing(v):
                    entries.append(ir.seq(self.key_literal(name), colon, v))
            return ir.alt(*entries) if entries else None
        pn_nfa = None
        if pn is not None:
            pn_nfa = self.string_nfa(pn, "propertyNames", s.prop_names[0][1])
        classes: list[ir.Node] = []
        # distinct patterns, each with the items of every member that has it
        pats: dict[str, dict] = {}
        for x in s.objs:
            for pat, items, pptr in x.patterns:
                nfa = self.pattern_nfa(pat, pptr)
                if nfa is None:
                    continue  # lenient: unusable pattern, its keys get no class
                entry = pats.setdefault(pat, {"nfa": nfa, "items": [], "owners": [], "ptr": pptr})
                entry["items"] += items
                entry["owners"].append(x)
        taken_list = sorted(taken)
        budget = self.options.max_states

        def emit(keys: CharNFA | None, body: ir.Node | None, conj: list) -> None:
            v = self.value(conj, depth + 1)
            if ir.is_nothing(v):
                return
            if body is None:
                if pn_nfa is not None:
                    keys = keys.intersect(pn_nfa)
                body = keys.to_ir(max_states=budget, tick=self.tick)
            if not ir.is_nothing(body):
                classes.append(ir.seq(ir.lit('"'), body, ir.lit('"'), colon, v))

        def lacking(owners: list) -> list:
            out: list = []
            for x in s.objs:
                if x not in owners and x.additional is not None:
                    out += x.additional
            return out

        for pat, e in pats.items():
            nfa = e["nfa"]
            others = [q for q in pats if q != pat and self._overlap(nfa, pats[q]["nfa"])]
            keys = nfa
            if any(nfa.matches(t) for t in taken_list):
                keys = keys.intersect(excluding_nfa(taken_list))  # declared keys are declared entries
            plain = keys is nfa and pn_nfa is None
            # keys matching this pattern only: its schema, exactly
            exact_keys = keys
            if others and len(pats) <= 16:
                try:
                    exact_keys = keys.intersect(_matching_none({q: pats[q]["nfa"] for q in others}))
                except GrammarTooLargeError:
                    exact_keys = None
            elif others:
                exact_keys = None
            if exact_keys is not None:
                body = None
                if plain and not others:
                    try:
                        body = rx.regex_ir(pat, encoding="json", search=True)
                    except RegexError:
                        body = None
                emit(exact_keys, body, e["items"] + lacking(e["owners"]))
            if others:
                # keys that may also match other patterns: all their schemas (a subset)
                conj = e["items"] + lacking(e["owners"])
                for q in others:
                    conj = conj + pats[q]["items"]
                owners = e["owners"] + [x for q in others for x in pats[q]["owners"]]
                conj += [it for it in lacking(owners) if it not in conj]
                emit(keys, None, conj)
        if declared_only:
            return ir.alt(*classes) if classes else None
        # keys matching no pattern: additionalProperties of every member
        rest_conj: list = []
        for x in s.objs:
            if x.additional is not None:
                rest_conj += x.additional
        v = self.value(rest_conj, depth + 1)
        if ir.is_nothing(v):
            return ir.alt(*classes) if classes else None
        if not pats and pn_nfa is None:
            body = body_except(taken_list)
        elif pn_nfa is None:  # the same members and patterns met again: the same keys
            key = ("unmatched keys", tuple(taken_list), tuple(sorted(pats)))
            body = self.body_cache.get(key)
            if body is None:
                body = self.body_cache[key] = self._unmatched_keys(taken_list, pats, None)
        else:
            body = self._unmatched_keys(taken_list, pats, pn_nfa)
        if not ir.is_nothing(body):
            classes.append(ir.seq(ir.lit('"'), body, ir.lit('"'), colon, v))
        return ir.alt(*classes) if classes else None

    def _unmatched_keys(self, taken_list: list[str], pats: dict, pn_nfa: CharNFA | None) -> ir.Node:
        """The body of a key that is none of `taken_list`, matches none of the patterns
        `pats` (pattern -> its entry) and satisfies propertyNames (`pn_nfa`, or None)."""
        keys = excluding_nfa(taken_list)
        if pats:
            try:
                keys = keys.intersect(_matching_none({pat: e["nfa"] for pat, e in pats.items()}))
            except GrammarTooLargeError:
                first_taken = C.NO_CHAR
                empty_ok = True
                for e in pats.values():
                    first_taken = C.union(first_taken, e["nfa"].first_chars())
                    empty_ok = empty_ok and e["nfa"].start not in e["nfa"].finals
                keys = excluding_nfa(taken_list, first=C.difference(C.ANY_CHAR, first_taken), allow_empty=empty_ok)
        if pn_nfa is not None:
            keys = keys.intersect(pn_nfa)
        return keys.to_ir(max_states=self.options.max_states, tick=self.tick)


# The keys that match none of some patternProperties patterns, by the patterns: the
# objects of one schema often share theirs (a language-tagged name on every field of an
# Open Contracting release), and a complement is a subset construction in Python, most
# of such a compile (31 of them, 0.36 s of one schema's 1.0 s under the profiler).
_NONE_OF_PATTERNS = BoundedCache(32)


def _matching_none(patterns: dict[str, CharNFA]) -> CharNFA:
    """The strings none of `patterns` (pattern text -> its NFA, `pattern_automaton`'s)
    matches; GrammarTooLargeError where the complement is too big (not remembered)."""
    key = tuple(sorted(patterns))
    got = _NONE_OF_PATTERNS.get(key)
    if got is None:
        union = None
        for pattern in key:
            union = patterns[pattern] if union is None else union.union(patterns[pattern])
        got = union.complement()
        _NONE_OF_PATTERNS.put(key, got)
    return got
