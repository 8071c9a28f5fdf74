"""Retrieval benchmarks (figures, not tests): cold `kb ask` and warm queries, idle and with every core busy,
where cold-start time goes, a 100k-unit index, builds.

    python bench/retrieval.py [--skip-st] [--synthetic-units 100000]     # everything
    python bench/retrieval.py --load-only [--runs 7] [--kb-root DIR]     # cold/warm, idle vs loaded
    python bench/retrieval.py --cold-profile [--kb-root DIR]             # where a cold `kb ask` spends its time

Targets (issue 3, 2-core machine): cold `kb ask` <= 1.0 s idle and <= 2x that with both cores busy;
warm p50 <= 5 ms / p99 <= 20 ms on the shipped KB, p50 <= 30 ms at 100k units; incremental rebuild of
one changed entry <= 3 s. Figures are min / median / max over runs: quote the median.

The load section starts one CPU burner per core (``python -c "while True: pass"``) and always stops
them (also on Ctrl-C, SIGTERM or an error). Children run without OMP_* / GOMP_* variables so that
kb's own thread settings are measured (``--keep-omp-env`` keeps yours). ``--kb-root DIR`` runs the kb
of another checkout (e.g. a copy of the code before a change) against the same index, for before/after.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
KB = str(Path(sys.executable).with_name("kb"))
COLD_QUERY = "zero3 oom first step"
TARGET_COLD_S = 1.0


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def spread(xs: list[float], nd: int = 3) -> str:
    """min / median / max."""
    return f"{min(xs):.{nd}f} / {statistics.median(xs):.{nd}f} / {max(xs):.{nd}f}"


def queries() -> list[str]:
    from kb.ask.evaluate import load_eval
    from kb.content.entries import load_entries

    qs = [q for le in load_entries(ROOT / "data/entries") for _, q in le.entry.queries.all()]
    qs += [i["query"] for i in load_eval(ROOT / "tests/eval/heldout.yaml")]
    return qs


# ------------------------------------------------------------------ CPU burners


_BURNERS: list[subprocess.Popen] = []


def _stop_burners() -> None:
    while _BURNERS:
        p = _BURNERS.pop()
        with contextlib.suppress(ProcessLookupError):
            p.kill()
        with contextlib.suppress(Exception):
            p.wait(timeout=5)


atexit.register(_stop_burners)


@contextlib.contextmanager
def burners(n: int) -> Iterator[None]:
    """``n`` busy-looping processes for the duration of the block; stopped whatever happens."""
    old_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):  # turn SIGTERM into an exception so that `finally` runs
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        for _ in range(n):
            _BURNERS.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        time.sleep(0.5)  # let them reach full speed
        yield
    finally:
        _stop_burners()
        signal.signal(signal.SIGTERM, old_term)


def loadavg() -> str:
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load average ?"


# ------------------------------------------------------------------ child processes


def child_env(index: Path, keep_omp: bool) -> dict[str, str]:
    env = {**os.environ, "KB_INDEX": str(index)}
    if not keep_omp:
        env = {k: v for k, v in env.items() if not k.startswith(("OMP_", "GOMP_"))}
    return env


def kb_cmd(kb_root: Path) -> list[str]:
    """The real `kb` console script, or the same entry point from another checkout."""
    if kb_root.resolve() == ROOT:
        return [KB]
    code = f"import sys; sys.path.insert(0, {str(kb_root)!r}); from cli.main import main; sys.exit(main())"
    return [sys.executable, "-c", code]


def cold(index: Path, runs: int = 5, kb_root: Path = ROOT, keep_omp: bool = False) -> dict:
    """A fresh process running `kb ask QUERY --json`: wall and CPU (user + system) seconds per run."""
    env = child_env(index, keep_omp)
    cmd = kb_cmd(kb_root) + ["ask", COLD_QUERY, "--json"]
    walls, cpus = [], []
    for i in range(runs + 1):  # the first run warms the page cache and is not counted
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, env=env, cwd=kb_root)
        wall = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode not in (0, 3):
            raise RuntimeError(f"kb ask failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
        if i == 0:
            top = json.loads(r.stdout)["results"][:1]
            continue
        walls.append(wall)
        cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return {"wall_s": walls, "cpu_s": cpus, "top": top[0]["id"] if top else None}


_WARM_CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from kb.ask.engine import Engine
qs = json.loads(Path(sys.argv[3]).read_text())
eng = Engine(index_path=Path(sys.argv[2]), entries_root=Path(sys.argv[1]) / "data" / "entries")
emb = eng.retriever.embedder
for q in qs[:5]:
    eng.ask(q)
total, embed = [], []
for q in qs:
    t = time.perf_counter(); eng.ask(q); total.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter(); emb.embed_queries([q]); embed.append((time.perf_counter() - t) * 1000)
print(json.dumps({"total_ms": total, "embed_ms": embed}))
"""


