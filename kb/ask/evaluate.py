"""``kb eval``: hit@1 / hit@3 / MRR by language, out-of-scope declines, and parameter coverage.

Eval file (YAML): ``items: [{id, lang, query, config?, expected: {topic, params}}]``. A result is a
hit when the entry's ``topics`` contain the expected topic (or its id equals it). Items whose topic
no entry covers are reported as "not covered", apart from the hit rates. ``topic: out_of_scope``
items must be declined (``answered: false``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from kb.lang import detect_lang

OUT_OF_SCOPE = "out_of_scope"


MAX_EVAL_BYTES = 10_000_000


def load_eval(path: Path) -> list[dict[str, Any]]:
    try:
        if path.stat().st_size > MAX_EVAL_BYTES:
            raise ValueError(f"{path}: eval file is larger than {MAX_EVAL_BYTES // 1_000_000} MB")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as e:
        raise ValueError(f"{path}: cannot read eval file: {e}") from None
    items = data.get("items") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(i, dict) and "query" in i for i in items):
        raise ValueError(f"{path}: expected a list of items with a 'query' (under 'items:')")
    return items


def entry_queries_as_items(engine) -> list[dict[str, Any]]:
    """Each entry's own ``queries`` as eval items whose expected answer is that entry."""
    items = []
    for eid, e in engine.index.entries.items():
        for lang in ("en", "zh"):
            for q in e["queries"][lang]:
                items.append({"id": f"{eid}/{lang}", "lang": lang, "query": q, "expected": {"entry": eid}})
        for q in e.get("not_queries", []):
            items.append({"id": f"{eid}/not", "query": q, "expected": {"not_entry": eid}})
    return items


def _match(engine, eid: str, expected: dict[str, Any]) -> bool:
    if "entry" in expected:
        return eid == expected["entry"]
    topic = expected.get("topic")
    e = engine.index.entries[eid]
    return eid == topic or topic in e.get("topics", [])


def evaluate(engine, items: list[dict[str, Any]], k: int = 3, progress=None) -> dict[str, Any]:
    """``progress(done, total)`` is called after each item (kb eval shows it on stderr)."""
    covered_topics = {t for e in engine.index.entries.values() for t in e.get("topics", [])} | set(engine.index.entries)
    by_lang: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    rows = []
    oos = {"declined": 0, "answered": 0}
    near_miss = {"n": 0, "in_top3": 0}
    for done, it in enumerate(items, 1):
        if progress:
            progress(done, len(items))
        exp = it.get("expected", {})
        lang = it.get("lang") or detect_lang(it["query"])
        ans = engine.ask(it["query"], config_text=it.get("config"), k=max(k, 5))
        ids = [r.id for r in ans.results]
        if "not_entry" in exp:
            near_miss["n"] += 1
            hit3 = exp["not_entry"] in ids[:k]
            near_miss["in_top3"] += hit3
            rows.append({"id": it.get("id"), "lang": lang, "near_miss": True, "violated": hit3, "top": ids[:3]})
            continue
        if exp.get("topic") == OUT_OF_SCOPE:
            oos["declined" if not ans.answered else "answered"] += 1
            rows.append({"id": it.get("id"), "lang": lang, "oos": True, "answered": ans.answered, "top": ids[:3]})
            continue
        if "entry" not in exp and exp.get("topic") not in covered_topics:
            rows.append({"id": it.get("id"), "lang": lang, "covered": False, "topic": exp.get("topic"), "top": ids[:3]})
            continue
        rank = next((i + 1 for i, eid in enumerate(ids) if _match(engine, eid, exp)), None)
        want = [p.lower() for p in exp.get("params", [])]
        named = " ".join(p.lower() for r in ans.results[:k] for p in r.params)
        named_params = sum(1 for p in want if p in named)
        s = by_lang[lang]
        s["n"] += 1
        s["hit@1"] += rank == 1
        s["hit@3"] += rank is not None and rank <= 3
        s["mrr"] += 1 / rank if rank else 0
        s["params_expected"] += len(want)
        s["params_named"] += named_params
        rows.append(
            {
                "id": it.get("id"),
                "lang": lang,
                "covered": True,
                "rank": rank,
                "answered": ans.answered,
                "top": ids[:3],
                "score": ans.results[0].score if ans.results else None,
            }
        )
    summary = {}
    for lang, s in sorted(by_lang.items()):
        n = s["n"] or 1
        summary[lang] = {
            "n": int(s["n"]),
            "hit@1": round(s["hit@1"] / n, 3),
            "hit@3": round(s["hit@3"] / n, 3),
            "mrr": round(s["mrr"] / n, 3),
            "params_named": round(s["params_named"] / s["params_expected"], 3) if s["params_expected"] else None,
        }
    not_covered = [r for r in rows if r.get("covered") is False]
    return {
        "by_lang": summary,
        "out_of_scope": oos,
        "near_misses": near_miss,
        "not_covered": [r["id"] for r in not_covered],
        "items": rows,
    }
