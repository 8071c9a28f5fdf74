import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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
