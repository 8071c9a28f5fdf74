"""Front ends and renamed arguments (figures, not tests): hit@1 / hit@3 of `kb ask` on tests/eval/frontends_heldout.yaml,
overall and by area, language, split and kind of expected answer, declines on the off-topic items, and every miss
with the top result.

    python bench/frontends_eval.py                    # every item
    python bench/frontends_eval.py --split heldout    # only the held-out items (never used to write entries or rules)
    python bench/frontends_eval.py --json             # one JSON object: figures, then every item's row

What counts as a hit at rank k (kb.ask.evaluate cannot score `expected.registry`, so it is scored here):
- ``{entry: ID}``: result k is that entry.
- ``{registry: ID, to?: NEW, package}``: result k is a registry-kind result that names ID or NEW (its id, or the id or
  name of one of its parameter facts), or an entry whose ``params`` list ID (not NEW: an entry that only uses the new
  name is not about the rename). ``ID`` may be a full registry id
  (``trl:GRPOConfig.vllm_device``) or a bare name as a user writes it (``vllm_device``); a bare name matches a registry
  id of the same package whose last segment is that name. A result is registry-kind when it says so
  id: ``kind == "registry"`` (kb.contract.Result.kind, ids ``registry:<record id>``, kb.ask.facts), or, for an engine
  older than that field, ``result_kind`` / ``area`` equal to "registry" or an id holding a colon (entry ids never do).
- ``{none: true}``: the answer declines (``answered: false``); these items are reported apart from the hit rates.
An in-scope item the engine declines is a miss at every k. Separately, for registry items: ``noted`` counts those whose
answer names the expected id in a note on the query's names (kb.ask.names), not a hit; ``release right`` counts the
registry-kind hits whose title, summary or why states the verified release (``expected.release``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EVAL_FILE = ROOT / "tests" / "eval" / "frontends_heldout.yaml"
K = 5  # results asked for; hit@1 and hit@3 are read from them
RESULT_PREFIX = "registry:"  # a registry-kind result's id: "registry:<record id>" (kb.ask.facts.PREFIX)
AREAS = ("trl", "vllm", "swift", "llamafactory", "axolotl", "rename", "other")
# the spellings a package goes by in registry ids and in users' words
PACKAGE_ALIASES = {
    "ms-swift": {"ms-swift", "ms_swift", "swift"},
    "llamafactory": {"llamafactory", "llama-factory", "llama_factory", "llamafactory-cli"},
    "deepspeed": {"deepspeed", "ds"},
}


def load_items(path: Path = EVAL_FILE, split: str = "all") -> list[dict[str, Any]]:
    from kb.ask.evaluate import load_eval

    items = load_eval(path)
    return [it for it in items if split == "all" or it.get("split") == split]


def expected_kind(expected: dict[str, Any]) -> str:
    if expected.get("none"):
        return "none"
    if "registry" in expected:
        return "registry"
    return "entry"


def _packages(package: str | None) -> set[str]:
    if not package:
        return set()
    p = package.lower()
    return PACKAGE_ALIASES.get(p, {p}) | {p}


def _last_segment(name: str) -> str:
    """``trl:GRPOConfig.vllm_device`` -> ``vllm_device``; ``cli/swift sft/--train_type`` -> ``train_type``."""
    tail = name.split(":", 1)[-1]
    for sep in ("/", "."):
        tail = tail.rsplit(sep, 1)[-1]
    return tail.lstrip("-").lower()


def name_matches(candidate: str | None, wanted: str, package: str | None) -> bool:
    """Whether a registry id (or name) a result carries stands for ``wanted`` (a registry id or a bare name)."""
    if not candidate or not wanted:
        return False
    c, w = candidate.strip().lower(), wanted.strip().lower()
    c, w = c.removeprefix(RESULT_PREFIX), w.removeprefix(RESULT_PREFIX)
    if c == w:
        return True
    if ":" in w:  # a full id: the candidate must be that id (a bare-named candidate: same package and last segment)
        if ":" in c:
            return False
        w_pkg, _ = w.split(":", 1)
        return _last_segment(c) == _last_segment(w) and (not package or w_pkg in _packages(package))
    # a bare name, as a user writes it
    if ":" in c:
        c_pkg = c.split(":", 1)[0]
        if package and c_pkg not in _packages(package):
            return False
    return _last_segment(c) == _last_segment(w)


def _wanted(expected: dict[str, Any]) -> list[str]:
    return [n for n in (expected.get("registry"), expected.get("to")) if n]


def is_registry_result(result: Any) -> bool:
    for attr in ("kind", "result_kind", "area"):
        if str(getattr(result, attr, "") or "").lower() == "registry":
            return True
    return ":" in str(getattr(result, "id", ""))


def result_names(result: Any) -> list[str]:
    """Every registry id a result carries: a registry-kind result's own id, its facts' ids and spellings' ids, and its
    params; an entry's params."""
    names: list[str] = []
    if is_registry_result(result):
        names.append(result.id)
        for pf in getattr(result, "param_facts", None) or []:  # ids only: a fact's bare name could be another record's
            names.extend(n for n in [getattr(pf, "id", None)] if n)
            names.extend(s.id for s in getattr(pf, "spellings", None) or [])
    names.extend(getattr(result, "params", None) or [])
    return names


