"""Where kb finds its data: ``$KB_DATA`` or the ``data/`` folder beside the package."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    env = os.environ.get("KB_DATA")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "data"


def entries_dir() -> Path:
    return data_dir() / "entries"


def registry_dir() -> Path:
    return data_dir() / "registry"


def index_dir() -> Path:
    env = os.environ.get("KB_INDEX")
    return Path(env) if env else data_dir().parent / "index"
