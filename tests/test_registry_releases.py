"""The merge of per-release registry files into format 2 (indexer/registry_releases.py): fast, no network."""

import json

import pytest

from indexer import registry_releases as rr
from indexer.registry_build import _record


def _rec(rid: str, version: str, **kw) -> dict:
    pkg, path = rid.split(":", 1)
    return _record(
        id=rid,
        package=pkg,
        version=version,
        kind=kw.pop("kind", "config_key"),
        name=path.rsplit(".", 1)[-1],
        path=path,
        source_file=kw.pop("source_file", "ds/config.py"),
        source_line=kw.pop("source_line", 10),
        **kw,
    )


PIN = "ds:zero.offload.pin_memory"
OLD = "ds:zero.cpu_offload"
NEW = "ds:zero.offload"
GONE = "ds:amp"


@pytest.fixture
def releases() -> dict[str, list[dict]]:
    # three releases, given out of order on purpose ("0.9" sorts before "0.10" as a version)
    return {
        "0.10": [
            _rec(PIN, "0.10", default="true", source_line=120),
            _rec(NEW, "0.10", kind="config_section", source_line=80),
            _rec(OLD, "0.10", deprecated=True, replacement="offload", status="active"),
        ],
        "0.9": [
            _rec(PIN, "0.9", default="false", source_line=100),
            _rec(OLD, "0.9"),
            _rec(GONE, "0.9", kind="config_section", source_file="ds/amp.py", source_line=3),
        ],
        "0.9.5": [
            _rec(PIN, "0.9.5", default="false", source_line=110),
            _rec(OLD, "0.9.5", deprecated=True, replacement="offload"),
            _rec(NEW, "0.9.5", kind="config_section", source_line=80),
        ],
    }


def _by_id(recs):
    return {r["id"]: r for r in recs}


def test_releases_oldest_first_and_base_is_newest(releases):
    m = _by_id(rr.merge(releases))
    assert m[PIN]["releases"] == ["0.9", "0.9.5", "0.10"]
    assert m[PIN]["version"] == "0.10" and m[PIN]["default"] == "true" and m[PIN]["source_line"] == 120
    assert m[NEW]["releases"] == ["0.9.5", "0.10"]


def test_history_holds_only_the_fields_that_differ(releases):
    m = _by_id(rr.merge(releases))
    assert m[PIN]["history"] == {
        "0.9": {"default": "false", "source_line": 100},
        "0.9.5": {"default": "false", "source_line": 110},
    }
    assert m[NEW]["history"] == {}  # same in both releases: nothing stored
    # deprecation that starts in 0.9.5: the older release's status fields are kept
    assert m[OLD]["history"] == {"0.9": {"deprecated": False, "replacement": None}}


def test_removed_name_keeps_its_last_release(releases):
    m = _by_id(rr.merge(releases))
    assert m[GONE]["releases"] == ["0.9"]
    assert m[GONE]["version"] == "0.9" and m[GONE]["source_file"] == "ds/amp.py" and m[GONE]["history"] == {}


def test_renames_from_deprecated_replacement(releases):
    m = _by_id(rr.merge(releases))
    assert m[OLD]["renamed_to"] == NEW and m[NEW]["renamed_from"] == [OLD]
    assert m[PIN]["renamed_to"] is None and m[PIN]["renamed_from"] == []


def test_stated_renames_and_unknown_targets():
    rels = {"1.0": [_rec("t:f.torch_dtype", "1.0")], "2.0": [_rec("t:f.torch_dtype", "2.0"), _rec("t:f.dtype", "2.0")]}
    m = _by_id(rr.merge(rels, [["t:f.torch_dtype", "t:f.dtype", "t/m.py:4"]]))
    assert m["t:f.torch_dtype"]["renamed_to"] == "t:f.dtype" and m["t:f.dtype"]["renamed_from"] == ["t:f.torch_dtype"]
    # a replacement that names nothing recorded is not a rename
    rels = {"1.0": [_rec("t:f.a", "1.0", deprecated=True, replacement="nowhere")]}
    assert rr.merge(rels)[0]["renamed_to"] is None