def result_hits(result: Any, expected: dict[str, Any]) -> bool:
    """A registry-kind result hits when it names the expected id or its new name (``to``: the record of the new spelling
    carries the rename); an entry hits only when its params list the expected id itself (an entry that merely uses the
    new name, per_device_train_batch_size say, is not about the old one)."""
    kind = expected_kind(expected)
    if kind == "entry":
        return not is_registry_result(result) and result.id == expected["entry"]
    if kind == "registry":
        package = expected.get("package")
        wanted = _wanted(expected) if is_registry_result(result) else [expected["registry"]]
        return any(name_matches(n, w, package) for n in result_names(result) for w in wanted)
    return False


def noted(answer: Any, expected: dict[str, Any]) -> bool:
    """The answer's notes on the query's names point at the expected registry id (or its new name)."""
    package = expected.get("package")
    for note in getattr(answer, "notes", None) or []:
        cands = [getattr(note, "registry_id", None), *(getattr(note, "suggestions", None) or [])]
        if any(name_matches(c, w, package) for c in cands if c for w in _wanted(expected)):
            return True
    return False


def score_item(answer: Any, item: dict[str, Any]) -> dict[str, Any]:
    """One item's row: the rank of the first hit (None: no hit in the results), the top result, declined or not."""
    exp = item.get("expected") or {}
    kind = expected_kind(exp)
    results = list(answer.results) if answer.answered else []
    top = [r.id for r in results[:3]]
    closest = [c.id for c in getattr(answer, "closest", None) or []][:3]
    row: dict[str, Any] = {
        "id": item.get("id"),
        "lang": item.get("lang"),
        "area": item.get("area"),
        "split": item.get("split"),
        "kind": kind,
        "answered": bool(answer.answered),
        "top": top,
        "top_score": round(results[0].score, 3) if results else None,
        "closest": closest if not answer.answered else [],
    }
    if kind == "none":
        row["declined"] = not answer.answered
        return row
    row["rank"] = next((i + 1 for i, r in enumerate(results) if result_hits(r, exp)), None)
    if kind == "registry":
        row["noted"] = noted(answer, exp)
        row["release_ok"] = release_ok(results[row["rank"] - 1], exp) if row["rank"] else None
    return row


def release_ok(result: Any, expected: dict[str, Any]) -> bool | None:
    """A registry-kind hit states the verified release (``expected.release``) in its title, summary or why; None when
    the item has no release or the hit is an entry (entries are not scored on it)."""
    rel = expected.get("release")
    if not rel or not is_registry_result(result):
        return None
    text = " ".join(str(getattr(result, f, "") or "") for f in ("title", "summary", "why"))
    return rel in text


def _rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r["kind"] != "none"]
    off = [r for r in rows if r["kind"] == "none"]
    out: dict[str, Any] = {"n": len(scored)}
    if scored:
        out["hit@1"] = round(sum(r["rank"] == 1 for r in scored) / len(scored), 3)
        out["hit@3"] = round(sum(r["rank"] is not None and r["rank"] <= 3 for r in scored) / len(scored), 3)
    reg = [r for r in scored if r["kind"] == "registry"]
    if reg:
        out["registry_noted"] = sum(r["noted"] for r in reg)
        out["registry_release_ok"] = sum(bool(r.get("release_ok")) for r in reg)
    if off:
        out["none"] = {"n": len(off), "declined": sum(r["declined"] for r in off)}
    return out


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def group(key: str) -> dict[str, Any]:
        g: dict[str, list] = defaultdict(list)
        for r in rows:
            g[str(r[key])].append(r)
        return {k: _rates(v) for k, v in sorted(g.items())}

    return {
        "all": _rates(rows),
        "by_area": group("area"),
        "by_lang": group("lang"),
        "by_split": group("split"),
        "by_kind": group("kind"),
    }


