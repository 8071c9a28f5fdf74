"""Loading the index artifacts written by ``indexer.build`` (the query path: no YAML, no pydantic)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.paths import entries_dir, index_dir

# the manifest format this code reads and indexer.build writes (its one home). A build of another format is
# refused with the command that rebuilds it.
INDEX_FORMAT = 1


class IndexError_(Exception):
    """Base for index problems; the message says what to run."""


class IndexMissing(IndexError_):
    pass


class IndexCorrupt(IndexError_):
    pass


class IndexStale(IndexError_):
    """The entries changed since the index was built (by content, not by file times)."""


@dataclass
class Index:
    path: Path
    manifest: dict[str, Any]
    units: list[dict[str, Any]]
    dense_rows: list[int]  # row in vectors/faiss -> unit number
    entries: dict[str, dict[str, Any]]
    faiss: Any
    bm25: Any
    unit_entry: list[str] = field(default_factory=list)

    @property
    def embedder_id(self) -> str:
        return self.manifest["embedder"]["id"]

    def is_stale(self, root: Path | None = None) -> bool:
        root = root or entries_dir()
        return self.manifest.get("entries_fingerprint") != entries_fingerprint(root)


def entries_fingerprint(root: Path) -> str:
    """Staleness by content: a hash of every entry file's name and bytes (a git checkout that only
    touches file times keeps the index; ~2 ms for 100 files)."""
    h = hashlib.sha1()
    for p in sorted(root.glob("*.yaml")):
        h.update(f"{p.name}\0".encode())
        h.update(hashlib.sha1(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def check_fresh(index: Index, root: Path) -> None:
    """Raise IndexStale when the entries under ``root`` differ from what ``index`` was built from."""
    if index.is_stale(root):
        raise IndexStale(f"index at {index.path} is older than the entries in {root}; run `kb build`")


def load_index(path: Path | None = None) -> Index:
    """Load ``index/current``. Raises IndexMissing / IndexCorrupt with the command that fixes it."""
    base = path or index_dir()
    cur = base / "current" if (base / "current").exists() or not (base / "manifest.json").exists() else base
    if not (cur / "manifest.json").exists():
        raise IndexMissing(f"no index at {cur}; run `kb build`")
    try:
        from kb.index.threads import load_bm25s, load_faiss

        load_faiss()  # before `import faiss`: its libgomp reads the wait policy and thread count once, when loaded
        load_bm25s()  # bm25s without scipy.sparse: ~0.1-0.2 s of a cold start the query path does not need
        import bm25s
        import faiss

        manifest = json.loads((cur / "manifest.json").read_text(encoding="utf-8"))
        _check_format(manifest, cur / "manifest.json")
        units = [json.loads(line) for line in (cur / "units.jsonl").read_text(encoding="utf-8").splitlines()]
        entries = {e["id"]: e for e in json.loads((cur / "entries.json").read_text(encoding="utf-8"))}
        index = faiss.read_index(str(cur / "dense.faiss"))
        bm = bm25s.BM25.load(str(cur / "bm25"), show_progress=False, mmap=False)
        dense_rows = [i for i, u in enumerate(units) if u["dense"]]
        if index.ntotal != len(dense_rows) or index.d != manifest["embedder"]["dim"]:
            raise ValueError(
                f"dense index has {index.ntotal}x{index.d}, manifest expects {len(dense_rows)}x{manifest['embedder']['dim']}"
            )
        if len(units) != manifest["units"]:
            raise ValueError(f"{len(units)} units on disk, manifest says {manifest['units']}")
        missing = {u["entry_id"] for u in units} - set(entries)
        if missing:
            raise ValueError(f"units refer to unknown entries {sorted(missing)[:3]}")
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as e:
        raise IndexCorrupt(f"index at {cur} is unreadable ({e}); rebuild it with `kb build --full`") from None
    return Index(cur, manifest, units, dense_rows, entries, index, bm, [u["entry_id"] for u in units])


def _check_format(manifest: Any, path: Path) -> None:
    """IndexCorrupt when the manifest is not of the format this code reads (a build by another kb version).

    ``kb build`` rebuilds it in full: it reuses a previous build only when the format is the same."""
    found = manifest.get("format") if isinstance(manifest, dict) else None
    if found != INDEX_FORMAT or isinstance(found, bool):
        said = "no format" if found is None else f"format {found!r}"
        raise IndexCorrupt(
            f"index manifest {path} has {said}; this kb reads format {INDEX_FORMAT}. Rebuild the index with `kb build`"
        )
