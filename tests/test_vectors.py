"""The shipped vectors, one file per entry (data/embeddings/<embedder>/<entry id>.npy): an entry edit rewrites
that entry's file only, a deleted or withdrawn entry's file goes, writes are atomic, and `kb check` (CHK012)
names the entry of a missing or stale file.

Every test works on a temp data folder ($KB_DATA) with a few shipped entries and the fake embedder."""

import os
import shutil

import numpy as np
import pytest

from tests.conftest import ENTRIES

NAMES = [
    "zero3-single-gpu-no-offload",
    "nvme-offload-setup",
    "tie-weights-not-a-memory-fix",
    "accelerate-default-config-used",
    "activation-memory-seq-len",
]
EDITED = "zero3-single-gpu-no-offload"
OLD_SYMPTOM = "    - zero3 does not reduce GPU memory at all on one GPU\n"
NEW_SYMPTOM = "    - zero3 does not reduce GPU memory at all on one GPU, not even a little\n"


@pytest.fixture()
def data(tmp_path, monkeypatch):
    """A data folder with NAMES and their fake-embedder vector files, written by a first build."""
    from indexer.build import build_index

    d = tmp_path / "data"
    (d / "entries").mkdir(parents=True)
    for name in NAMES:
        shutil.copy(ENTRIES / f"{name}.yaml", d / "entries")
    monkeypatch.setenv("KB_DATA", str(d))
    build_index(tmp_path / "index", d / "entries", embedder_spec="fake", save_vectors=True)
    return d


def vector_files(d) -> dict[str, bytes]:
    from kb.index.embedders import get_embedder
    from kb.index.units import vectors_dir

    folder = vectors_dir(get_embedder("fake").id)
    assert folder.parent == d / "embeddings"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def rebuild(d, tmp_path):
    """What `kb build` does: save_vectors=None, so the files follow when the shipped entries are built."""
    from indexer.build import build_index

    return build_index(tmp_path / "index", d / "entries", embedder_spec="fake", save_vectors=None)


def test_one_file_per_entry_and_the_embedder_id(data):
    from kb.content.entries import load_entries
    from kb.index.embedders import get_embedder
    from kb.index.units import entry_units, read_vector_file

    files = vector_files(data)
    assert set(files) == {f"{n}.npy" for n in NAMES} | {"embedder.txt"}
    assert files["embedder.txt"].decode().strip() == get_embedder("fake").id
    for le in load_entries(data / "entries"):
        path = data / "embeddings" / "fake_1_128" / f"{le.entry.id}.npy"
        rows = np.load(path, allow_pickle=False)
        assert rows["vector"].dtype == np.float32 and rows["vector"].shape[1] == 128
        assert list(rows["hash"]) == sorted(rows["hash"])  # deterministic order
        got = read_vector_file(path)
        assert set(got) == {u.hash for u in entry_units(le.entry) if u.dense}
        for u in entry_units(le.entry):
            if u.dense:  # the vector of the unit's own text
                np.testing.assert_allclose(got[u.hash], get_embedder("fake").embed_passages([u.text])[0], atol=1e-6)


def test_an_entry_edit_changes_exactly_its_file(data, tmp_path):
    from kb.index.units import Unit, read_vector_file

    before = vector_files(data)
    path = data / "entries" / f"{EDITED}.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count(OLD_SYMPTOM) == 1
    path.write_text(text.replace(OLD_SYMPTOM, NEW_SYMPTOM), encoding="utf-8")
    rep = rebuild(data, tmp_path)
    after = vector_files(data)
    assert rep.embedded == 1 and rep.changed_entries == [EDITED]
    assert set(after) == set(before)
    assert [n for n in before if before[n] != after[n]] == [f"{EDITED}.npy"]
    got = read_vector_file(data / "embeddings" / "fake_1_128" / f"{EDITED}.npy")
    assert Unit(EDITED, "symptom", "en", NEW_SYMPTOM.strip()[2:]).hash in got
    assert Unit(EDITED, "symptom", "en", OLD_SYMPTOM.strip()[2:]).hash not in got
    # building again with nothing changed rewrites nothing
    mtimes = {p.name: p.stat().st_mtime_ns for p in (data / "embeddings" / "fake_1_128").iterdir()}
    rebuild(data, tmp_path)
    assert vector_files(data) == after
    assert {p.name: p.stat().st_mtime_ns for p in (data / "embeddings" / "fake_1_128").iterdir()} == mtimes