def counts(items: list[dict[str, Any]]) -> dict[str, Any]:
    """How many items by area, language, split and kind of expected answer (and area x kind)."""
    out: dict[str, dict[str, int]] = {"area": {}, "lang": {}, "split": {}, "kind": {}, "area_kind": {}}
    for it in items:
        kind = expected_kind(it.get("expected") or {})
        for key, val in (
            ("area", it.get("area")),
            ("lang", it.get("lang")),
            ("split", it.get("split")),
            ("kind", kind),
        ):
            out[key][str(val)] = out[key].get(str(val), 0) + 1
        ak = f"{it.get('area')}/{kind}"
        out["area_kind"][ak] = out["area_kind"].get(ak, 0) + 1
    return {k: dict(sorted(v.items())) for k, v in out.items()}


def evaluate(engine, items: list[dict[str, Any]], progress=None) -> dict[str, Any]:
    rows = []
    for done, it in enumerate(items, 1):
        answer = engine.ask(it["query"], config_text=it.get("config"), k=K)
        rows.append(score_item(answer, it))
        if progress:
            progress(done, len(items))
    return {"counts": counts(items), "figures": figures(rows), "items": rows}


def misses(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows not hit at rank 1 (in-scope) or not declined (off-topic), in area order."""
    bad = [r for r in rows if (r["kind"] == "none" and not r["declined"]) or (r["kind"] != "none" and r["rank"] != 1)]
    order = {a: i for i, a in enumerate(AREAS)}
    return sorted(bad, key=lambda r: (order.get(r["area"], len(order)), r["id"]))


def open_engine():
    """The shipped index, built or updated by content (as the CLI does), with the default registry."""
    from indexer.build import ensure_index
    from kb.ask.engine import Engine

    ensure_index(on_start=lambda why: print(f"building the index ({why}) ...", file=sys.stderr))
    return Engine()


def _fmt(rates: dict[str, Any]) -> str:
    parts = [f"n {rates['n']}"]
    if rates["n"]:
        parts.append(f"hit@1 {rates['hit@1']:.3f}  hit@3 {rates['hit@3']:.3f}")
    if "registry_noted" in rates:
        parts.append(f"registry noted {rates['registry_noted']}, release right {rates['registry_release_ok']}")
    if "none" in rates:
        parts.append(f"declined {rates['none']['declined']}/{rates['none']['n']}")
    return "  ".join(parts)


def print_report(rep: dict[str, Any], items: list[dict[str, Any]]) -> None:
    fig = rep["figures"]
    print(f"items: {len(items)}  " + "  ".join(f"{k} {v}" for k, v in rep["counts"].items() if k != "area_kind"))
    print("all:", _fmt(fig["all"]))
    for key in ("by_area", "by_lang", "by_split", "by_kind"):
        print(f"{key}:")
        for name, rates in fig[key].items():
            print(f"  {name:<13} {_fmt(rates)}")
    queries = {it["id"]: it for it in items}
    bad = misses(rep["items"])
    print(f"misses ({len(bad)}):")
    for r in bad:
        it = queries[r["id"]]
        exp = it["expected"]
        want = "decline" if r["kind"] == "none" else exp.get("entry") or " | ".join(_wanted(exp))
        got = r["top"][:1] or ["(declined; closest: " + ", ".join(r["closest"] or ["-"]) + ")"]
        rank = "" if r["kind"] == "none" else f" rank {r['rank']}"
        print(
            f"  [{r['area']}] {r['id']} {r['lang']} {r['split']}{rank}: want {want}; top {got[0]}"
            + (f" ({r['top_score']})" if r["top_score"] is not None else "")
            + ("  [noted]" if r.get("noted") else "")
        )
        print(f"      {it['query'][:140]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=("heldout", "dev", "all"), default="all")
    ap.add_argument("--file", type=Path, default=EVAL_FILE, help="the question file (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the text report")
    a = ap.parse_args(argv)
    items = load_items(a.file, a.split)
    engine = open_engine()
    rep = evaluate(engine, items, progress=lambda d, n: print(f"\revaluating: {d}/{n}", end="", file=sys.stderr))
    print(file=sys.stderr)
    if a.json:
        print(json.dumps({"split": a.split, **rep}, ensure_ascii=False, indent=1))
    else:
        print_report(rep, items)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
