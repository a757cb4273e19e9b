"""CFGBench section 3, `grammars`: every grammars/*.lark (and its .gbnf twin) compiled
by every engine that reads its syntax and walked over its sentences, verdicts compared
with lark's (`section_grammars`), and its markdown table and notes (`print_grammars`).

Must not touch the other sections.
"""

from __future__ import annotations

import glob
from pathlib import Path

from benchmarks.cfg.harness import Harness, progress
from benchmarks.cfg.outcomes import summarize_walk, task_record, tstats
from benchmarks.cfg.sentences import build_sentences
from benchmarks.masks.provenance import REPO
from benchmarks.report.formats import us


def _grammar_record(h, r, tests, texts) -> dict:
    """The result record of one engine on one grammar: status, TTFM, TBM and verdicts."""
    rec = task_record(r)
    if "outcomes" in r:
        w = summarize_walk(h.tok, tests, r, texts)
        rec.update(tbm_us=tstats(r["samples_us"]), mask_us=tstats(r["fill_us"]),
                   valid_ok=w["valid_ok"], valid=w["valid"], invalid_ok=w["invalid_ok"], invalid=w["invalid"],
                   exceptions=w["exceptions"], mask_mismatches=r["n_mismatch"],
                   mismatch_examples=r["mismatches"], verdicts=[o["accepted"] for o in r["outcomes"]],
                   validation_errors=w["validation_errors"], invalidation_errors=w["invalidation_errors"])
    return rec


def section_grammars(h: Harness, json_texts, limit, repeats, no_progress):
    files = sorted(glob.glob(str(REPO / "grammars" / "*.lark")))
    grammars = []
    for f in files:
        stem = Path(f).stem
        text = Path(f).read_text()
        twin = Path(f).with_suffix(".gbnf")
        gbnf = twin.read_text() if twin.exists() else None
        try:
            sents, notes = build_sentences(stem, text, json_texts, limit)
        except Exception as e:  # noqa: BLE001 - record any failure and go on
            sents, notes = [], [f"no sentences: lark could not load the grammar: {type(e).__name__}: {e}"[:300]]
        grammars.append({"name": stem, "lark": text, "gbnf": gbnf, "sentences": sents, "notes": notes})
    rows = [("structgen", "structgen (lark)", "lark"), ("structgen", "structgen (gbnf)", "gbnf"),
            ("llguidance", "llguidance (lark)", "lark"), ("xgrammar", "xgrammar (gbnf)", "gbnf")]
    rows = [r for r in rows if r[0] in h.active]
    tasks = [(ri, gi) for ri in range(len(rows)) for gi in range(len(grammars))]
    bar = progress(len(tasks), "grammars", no_progress)
    results = {g["name"]: {"sentences": len(g["sentences"]), "lark_valid": sum(ok for _, ok, _ in g["sentences"]),
                           "has_gbnf": g["gbnf"] is not None, "notes": g["notes"], "engines": {},
                           "sentence_list": [{"text": t, "lark_valid": ok, "source": s} for t, ok, s in g["sentences"]]}
               for g in grammars}
    for ri, gi in tasks:  # one engine (row) at a time
        engine, label, syntax = rows[ri]
        g = grammars[gi]
        if bar is not None:
            bar.set_postfix_str(f"{label} {g['name']}", refresh=False)
        text = g[syntax]
        if text is None:
            results[g["name"]]["engines"][label] = {"status": "skipped", "error": f"no {g['name']}.gbnf twin"}
        elif not g["sentences"]:
            results[g["name"]]["engines"][label] = {"status": "skipped", "error": "no sentences"}
        else:
            texts = [t for t, _, _ in g["sentences"]]
            tests = [(ok, h.encode(t)) for t, ok, _ in g["sentences"]]
            r = h.run(engine, {"kind": syntax, "text": text}, tests, repeats)
            rec = _grammar_record(h, r, tests, texts)
            results[g["name"]]["engines"][label] = rec
            if engine == "structgen" and "GrammarTooLargeError" in r.get("error", ""):
                # the default budget refused it: measure it anyway with a raised max_states
                r = h.run(engine, {"kind": syntax, "text": text, "max_states": 10 ** 12}, tests, repeats)
                rec2 = {**_grammar_record(h, r, tests, texts), "max_states": 10 ** 12}
                results[g["name"]]["engines"][label.replace(")", ", max_states=1e12)")] = rec2
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    for gr in results.values():
        verd = [r["verdicts"] for r in gr["engines"].values() if "verdicts" in r]
        n = min((len(v) for v in verd), default=0)
        gr["all_engines_agree"] = sum(1 for i in range(n) if len({v[i] for v in verd}) == 1) if verd else None
        gr["sentences_walked_by_all"] = n
        gr["engines_walked"] = len(verd)
    return {"grammars": results, "ttfm_repeats": repeats, "limit": limit}