def test_deleting_or_withdrawing_an_entry_removes_its_file(data, tmp_path):
    before = vector_files(data)
    (data / "entries" / "nvme-offload-setup.yaml").unlink()
    withdrawn = data / "entries" / "tie-weights-not-a-memory-fix.yaml"
    withdrawn.write_text(
        withdrawn.read_text(encoding="utf-8") + "withdrawn:\n  date: 2025-01-01\n  reason: a test\n", encoding="utf-8"
    )
    rep = rebuild(data, tmp_path)
    assert rep.skipped == [] and rep.entries == len(NAMES) - 2
    after = vector_files(data)
    assert set(before) - set(after) == {"nvme-offload-setup.npy", "tie-weights-not-a-memory-fix.npy"}
    assert all(after[n] == before[n] for n in after)


def test_an_entry_that_does_not_load_keeps_its_file(data, tmp_path):
    before = vector_files(data)
    (data / "entries" / "nvme-offload-setup.yaml").write_text("id: nvme-offload-setup\narea: [\n", encoding="utf-8")
    rep = rebuild(data, tmp_path)
    assert rep.skipped and "nvme-offload-setup.yaml" in rep.skipped[0]
    assert vector_files(data) == before  # fixing the entry later embeds nothing


def test_other_entries_build_leaves_the_files_alone(data, tmp_path):
    from indexer.build import build_index

    before = vector_files(data)
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.copy(ENTRIES / f"{EDITED}.yaml", other)
    build_index(tmp_path / "index2", other, embedder_spec="fake", save_vectors=None)  # not the shipped entries
    assert vector_files(data) == before


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(data, monkeypatch):
    import indexer.build as b

    folder = data / "embeddings" / "fake_1_128"
    before = vector_files(data)

    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(b.os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        b._write_atomic(folder / f"{EDITED}.npy", b"half")
    assert vector_files(data) == before


def test_an_unreadable_file_is_embedded_again_not_fatal(data, tmp_path):
    from kb.index.embedders import get_embedder
    from kb.index.units import load_vector_cache

    n = len(load_vector_cache(get_embedder("fake").id))
    (data / "embeddings" / "fake_1_128" / f"{EDITED}.npy").write_bytes(b"not numpy")
    cache = load_vector_cache(get_embedder("fake").id)
    assert 0 < len(cache) < n
    rep = rebuild(data, tmp_path / "fresh")  # a fresh index: only the shipped files to reuse
    assert rep.embedded == n - len(cache) and rep.embedded > 0
    assert len(load_vector_cache(get_embedder("fake").id)) == n  # and the file is written again


def _chk012(data):
    from kb.content.check import check_all
    from kb.registry.store import Registry
    from tests.conftest import ROOT

    problems = check_all(data / "entries", Registry.load(ROOT / "data" / "registry"))[1]
    return [p for p in problems if p.code == "CHK012"]


def test_check_names_the_entry_of_a_missing_or_stale_file(data):
    assert _chk012(data) == []
    folder = data / "embeddings" / "fake_1_128"
    (folder / "activation-memory-seq-len.npy").unlink()  # an entry without its file
    shutil.copy(folder / "nvme-offload-setup.npy", folder / "gone-entry.npy")  # a file without its entry
    (data / "embeddings" / "fake_1_128.npz").write_bytes(b"")  # the old single-file layout
    (folder / ".x.npy.1.tmp").write_bytes(b"")  # a temp file left by a killed write
    got = {os.path.basename(p.file): p.message for p in _chk012(data)}
    want = {
        "activation-memory-seq-len.yaml": "no vector file data/embeddings/fake_1_128/activation-memory-seq-len.npy",
        "gone-entry.npy": "entry 'gone-entry' has no file data/entries/gone-entry.yaml",
        "fake_1_128.npz": "the single-file cache of before the per-entry files",
        ".x.npy.1.tmp": "not a vector file (<entry id>.npy)",
    }
    assert set(got) == set(want) and all(got[f].startswith(want[f]) for f in want), got
    assert all(p.line is None for p in _chk012(data) if not p.file.endswith(".yaml"))


def test_check_reports_missing_and_stale_vectors_of_an_entry(data):
    path = data / "entries" / f"{EDITED}.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(OLD_SYMPTOM, NEW_SYMPTOM), encoding="utf-8")
    msgs = sorted(p.message for p in _chk012(data))
    assert len(msgs) == 2 and all(p.file.endswith(f"{EDITED}.yaml") and p.line for p in _chk012(data))
    assert msgs[0].startswith("1 unit(s) (symptom) have no vector in data/embeddings/fake_1_128/")
    assert msgs[1].startswith(f"data/embeddings/fake_1_128/{EDITED}.npy holds 1 vector(s) no unit of the entry uses")
