"""What the index is made of: an entry's units (title, summary, symptoms, fixes, myths, signatures, parameter
names), each with a content hash, and the shipped vectors of those units (data/embeddings/<embedder>.npz).

Read-side code: the indexer (indexer/build.py) builds from these, and ``kb check`` (CHK012) checks that the shipped
vectors cover exactly the shipped entries' units, so a fresh clone's first ``kb ask`` embeds nothing."""

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


def vector_cache_path(embedder_id: str) -> Path:
    """data/embeddings/<embedder id>.npz: the vectors of the shipped entries' units, keyed by content hash."""
    return data_dir() / "embeddings" / (re.sub(r"[^A-Za-z0-9._-]+", "_", embedder_id) + ".npz")


def load_vector_cache(embedder_id: str) -> dict[str, np.ndarray]:
    import numpy as np

    path = vector_cache_path(embedder_id)
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["embedder"]) != embedder_id:
                return {}
            return {h: v for h, v in zip(z["hashes"].tolist(), z["vectors"], strict=True)}
    except (OSError, KeyError, ValueError):
        return {}  # no cache (or an unreadable one): everything is embedded, nothing breaks


def shipped_caches() -> dict[str, dict[str, np.ndarray]]:
    """Every vector cache in data/embeddings/, by the embedder id it was written for."""
    import numpy as np

    out: dict[str, dict[str, np.ndarray]] = {}
    for path in sorted((data_dir() / "embeddings").glob("*.npz")):
        try:
            with np.load(path, allow_pickle=False) as z:
                out[str(z["embedder"])] = {h: v for h, v in zip(z["hashes"].tolist(), z["vectors"], strict=True)}
        except (OSError, KeyError, ValueError):
            out[path.name] = {}
    return out