def test_view_at_gives_back_each_release_exactly(releases):
    merged = rr.merge(releases)
    for ver, recs in releases.items():
        got = sorted((v for v in (rr.view_at(r, ver) for r in merged) if v is not None), key=lambda r: r["id"])
        assert got == sorted(recs, key=lambda r: r["id"]), ver


def test_stated_renames_from_source(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "m.py").write_text(
        'def f(dtype=None, **kwargs):\n    warn("`torch_dtype` is deprecated! Use `dtype` instead!")\n'
        '    warn("`other` is deprecated! Use `dtype` instead!")\n'
    )
    recs = [
        _rec("t:f.torch_dtype", "1", source_file="t/m.py", source_line=1),
        _rec("t:f.dtype", "1", source_file="t/m.py", source_line=1),
        _rec("t:g.flag", "1", doc="Deprecated alias of `new_flag`.", source_file="t/m.py"),
        _rec("t:g.new_flag", "1", source_file="t/m.py"),
    ]
    got = rr.stated_renames(recs, tmp_path)
    # `other` is not recorded beside `dtype`: no rename invented for it
    assert got == [["t:f.torch_dtype", "t:f.dtype", "t/m.py:2"], ["t:g.flag", "t:g.new_flag", "t/m.py:10"]]


def _write_build(build, pkg, releases, meta=None):
    build.mkdir(exist_ok=True)
    for ver, recs in releases.items():
        (build / f"{pkg}-{ver}.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))
        m = {"built": "import", "skipped": [], "renames": [], "records": len(recs), **(meta or {}).get(ver, {})}
        (build / f"{pkg}-{ver}.meta.json").write_text(json.dumps(m))


def test_write_registry_format2_deterministic(tmp_path, releases):
    build, out = tmp_path / "build", tmp_path / "reg"
    _write_build(build, "ds", releases, {"0.9": {"built": "static", "skipped": ["section x: AttributeError"]}})
    out.mkdir()
    (out / "ds-0.10.jsonl").write_text("{}\n")  # a format-1 file the format-2 one replaces
    manifest = rr.write_registry(out, ["ds"], build)
    assert manifest == {
        "format": 2,
        "packages": {
            "ds": {
                "releases": ["0.9", "0.9.5", "0.10"],
                "records": 4,
                "per_release": {"0.9": 3, "0.9.5": 3, "0.10": 3},
                "built": {"0.9": "static", "0.9.5": "import", "0.10": "import"},
                "skipped": {"0.9": ["section x: AttributeError"]},
            }
        },
    }
    assert sorted(p.name for p in out.iterdir()) == ["ds.jsonl", "manifest.json"]
    first = (out / "ds.jsonl").read_bytes(), (out / "manifest.json").read_bytes()
    ids = [json.loads(line)["id"] for line in first[0].decode().splitlines()]
    assert ids == sorted(ids)
    rr.write_registry(out, ["ds"], build)
    assert ((out / "ds.jsonl").read_bytes(), (out / "manifest.json").read_bytes()) == first


def test_releases_not_rebuilt_are_kept(tmp_path, releases):
    build, out = tmp_path / "build", tmp_path / "reg"
    _write_build(build, "ds", releases)
    rr.write_registry(out, ["ds"], build)
    before = (out / "ds.jsonl").read_bytes()
    # only the newest release rebuilt (e.g. `kb registry build` on a fresh checkout): the others stay
    build2 = tmp_path / "build2"
    _write_build(build2, "ds", {"0.10": releases["0.10"]})
    manifest = rr.write_registry(out, ["ds"], build2)
    assert manifest["packages"]["ds"]["releases"] == ["0.9", "0.9.5", "0.10"]
    assert (out / "ds.jsonl").read_bytes() == before


def test_change_figures(releases):
    merged = rr.merge(releases)
    rows = rr.change_figures(merged, ["0.9", "0.9.5", "0.10"])
    assert rows[0] == {"from": "0.9", "to": "0.9.5", "added": 1, "removed": 1, "default_changed": 0, "renamed": 1}
    assert rows[1] == {"from": "0.9.5", "to": "0.10", "added": 0, "removed": 0, "default_changed": 1, "renamed": 0}


@pytest.mark.parametrize("spec", ["deepspeed", "deepspeed=0.14.4", "nosuch==1.0", "deepspeed==abc"])
def test_bad_release_spec(spec):
    with pytest.raises(ValueError, match="--release"):
        rr.parse_spec(spec)


def test_release_spec():
    assert rr.parse_spec("DeepSpeed == 0.14.4") == ("deepspeed", "0.14.4")


def test_class_kept_under_old_spelling_moves_its_members(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "c.py").write_text("class NewCfg:\n    x: int = 1\n\n\nOldCfg = NewCfg\nNotAlias = NewCfg()\n")
    new = [
        _rec("t:NewCfg", "2.0", kind="class", source_file="t/c.py", source_line=1),
        _rec("t:NewCfg.x", "2.0", kind="field", source_file="t/c.py", source_line=2),
    ]
    renames = rr.stated_renames(new, tmp_path)
    assert renames == [["t:OldCfg", "t:NewCfg", "t/c.py:5"]]
    old = [
        _rec("t:OldCfg", "1.0", kind="class", source_file="t/c.py", source_line=1),
        _rec("t:OldCfg.x", "1.0", kind="field", source_file="t/c.py", source_line=2),
        _rec("t:OldCfg.gone", "1.0", kind="field", source_file="t/c.py", source_line=3),
    ]
    m = _by_id(rr.merge({"1.0": old, "2.0": new}, renames))
    assert m["t:OldCfg"]["renamed_to"] == "t:NewCfg" and m["t:OldCfg.x"]["renamed_to"] == "t:NewCfg.x"
    assert m["t:OldCfg.gone"]["renamed_to"] is None  # no member of that name in the new class
    assert m["t:NewCfg.x"]["renamed_from"] == ["t:OldCfg.x"]


def test_static_fallback_reads_fields_by_ast(tmp_path, monkeypatch):
    from indexer import registry_build as rb

    pkg = tmp_path / "kbfakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('this release does not import here')\n")
    (pkg / "cfg.py").write_text(
        "from dataclasses import dataclass, field\n\n\n@dataclass\nclass Args:\n"
        '    """Training arguments."""\n\n    lr: float = 1e-3\n    name: str = field(default="x")\n'
        "    tags: list = field(default_factory=list)\n    _hidden: int = 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(
        rb.STATIC_CLASSES, "kbfakepkg", {"Args": ("kbfakepkg/cfg.py", "Args"), "Gone": ("kbfakepkg/no.py", "X")}
    )
    monkeypatch.setattr(rb, "SKIPPED", [])
    recs = {r["id"]: r for r in rr._static_records("kbfakepkg", "1.0")}
    assert sorted(recs) == ["kbfakepkg:Args", "kbfakepkg:Args.lr", "kbfakepkg:Args.name", "kbfakepkg:Args.tags"]
    assert recs["kbfakepkg:Args.lr"]["default"] == "0.001" and recs["kbfakepkg:Args.lr"]["source_line"] == 8
    assert recs["kbfakepkg:Args.name"]["default"] == '"x"' and recs["kbfakepkg:Args.tags"]["default"] is None
    assert recs["kbfakepkg:Args"]["doc"] == "Training arguments."
    assert rb.SKIPPED == ["static: kbfakepkg/no.py (not in this release)"]


def test_docs_figures_are_the_committed_registrys():
    """docs/registry.md quotes the figures of the committed data (rerun `figures` after a rebuild)."""
    from pathlib import Path

    from indexer.registry_releases import figures_table

    docs = (Path(__file__).resolve().parent.parent / "docs" / "registry.md").read_text(encoding="utf-8")
    assert figures_table().strip() in docs
