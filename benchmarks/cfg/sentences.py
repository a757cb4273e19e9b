"""The sentences CFGBench walks for one grammar (`build_sentences`): tests/test_grammars.py's
samples, the built-in pools, random sentences generated from the grammar when too few are
valid, and corrupted variants, each labelled valid or invalid by lark's Earley parser
(`lark_accepts`).

Must not run engines.
"""

from __future__ import annotations

import importlib.util
import json
import random

from benchmarks.cfg.sentence_pools import ARITH_EXTRA, JSON_EXTRA, SQL_POOL, TOOL_CALL_POOL, arith_expr, csv_pool
from benchmarks.masks.provenance import REPO


def _regex_sample(rng, pattern, flags=()):
    """A random string matching a Python regex (the subset lark terminals use)."""
    import re._parser as sp  # Python >= 3.11
    from re import _constants as C

    printable = [chr(c) for c in range(32, 127)] + ["é", "\n"]

    def in_class(items, ch):
        neg = False
        hit = False
        for op, av in items:
            if op is C.NEGATE:
                neg = True
            elif op is C.LITERAL:
                hit |= ord(ch) == av
            elif op is C.RANGE:
                hit |= av[0] <= ord(ch) <= av[1]
            elif op is C.CATEGORY:
                name = str(av)
                base = {"DIGIT": ch.isdigit(), "SPACE": ch.isspace(), "WORD": ch.isalnum() or ch == "_"}
                for k, v in base.items():
                    if k in name:
                        hit |= (not v) if "NOT" in name else v
        return hit != neg

    def gen(seq):
        out = []
        for op, av in seq:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.NOT_LITERAL:
                out.append(rng.choice([c for c in printable if ord(c) != av and c != "\n"]))
            elif op is C.ANY:
                out.append(rng.choice(printable[:-1]))
            elif op is C.IN:
                cands = [c for c in printable if in_class(av, c)]
                nice = [c for c in cands if c.isalnum() or c in " _-.,"] or cands
                out.append(rng.choice(nice) if nice else "")
            elif op is C.BRANCH:
                out.append(gen(rng.choice(av[1])))
            elif op is C.SUBPATTERN:
                out.append(gen(av[-1]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                lo, hi, item = av
                hi = lo + 4 if hi is C.MAXREPEAT else min(hi, lo + 4)
                out.append("".join(gen(item) for _ in range(rng.randint(lo, hi))))
            elif op is C.AT:
                pass
            else:
                raise ValueError(f"regex op {op} not supported by the sampler")
        return "".join(out)

    return gen(sp.parse(pattern))


def random_sentences(lark_text, n, rng, parser, max_depth=8, tries=400):
    """Random sentences of a lark grammar, kept when lark parses them (fallback pool)."""
    from lark import Lark

    g = Lark(lark_text, parser="earley")
    terms = {t.name: t for t in g.terminals}
    rules: dict[str, list] = {}
    for r in g.rules:
        rules.setdefault(r.origin.name, []).append(r.expansion)
    height = {k: 10 ** 9 for k in rules}
    changed = True
    while changed:
        changed = False
        for k, exps in rules.items():
            best = min(1 + max([height.get(s.name, 0) if not s.is_term else 0 for s in e] or [0]) for e in exps)
            if best < height[k]:
                height[k], changed = best, True
    ignore = bool(g.ignore_tokens)

    def expand(sym, depth, out):
        if sym.is_term:
            t = terms[sym.name]
            out.append(t.pattern.value if t.pattern.type == "str" else _regex_sample(rng, t.pattern.value))
            return
        exps = rules[sym.name]
        if depth >= max_depth:
            exps = [min(exps, key=lambda e: max([height.get(s.name, 0) if not s.is_term else 0 for s in e] or [0]))]
        for s in rng.choice(exps):
            expand(s, depth + 1, out)

    from lark.grammar import NonTerminal

    start = g.options.start[0] if isinstance(g.options.start, list) else g.options.start
    out, seen = [], set()
    for _ in range(tries):
        if len(out) >= n:
            break
        parts: list[str] = []
        try:
            expand(NonTerminal(start), 0, parts)
        except (RecursionError, ValueError):
            continue
        text = ""
        for p in parts:
            if text and p and ignore and (text[-1].isalnum() and p[0].isalnum() or rng.random() < 0.3):
                text += " "
            text += p
        if text in seen or len(text) > 400:
            continue
        seen.add(text)
        if lark_accepts(parser, text):
            out.append(text)
    return out


def lark_accepts(parser, text):
    try:
        parser.parse(text)
        return True
    except Exception:  # noqa: BLE001 - record any failure and go on
        return False


def test_grammars_samples(stem):
    """tests/test_grammars.py's SAMPLES[stem] ("valid" and "near_misses" lists) when it has
    them; else strings from its module-level lists/dicts whose name mentions the grammar."""
    path = REPO / "tests" / "test_grammars.py"
    if not path.exists():
        return [], None
    try:
        spec = importlib.util.spec_from_file_location("_cfgbench_test_grammars", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - record any failure and go on
        return [], f"tests/test_grammars.py not importable: {type(e).__name__}: {e}"[:200]
    samples = getattr(mod, "SAMPLES", None)
    if isinstance(samples, dict) and isinstance(samples.get(stem), dict):
        out = [t for k in ("valid", "near_misses") for t in samples[stem].get(k, []) if isinstance(t, str)]
        return list(dict.fromkeys(out)), None
    keys = {stem.lower(), stem.lower().split("_")[0]}
    out = []

    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, (list, tuple, set, frozenset)):
            for x in v:
                yield from strings(x)
        elif isinstance(v, dict):
            for x in v.values():
                yield from strings(x)

    for name, val in vars(mod).items():
        if name.startswith("__"):
            continue
        if isinstance(val, dict):
            for k, v in val.items():
                if isinstance(k, str) and any(x == k.lower() or x in k.lower() for x in keys):
                    out.extend(strings(v))
        if isinstance(val, (list, tuple, dict)) and any(x in name.lower() for x in keys):
            out.extend(strings(val))
    return list(dict.fromkeys(out)), None


def build_sentences(stem, lark_text, json_texts, limit, seed=0):
    """(sentences [(text, lark_valid)], notes)."""
    from lark import Lark

    rng = random.Random(f"{seed}-{stem}")
    parser = Lark(lark_text, parser="earley", lexer="dynamic_complete")  # as tests/test_grammars.py
    notes = []
    pool, note = test_grammars_samples(stem)
    src = {}
    if note:
        notes.append(note)
    for t in pool:
        src.setdefault(t, "tests/test_grammars.py")
    own = []
    if stem == "json":
        js = list(json_texts)
        rng.shuffle(js)
        own = js[:60] + [json.dumps(json.loads(t), indent=2) for t in js[60:75]] + JSON_EXTRA
    elif stem == "arithmetic":
        own = [arith_expr(rng) for _ in range(45)] + ARITH_EXTRA
    elif stem.startswith("sql"):
        own = SQL_POOL
    elif stem == "csv":
        own = csv_pool(rng)
    elif "tool" in stem:
        own = TOOL_CALL_POOL
    for t in own:
        src.setdefault(t, "built-in pool")
    labelled = [(t, lark_accepts(parser, t)) for t in src]
    valid = [t for t, ok in labelled if ok]
    n_tests = sum(1 for v in src.values() if v == "tests/test_grammars.py")
    if n_tests:
        notes.append(f"{n_tests} samples from tests/test_grammars.py")
    if len(valid) < 20:
        extra = random_sentences(lark_text, 30 - len(valid), rng, parser)
        notes.append(f"{len(valid)} valid samples in the pools; added {len(extra)} random sentences generated "
                     "from the grammar")
        for t in extra:
            if t not in src:
                src[t] = "random from grammar"
                labelled.append((t, True))
                valid.append(t)
    # corrupted variants: truncation and one-character edits (lark labels them)
    invalid = [t for t, ok in labelled if not ok]
    mutants = []
    for t in valid:
        if len(t) >= 2:
            mutants.append(t[: rng.randint(1, len(t) - 1)])
            i = rng.randrange(len(t))
            mutants.append(t[:i] + t[i + 1:] if rng.random() < 0.5 else t[:i] + rng.choice('{}()[],;:"\'+*x ') + t[i:])
    rng.shuffle(mutants)
    for t in mutants:
        if len(invalid) >= max(len(valid), 10) or t in src:
            continue
        ok = lark_accepts(parser, t)
        src[t] = "mutant"
        labelled.append((t, ok))
        if not ok:
            invalid.append(t)
    labelled = list(dict.fromkeys(labelled))
    if limit:
        v = [x for x in labelled if x[1]][:limit]
        iv = [x for x in labelled if not x[1]][:limit]
        labelled = v + iv
    return [(t, ok, src[t]) for t, ok in labelled], notes