def warm_child(index: Path, qs: list[str], kb_root: Path = ROOT, keep_omp: bool = False) -> dict:
    """Warm queries in a fresh process (so that its libgomp starts from kb's settings)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(qs, f)
    try:
        r = subprocess.run(
            [sys.executable, "-c", _WARM_CHILD, str(kb_root), str(index), f.name],
            capture_output=True,
            text=True,
            env=child_env(index, keep_omp),
        )
    finally:
        os.unlink(f.name)
    if r.returncode:
        raise RuntimeError(f"warm child failed: {r.stderr[-2000:]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    tot, emb = d["total_ms"], d["embed_ms"]
    return {
        "n": len(tot),
        "p50_ms": round(statistics.median(tot), 2),
        "p99_ms": round(pct(tot, 0.99), 2),
        "embed_p50_ms": round(statistics.median(emb), 2),
    }


def load_section(index: Path, runs: int, kb_root: Path, keep_omp: bool, qs: list[str]) -> None:
    """Cold and warm, idle and with every core busy, against the targets."""
    ncpu = os.cpu_count() or 1
    omp = {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_", "KB_THREADS"))}
    print(f"kb from {kb_root}; index {index}; children's OMP env: {omp if keep_omp else 'none (kb defaults)'}")
    res: dict[str, dict] = {}
    for label in ("idle", "loaded"):
        ctx = burners(ncpu) if label == "loaded" else contextlib.nullcontext()
        before = loadavg()
        with ctx:
            c = cold(index, runs, kb_root, keep_omp)
            w = warm_child(index, qs, kb_root, keep_omp)
        res[label] = c
        note = f"{ncpu} burners" if label == "loaded" else f"no burners; {before} before"
        print(f"  {label:6} ({note})")
        print(
            f"    cold kb ask wall s (min / median / max of {runs}): {spread(c['wall_s'])}   cpu s: {spread(c['cpu_s'])}"
        )
        print(
            f"    warm Engine.ask p50 / p99: {w['p50_ms']} / {w['p99_ms']} ms (n={w['n']}), embedding p50 {w['embed_p50_ms']} ms"
        )
    idle, loaded = (statistics.median(res[k]["wall_s"]) for k in ("idle", "loaded"))
    print(
        f"  targets: cold idle {idle:.2f} s vs <= {TARGET_COLD_S:.1f} s ({'met' if idle <= TARGET_COLD_S else 'MISSED'}); "
        f"loaded {loaded:.2f} s = {loaded / idle:.2f}x idle vs <= 2x ({'met' if loaded <= 2 * idle else 'MISSED'})"
    )


# ------------------------------------------------------------------ where cold start goes

_PROFILE_CHILD = r"""
import json, sys, time
T0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from pathlib import Path
index = Path(sys.argv[2])
out = []
def step(name, t):
    out.append((name, round((time.perf_counter() - t) * 1000, 1)))
t = time.perf_counter(); import numpy; step("import numpy", t)
HAS_THREADS = (Path(sys.argv[1]) / "kb" / "index" / "threads.py").exists()  # (the editable install would find ours)
t = time.perf_counter()
if HAS_THREADS:
    from kb.index.threads import load_faiss
    load_faiss()
else:
    import faiss
step("import faiss", t)
t = time.perf_counter()
if HAS_THREADS:
    from kb.index.threads import load_bm25s
    load_bm25s()
    step("import bm25s (kb.index.threads.load_bm25s: no scipy.sparse)", t)
else:
    import bm25s
    step("import bm25s (with scipy.sparse, tqdm)", t)
