import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DS_ACCELERATOR", "cpu")


@pytest.fixture(scope="session")
def registry():
    from kb.registry import Registry

    return Registry.load(ROOT / "data" / "registry")


@pytest.fixture(scope="session")
def entries():
    from kb.entries import load_entries

    return load_entries(ROOT / "data" / "entries")


def shared_file(rel: str) -> Path:
    """A file on the team's reference shelf; skip the test when the shelf is absent (a user's clone)."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"../shared/{rel} not present")
    return p


@pytest.fixture(scope="session")
def built_index(tmp_path_factory):
    """One real index (default embedder) for the whole session, built from the shipped entries."""
    from indexer.build import build_index

    path = tmp_path_factory.mktemp("index")
    build_index(path, ROOT / "data" / "entries")
    return path


@pytest.fixture(scope="session")
def engine(built_index):
    from kb.answer import Engine

    return Engine(
        index_path=built_index, entries_root=ROOT / "data" / "entries", auto_build=False, progress=lambda m: None
    )


@pytest.fixture()
def cli_env(built_index, monkeypatch):
    """CLI commands read $KB_INDEX: point them at the session index."""
    monkeypatch.setenv("KB_INDEX", str(built_index))
    return built_index