def print_grammars(s):
    print("### 3. grammars: grammars/*.lark (and .gbnf twins)")
    print()
    print(f"TTFM = cold compile + first mask, median of {s['ttfm_repeats']} compiles and the first of them (µs); TBM "
          "over every token of every sentence (µs); verdicts compared with lark's Earley parser "
          "(lexer='dynamic_complete', as tests/test_grammars.py): valid sentences accepted, invalid rejected.")
    print()
    print("| grammar | engine | TTFM | TTFM 1st | TBM p50 | p90 | p99 | max | mask p50 | valid accepted "
          "| invalid rejected | disagree with lark |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, g in s["grammars"].items():
        for label, r in g["engines"].items():
            if "tbm_us" not in r:
                t = us(r["ttfm_us"]["median"]) if "ttfm_us" in r else "–"
                print(f"| {name} | {label} | {t} | | {r['status']}: {r.get('error', '')[:90].replace('|', '/')} "
                      f"| | | | | | | |")
                continue
            a, b = r["tbm_us"], r["mask_us"]
            dis = (r["valid"] - r["valid_ok"]) + (r["invalid"] - r["invalid_ok"])
            print(f"| {name} | {label} | {us(r['ttfm_us']['median'])} | {us(r['ttfm_us']['runs'][0])} "
                  f"| {us(a['p50'], 1)} | {us(a['p90'], 1)} "
                  f"| {us(a['p99'], 1)} | {us(a['max'], 1)} | {us(b['p50'], 1)} | {r['valid_ok']}/{r['valid']} "
                  f"| {r['invalid_ok']}/{r['invalid']} | {dis} |")
    print()
    for name, g in s["grammars"].items():
        agree = (f"; the {g['engines_walked']} engines that walked it agree with each other on "
                 f"{g['all_engines_agree']}/{g['sentences_walked_by_all']}" if g["all_engines_agree"] is not None else "")
        print(f"- {name}: {g['sentences']} sentences ({g['lark_valid']} valid per lark), gbnf twin: "
              f"{'yes' if g['has_gbnf'] else 'no'}{agree}" + ("; " + "; ".join(g["notes"]) if g["notes"] else ""))
        for label, r in g["engines"].items():
            if r.get("truncated"):
                print(f"  - {label}: {r['truncated']}")
            for ve in r.get("validation_errors", [])[:4]:
                print(f"  - {label}: valid rejected: {ve.get('text', '')[:90]!r} at token {ve['at_token']}/{ve['of']} "
                      f"({ve['reason']}; ...{ve.get('before', '')!r} + {ve.get('token', '')!r})")
            for ie in r.get("invalidation_errors", [])[:4]:
                print(f"  - {label}: INVALID ACCEPTED: {ie.get('text', '')[:120]!r}")
            if r.get("mask_mismatches"):
                print(f"  - {label}: {r['mask_mismatches']} MASK/MATCHER MISMATCHES {r['mismatch_examples'][:3]}")