import bm25s
t = time.perf_counter(); import kb.ask.engine; step("import kb.ask.engine (rest: kb modules, yaml, pydantic?)", t)
t = time.perf_counter(); import cli.main; step("import cli.main (click)", t)
t = time.perf_counter(); import indexer.build; step("import indexer.build (CLI: ensure_index)", t)
import faiss
cur = index / "current" if (index / "current").exists() else index
t = time.perf_counter(); units = [json.loads(l) for l in (cur / "units.jsonl").read_text(encoding="utf-8").splitlines()]; step("json: units.jsonl", t)
t = time.perf_counter(); ents = json.loads((cur / "entries.json").read_text(encoding="utf-8")); step("json: entries.json", t)
t = time.perf_counter(); faiss.read_index(str(cur / "dense.faiss")); step("faiss.read_index", t)
t = time.perf_counter(); bm25s.BM25.load(str(cur / "bm25"), show_progress=False, mmap=False); step("bm25s load", t)
from kb.index.load import load_index
t = time.perf_counter(); idx = load_index(index); step("load_index (all of the above loads)", t)
from kb.index.embedders import embedder_for_id
t = time.perf_counter(); emb = embedder_for_id(idx.embedder_id); step("embedder load", t)
from kb.ask.retrieve import Retriever
t = time.perf_counter(); Retriever(idx, emb); step("Retriever init", t)
from kb.ask.engine import Engine
t = time.perf_counter(); eng = Engine(index_path=index, entries_root=Path(sys.argv[1]) / "data" / "entries"); step("Engine() (load_index again + embedder + registry)", t)
t = time.perf_counter(); ans = eng.ask("zero3 oom first step"); step("first ask", t)
t = time.perf_counter(); eng.ask("zero3 oom first step"); step("second ask", t)
t = time.perf_counter()
from kb.present import render_answer
step("import kb.present (render)", t)
t = time.perf_counter(); json.dumps(ans.to_dict() if hasattr(ans, "to_dict") else ans); step("to_dict + json", t)
step("total in-process", T0)
print(json.dumps(out))
"""


def cold_profile(index: Path, kb_root: Path, keep_omp: bool, runs: int = 3) -> None:
    env = child_env(index, keep_omp)
    steps: dict[str, list[float]] = {}
    for _ in range(runs):
        r = subprocess.run(
            [sys.executable, "-c", _PROFILE_CHILD, str(kb_root), str(index)], capture_output=True, text=True, env=env
        )
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        for name, ms in json.loads(r.stdout.strip().splitlines()[-1]):
            steps.setdefault(name, []).append(ms)
    bare = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append((time.perf_counter() - t0) * 1000)
    print(f"  {'python -c pass (interpreter start + site)':58} {statistics.median(bare):7.1f} ms")
    for name, xs in steps.items():
        print(f"  {name:58} {statistics.median(xs):7.1f} ms")
    # python -X importtime of the real command: the slowest top-level imports (cumulative)
    r = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "import sys; from cli.main import main; sys.exit(main())",
            "ask",
            COLD_QUERY,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=kb_root,
    )
    rows = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cum, name = line[len("import time:") :].split("|")
        if cum.strip().isdigit() and not name[1:].startswith(" "):  # depth 0: imported by the command itself
            rows.append((int(cum) / 1000, name.strip()))
    rows.sort(reverse=True)
    print("  python -X importtime, `kb ask --json`, top-level packages by cumulative ms:")
    print("   ", ", ".join(f"{n} {ms:.0f}" for ms, n in rows[:14]))


# ------------------------------------------------------------------ the rest


def warm(engine, qs: list[str], passes: int = 2) -> dict:
    for q in qs[:5]:
        engine.ask(q)
    total, embed = [], []
    emb = engine.retriever.embedder
    for _ in range(passes):
        for q in qs:
            t = time.perf_counter()
            engine.ask(q)
            total.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            emb.embed_queries([q])
            embed.append((time.perf_counter() - t) * 1000)
    rest = [t - e for t, e in zip(total, embed, strict=True)]
    return {
        "n": len(total),
        "p50_ms": round(statistics.median(total), 2),
        "p99_ms": round(pct(total, 0.99), 2),
        "embed_p50_ms": round(statistics.median(embed), 2),
        "rest_p50_ms": round(statistics.median(rest), 2),
    }


def st_import() -> float | None:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "import sentence_transformers"], capture_output=True)
    return round(time.perf_counter() - t, 2) if r.returncode == 0 else None


def builds(tmp: Path) -> dict:
    from indexer.build import build_index

    entries = tmp / "entries"
    shutil.copytree(ROOT / "data/entries", entries)
    idx = tmp / "index"
    full = build_index(idx, entries)
    p = entries / "tie-weights-not-a-memory-fix.yaml"
    p.write_text(
        p.read_text().replace("symptoms:\n  en:\n", "symptoms:\n  en:\n    - bench changed this phrasing\n", 1)
    )
    t = time.perf_counter()
    inc = build_index(idx, entries)
    inc_s = time.perf_counter() - t
    return {
        "full_build_s": round(full.seconds, 2),
        "full_units_embedded": full.embedded,
        "incremental_build_s": round(inc_s, 2),
        "incremental_units_embedded": inc.embedded,
    }


def synthetic(tmp: Path, n_units: int, index: Path) -> dict:
    """An index of n_units: the shipped units replicated under new entry ids, random unit vectors
    (the query path's cost does not depend on what the vectors mean)."""
    import bm25s

    from indexer.build import make_dense_index
    from kb.ask.engine import Engine
    from kb.ask.text import tokenize
    from kb.index.load import load_index
    from kb.index.threads import load_faiss

    faiss = load_faiss()
    base = load_index(index)
    copies = max(1, n_units // len(base.units))
    out = tmp / "synthetic" / "current"
    out.mkdir(parents=True)
    units, entries = [], []
    for c in range(copies):
        for u in base.units:
            units.append({**u, "entry_id": f"{u['entry_id']}~{c}" if c else u["entry_id"]})
        for e in base.entries.values():
            entries.append({**e, "id": f"{e['id']}~{c}" if c else e["id"]})
    rng = np.random.default_rng(0)
    dim = base.manifest["embedder"]["dim"]
    n_dense = sum(u["dense"] for u in units)
    vecs = rng.standard_normal((n_dense, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    faiss.omp_set_num_threads(os.cpu_count() or 1)  # building HNSW: all cores (this thread only)
    faiss.write_index(make_dense_index(vecs), str(out / "dense.faiss"))
    bm = bm25s.BM25()
    bm.index([tokenize(u["text"]) or [""] for u in units], show_progress=False)
    bm.save(str(out / "bm25"), show_progress=False)
    (out / "units.jsonl").write_text("".join(json.dumps(u, ensure_ascii=False) + "\n" for u in units))
    (out / "entries.json").write_text(json.dumps(entries, ensure_ascii=False))
    (out / "manifest.json").write_text(json.dumps({**base.manifest, "units": len(units)}))
    eng = Engine(index_path=out, check_stale=False)
    res = warm(eng, queries()[:60], passes=1)
    res["units"] = len(units)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic-units", type=int, default=100_000)
    ap.add_argument("--skip-st", action="store_true", help="skip timing `import sentence_transformers`")
    ap.add_argument("--load-only", action="store_true", help="only cold/warm, idle and with every core busy")
    ap.add_argument("--cold-profile", action="store_true", help="only: where a cold `kb ask` spends its time")
    ap.add_argument("--runs", type=int, default=7, help="cold runs per condition (default 7)")
    ap.add_argument("--index", type=Path, default=None, help="index to query (default: index/, built first)")
    ap.add_argument("--kb-root", type=Path, default=ROOT, help="checkout whose kb runs the cold/warm children")
    ap.add_argument("--warm-queries", type=int, default=0, help="warm: the first N held-out queries (default all)")
    ap.add_argument("--keep-omp-env", action="store_true", help="pass your OMP_*/GOMP_* variables to the children")
    a = ap.parse_args()
    index = a.index or ROOT / "index"
    if a.index is None:
        subprocess.run([KB, "build", "--index", str(index)], check=True, capture_output=True)
    print("machine:", os.cpu_count(), "cores;", loadavg())
    if a.cold_profile:
        cold_profile(index, a.kb_root, a.keep_omp_env)
        return
    from kb.ask.evaluate import load_eval

    heldout = [i["query"] for i in load_eval(ROOT / "tests/eval/heldout.yaml")][: a.warm_queries or None]
    print("cold and warm, idle vs every core busy:")
    load_section(index, a.runs, a.kb_root, a.keep_omp_env, heldout)
    if a.load_only:
        return
    print("where cold start goes:")
    cold_profile(index, a.kb_root, a.keep_omp_env)
    from kb.ask.engine import Engine

    eng = Engine(index_path=index)
    print(eng.index.embedder_id, f"{len(eng.index.entries)} entries, {len(eng.index.units)} units")
    print("warm, shipped KB, all entry + held-out queries:", warm(eng, queries()))
    if not a.skip_st:
        s = st_import()
        if s:
            print(f"import sentence_transformers: {s} s")
    with tempfile.TemporaryDirectory() as d:
        print("builds:", builds(Path(d)))
        print(f"warm, synthetic {a.synthetic_units} units:", synthetic(Path(d), a.synthetic_units, index))


if __name__ == "__main__":
    main()
