"""kb.index.load: an index is read only in the manifest format this code reads; anything else says how to fix it."""

import json
import shutil

import pytest

from kb.index.load import INDEX_FORMAT, IndexCorrupt, load_index
from tests.conftest import ENTRIES


@pytest.fixture()
def index(tmp_path, fake_index):
    """A private copy of the session's fake index (its `current` link is relative: the copy stands alone)."""
    path = tmp_path / "index"
    shutil.copytree(fake_index, path, symlinks=True)
    return path


def _set_format(index, value) -> None:
    manifest_path = index / "current" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if value is None:
        manifest.pop("format")
    else:
        manifest["format"] = value
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")


def test_the_writer_writes_the_format_the_reader_reads(index):
    assert load_index(index).manifest["format"] == INDEX_FORMAT


@pytest.mark.parametrize(
    "found, said",
    [(INDEX_FORMAT + 1, f"format {INDEX_FORMAT + 1}"), ("1", "format '1'"), (True, "format True"), (None, "no format")],
)
def test_another_format_is_refused_with_the_file_the_formats_and_the_fix(index, found, said):
    _set_format(index, found)
    with pytest.raises(IndexCorrupt) as e:
        load_index(index)
    msg = str(e.value)
    assert f"index manifest {index / 'current' / 'manifest.json'} has {said};" in msg
    assert said in msg and f"reads format {INDEX_FORMAT}" in msg and "`kb build`" in msg


def test_kb_build_fixes_it(index):
    from indexer.build import build_index

    _set_format(index, INDEX_FORMAT + 1)
    with pytest.raises(IndexCorrupt):
        load_index(index)
    build_index(index, ENTRIES, embedder_spec="fake")  # what the message says to run
    assert load_index(index).manifest["format"] == INDEX_FORMAT
