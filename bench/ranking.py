"""Ranking snapshots (figures, not tests): hit@1 / hit@3 and off-topic declines on the held-out sets, with each
question's top five entry ids, so that a change to the ranking can be compared question by question.

    python bench/ranking.py --out before.json                    # snapshot of today's ranking
    python bench/ranking.py --compare before.json                # figures now, and every question whose top 5 moved
    python bench/ranking.py --ablate                             # each adjustment of kb.ask.rank switched off in turn

Sets: tests/eval/heldout.yaml (in scope), tests/eval/out_of_scope.yaml and tests/eval/out_of_scope_2.yaml (must be
declined; the second was written before any rule was revisited and no rule was written from it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SETS = {
    "heldout": ROOT / "tests/eval/heldout.yaml",
    "off_topic": ROOT / "tests/eval/out_of_scope.yaml",
    "off_topic_2": ROOT / "tests/eval/out_of_scope_2.yaml",
}


def snapshot(engine, k: int = 5) -> dict:
    from kb.ask.evaluate import load_eval

    out: dict = {}
    for name, path in SETS.items():
        rows = []
        for it in load_eval(path):
            a = engine.ask(it["query"], k=k)
            ids = [r.id for r in a.results] if a.answered else [c.id for c in a.closest]
            top = a.results[0].score if a.answered and a.results else (a.closest[0].score if a.closest else 0.0)
            rows.append(
                {
                    "id": it["id"],
                    "lang": it.get("lang"),
                    "expected": (it.get("expected") or {}).get("entry"),
                    "answered": a.answered,
                    "top5": ids[:5],
                    "score": top,
                }  # fmt: skip
            )
        out[name] = rows
    return out


def figures(snap: dict) -> dict:
    f: dict = {}
    rows = snap["heldout"]
    for lang in ("all", "en", "zh"):
        rs = [r for r in rows if lang == "all" or r["lang"] == lang]
        hit1 = sum(r["answered"] and r["top5"][:1] == [r["expected"]] for r in rs)
        hit3 = sum(r["answered"] and r["expected"] in r["top5"][:3] for r in rs)
        f[f"heldout_{lang}"] = {"n": len(rs), "hit@1": round(hit1 / len(rs), 3), "hit@3": round(hit3 / len(rs), 3)}
    for name in ("off_topic", "off_topic_2"):
        rs = snap[name]
        f[name] = {"n": len(rs), "declined": round(sum(not r["answered"] for r in rs) / len(rs), 3)}
    return f


def open_engine():
    from indexer.build import build_index
    from kb.ask.engine import Engine

    path = Path(tempfile.mkdtemp(prefix="kb-rank-")) / "index"
    build_index(path, ROOT / "data/entries")
    return Engine(index_path=path, entries_root=ROOT / "data/entries")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the snapshot (figures and every question's top 5) here")
    ap.add_argument("--compare", type=Path, help="a snapshot to compare with: figures and moved questions")
    ap.add_argument("--ablate", action="store_true", help="switch off each adjustment of kb.ask.rank in turn")
    a = ap.parse_args()
    engine = open_engine()
    snap = snapshot(engine)
    fig = figures(snap)
    print(json.dumps(fig, indent=1))
    if a.out:
        a.out.write_text(json.dumps({"figures": fig, "snapshot": snap}, ensure_ascii=False, indent=1))
    if a.compare:
        old = json.loads(a.compare.read_text())
        print("before:", json.dumps(old["figures"]))
        for name, rows in snap.items():
            before = {r["id"]: r for r in old["snapshot"].get(name, [])}
            for r in rows:
                b = before.get(r["id"])
                if b and (b["top5"] != r["top5"] or b["answered"] != r["answered"]):
                    print(f"{name} {r['id']}: {b['answered']} {b['top5']} -> {r['answered']} {r['top5']}")
    if a.ablate:
        from kb.ask import rank

        rows = []
        for adj in rank.ADJUSTMENTS:
            with rank.disabled(adj.name):
                f = figures(snapshot(engine))
            rows.append((adj.name, f))
            print(adj.name, json.dumps(f))


if __name__ == "__main__":
    main()
