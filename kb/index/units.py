"""What the index is made of: an entry's units (title, summary, symptoms, fixes, myths, signatures, parameter
names), each with a content hash, and the shipped vectors of those units: one file per entry,
data/embeddings/<embedder>/<entry id>.npy, so that an entry edit changes one file.

Read-side code only: the indexer (indexer/build.py) builds from these and writes the files, and ``kb check``
(CHK012) checks that they cover exactly the shipped entries' units, so a fresh clone's first ``kb ask`` embeds
nothing."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from kb.content.entries import Entry
from kb.paths import data_dir


@dataclass(frozen=True)
class Unit:
    entry_id: str
    kind: str  # title | summary | symptom | signature | fix | myth | params
    lang: str  # en | zh | any
    text: str
    dense: bool = True  # embedded as well as indexed lexically

    @property
    def hash(self) -> str:
        return hashlib.sha1(f"{self.kind}\0{self.lang}\0{self.text}".encode()).hexdigest()[:16]


def signature_text(pattern: str) -> str:
    """A regex signature as plain words (for embedding / BM25): drop escapes and regex syntax."""
    s = re.sub(r"\\([^\w\s])", r"\1", pattern)
    s = re.sub(r"\(\?:|\(\?i\)|[\^$()|?*+\[\]{}]|\\[dswbDSWB]", " ", s)
    return re.sub(r"\s+", " ", s).strip()


def entry_units(e: Entry) -> list[Unit]:
    u: list[Unit] = []
    for lang in ("en", "zh"):
        u.append(Unit(e.id, "title", lang, e.title.get(lang)))
        u.append(Unit(e.id, "summary", lang, e.summary.get(lang)))
        u.extend(Unit(e.id, "symptom", lang, s) for s in getattr(e.symptoms, lang))
        u.extend(Unit(e.id, "fix", lang, f.title.get(lang)) for f in e.fixes)
        u.extend(Unit(e.id, "myth", lang, m.claim.get(lang)) for m in e.myths)
    u.extend(Unit(e.id, "signature", "any", signature_text(s.pattern)) for s in e.signatures)
    names = [rid.split(":", 1)[1].split("/")[-1] for rid in e.all_params()]
    names += [n.name for m in e.myths for n in m.names]
    if names:
        u.append(Unit(e.id, "params", "any", " ".join(dict.fromkeys(names)), dense=False))
    return u


def entry_hash(units: list[Unit]) -> str:
    h = hashlib.sha1()
    for x in units:
        h.update(x.hash.encode())
    return h.hexdigest()[:16]


VECTOR_SUFFIX = ".npy"
EMBEDDER_FILE = "embedder.txt"  # in each embedder's folder: the embedder id the vectors were made with


def vectors_dir(embedder_id: str) -> Path:
    """data/embeddings/<embedder id>/: one ``<entry id>.npy`` per shipped entry, holding its units' vectors."""
    return data_dir() / "embeddings" / re.sub(r"[^A-Za-z0-9._-]+", "_", embedder_id)


def vector_file(embedder_id: str, entry_id: str) -> Path:
    return vectors_dir(embedder_id) / f"{entry_id}{VECTOR_SUFFIX}"


def vector_dtype(dim: int) -> np.dtype:
    """One row per unit: its content hash (16 hex digits) and its float32 vector; rows sorted by hash."""
    import numpy as np

    return np.dtype([("hash", "S16"), ("vector", "<f4", (dim,))])


def read_vector_file(path: Path) -> dict[str, np.ndarray]:
    """An entry's vector file as {unit hash: vector}. OSError / ValueError when it is missing or not one."""
    import numpy as np

    rows = np.load(path, allow_pickle=False)
    shape = rows.dtype["vector"].shape if rows.dtype.names == ("hash", "vector") else ()
    if rows.ndim != 1 or len(shape) != 1 or rows.dtype != vector_dtype(shape[0]):
        raise ValueError(f"{path}: not a vector file (dtype {rows.dtype}, shape {rows.shape})")
    return dict(zip(rows["hash"].astype("U16").tolist(), rows["vector"], strict=True))


def folder_embedder(folder: Path) -> str | None:
    """The embedder id a vector folder was written for (its embedder.txt); None when it has none."""
    try:
        return (folder / EMBEDDER_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def load_vector_cache(embedder_id: str) -> dict[str, np.ndarray]:
    """The shipped vectors for ``embedder_id``, all entries' files together, by unit hash.

    A missing folder, one written for another embedder or an unreadable file leaves those units out: they are
    embedded, nothing breaks."""
    folder = vectors_dir(embedder_id)
    if folder_embedder(folder) != embedder_id:
        return {}
    out: dict[str, np.ndarray] = {}
    for path in sorted(folder.glob("*" + VECTOR_SUFFIX)):
        try:
            out.update(read_vector_file(path))
        except (OSError, ValueError):
            continue
    return out


@dataclass
class VectorFolder:
    """One folder of data/embeddings/ as found: what ``kb check`` (CHK012) compares with the entries."""

    path: Path
    embedder: str | None  # from embedder.txt; None: the folder has none
    files: dict[str, dict[str, np.ndarray] | None]  # entry id -> {unit hash: vector}; None: unreadable
    other: list[Path]  # anything else in the folder (a left-over temp file, a stray file)


def shipped_vectors() -> tuple[list[VectorFolder], list[Path]]:
    """Every embedder folder in data/embeddings/, and whatever else lies there (e.g. the single-file cache
    ``<embedder>.npz`` of before the per-entry files)."""
    folders: list[VectorFolder] = []
    other: list[Path] = []
    root = data_dir() / "embeddings"
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if not path.is_dir():
            other.append(path)
            continue
        files: dict[str, dict[str, np.ndarray] | None] = {}
        stray: list[Path] = []
        for f in sorted(path.iterdir()):
            if f.name == EMBEDDER_FILE:
                continue
            if not (f.is_file() and f.name.endswith(VECTOR_SUFFIX)) or f.name.startswith("."):
                stray.append(f)
                continue
            try:
                files[f.name[: -len(VECTOR_SUFFIX)]] = read_vector_file(f)
            except (OSError, ValueError):
                files[f.name[: -len(VECTOR_SUFFIX)]] = None
        folders.append(VectorFolder(path, folder_embedder(path), files, stray))
    return folders, other
