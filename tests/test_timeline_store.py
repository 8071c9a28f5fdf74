"""The registry judged by a timeline (every minor release) between its sampled releases (kb/registry/timeline.py).

The records and timeline here are made up for the test (a package "pkg" with a field that lives until 1.8):
what is tested is the view logic, not any package's facts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.registry.store import Registry, RegistryError
from kb.registry.timeline import TimelineError, load_timelines, read_timeline, timeline_records

SAMPLED = ["1.0.2", "1.5.1", "2.0.0"]
TIMELINE = ["1.0.2", "1.1.0", "1.5.1", "1.8.3", "1.9.0", "2.0.0"]


def _rec(name: str, version: str, **kw) -> dict:
    base = {
        "id": f"pkg:Args.{name}",
        "kind": "field",
        "name": name,
        "path": f"Args.{name}",
        "package": "pkg",
        "version": version,
        "type": "float",
        "default": "0.0",
        "aliases": [],
        "choices": None,
        "constraints": None,
        "deprecated": False,
        "replacement": None,
        "noop": False,
        "status": "active",
        "validated": False,
        "forbids_unknown": None,
        "doc": None,
        "source_file": "pkg/args.py",
        "source_line": 10,
    }
    return {**base, **kw}


def _timeline(tmp_path: Path, names: dict) -> Path:
    d = tmp_path / "timeline"
    d.mkdir(exist_ok=True)
    body = {"format": 1, "package": "pkg", "window": "test", "releases": TIMELINE, "names": names}
    (d / "pkg.json").write_text(json.dumps(body), encoding="utf-8")
    return d / "pkg.json"


def _name(name: str, spans, **kw) -> dict:
    return {"kind": "field", "name": name, "path": f"Args.{name}", "spans": spans, **kw}


@pytest.fixture
def reg(tmp_path: Path) -> Registry:
    # `ratio` is in the samples 1.0.2 and 1.5.1 only; the timeline says it lived until 1.8.3
    # `steps` is everywhere; `fresh` exists only in 1.8.3 and 1.9.0, between the samples
    records = [_rec("ratio", v) for v in SAMPLED[:2]] + [_rec("steps", v) for v in SAMPLED]
    _timeline(
        tmp_path,
        {
            "pkg:Args.ratio": _name("ratio", [["1.0.2", "1.8.3"]], defaults={"1.0.2": "0.0"}),
            "pkg:Args.steps": _name("steps", [["1.0.2", "2.0.0"]], defaults={"1.0.2": "0", "1.9.0": "10"}),
            "pkg:Args.fresh": _name("fresh", [["1.8.3", "1.9.0"]], type="int", source="pkg/args.py:42"),
        },
    )
    tl = load_timelines(tmp_path)
    have = {r["id"] for r in records}
    return Registry(records + [r for t in tl.values() for r in timeline_records(t, have)], timelines=tl)


def test_default_view_says_removed_in_the_first_minor_without_it(reg: Registry) -> None:
    r = reg.get("pkg:Args.ratio")
    assert r["status"] == "removed"
    assert r["until"] == "1.8.3"  # the samples alone would say 1.5.1
    assert r["removed_in"] == "1.9.0"


def test_a_user_between_the_samples_is_judged_at_the_exact_minor(reg: Registry) -> None:
    assert reg.at({"pkg": "1.8.0"}).get("pkg:Args.ratio")["status"] == "active"  # 1.8.0 -> timeline 1.5.1
    assert reg.at({"pkg": "1.8.3"}).get("pkg:Args.ratio")["status"] == "active"
    gone = reg.at({"pkg": "1.9"}).get("pkg:Args.ratio")
    assert gone["status"] == "absent" and gone["absent"] == "removed" and gone["removed_in"] == "1.9.0"
    assert reg.exists_in("pkg:Args.ratio", "1.8.3") is True
    assert reg.exists_in("pkg:Args.ratio", "1.9.0") is False


def test_a_name_only_between_the_samples_is_a_record_of_its_own(reg: Registry) -> None:
    r = reg.get("pkg:Args.fresh")
    assert r["from_timeline"] and r["source_file"] == "pkg/args.py" and r["source_line"] == 42
    assert r["status"] == "removed" and r["until"] == "1.9.0" and r["removed_in"] == "2.0.0"
    added = reg.at({"pkg": "1.5.1"}).get("pkg:Args.fresh")
    assert added["status"] == "absent" and added["absent"] == "added" and added["since"] == "1.8.3"
    assert reg.at({"pkg": "1.8.3"}).get("pkg:Args.fresh")["status"] == "active"


def test_sampled_releases_stay_authoritative(reg: Registry) -> None:
    # the samples built by import say `steps` is in 2.0.0: the view there is the sampled record
    assert reg.at({"pkg": "2.0.0"}).get("pkg:Args.steps")["status"] == "active"
    assert reg.releases["pkg"] == SAMPLED  # the sampled releases; the timeline's only order between them


def test_spellings_use_the_exact_span(reg: Registry) -> None:
    (sp,) = reg.spellings("pkg:Args.ratio")
    assert (sp["since"], sp["until"]) == ("1.0.2", "1.8.3")


def test_a_package_only_a_timeline_records(tmp_path: Path) -> None:
    _timeline(tmp_path, {"pkg:Args.lr": _name("lr", [["1.1.0", "2.0.0"]], defaults={"1.1.0": "1e-5", "1.9.0": "2e-5"})})
    tl = load_timelines(tmp_path)
    reg = Registry(timeline_records(tl["pkg"], set()), timelines=tl)
    assert reg.releases["pkg"] == TIMELINE
    r = reg.get("pkg:Args.lr")
    assert r["default"] == "2e-5" and r["status"] == "active"
    assert reg.at({"pkg": "1.5.1"}).get("pkg:Args.lr")["default"] == "1e-5"
    assert reg.at({"pkg": "1.0.2"}).get("pkg:Args.lr")["status"] == "absent"
    events = [(e["release"], e["event"]) for e in tl["pkg"].history("pkg:Args.lr")]
    assert events == [("1.1.0", "added"), ("1.9.0", "default")]


def test_a_rename_the_source_states_links_the_records(tmp_path: Path) -> None:
    # `old` is deprecated with "use `new`" from 1.5.1 (a name of the same class there); `Other.old` says the same
    # of a name its class does not have
    dep = {"1.5.1": "`old` is deprecated, use `new` instead."}
    _timeline(
        tmp_path,
        {
            "pkg:Args.old": _name("old", [["1.0.2", "1.8.3"]], deprecated=dep, replacement={"1.5.1": "new"}),
            "pkg:Args.new": _name("new", [["1.5.1", "2.0.0"]]),
            "pkg:Other.old": _name("old", [["1.0.2", "2.0.0"]], deprecated=dep, replacement={"1.5.1": "new"}),
        },
    )
    tl = load_timelines(tmp_path)["pkg"]
    assert tl.replacement_at("pkg:Args.old", "1.1.0") is None and tl.replacement_at("pkg:Args.old", "1.8.3") == "new"
    assert tl.replacement_id("pkg:Args.old", "1.8.3") == "pkg:Args.new"
    assert tl.replacement_id("pkg:Other.old", "1.8.3") is None  # not a name of class Other
    recs = {r["id"]: r for r in timeline_records(tl, set())}
    old = recs["pkg:Args.old"]
    assert old["renamed_to"] == "pkg:Args.new" and old["replacement"] == "new" and old["deprecated"]
    assert old["history"]["1.0.2"] == {"deprecated": False, "replacement": None}
    assert recs["pkg:Args.new"]["renamed_from"] == ["pkg:Args.old"]
    assert recs["pkg:Other.old"]["renamed_to"] is None
    reg = Registry(list(recs.values()), timelines={"pkg": tl})
    assert [s["name"] for s in reg.spellings("pkg:Args.new")] == ["old", "new"]  # oldest first


@pytest.mark.parametrize(
    "body, says",
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"format": 9}), "not a timeline file"),
        (json.dumps({"format": 1, "releases": ["2.0", "1.0"], "names": {}}), "oldest first"),
        (
            json.dumps(
                {
                    "format": 1,
                    "releases": ["1.0"],
                    "names": {"p:x": {"kind": "field", "name": "x", "path": "x", "spans": [["1.0", "3.0"]]}},
                }
            ),
            "p:x: span 1.0..3.0",
        ),
        (
            json.dumps(
                {
                    "format": 1,
                    "releases": ["1.0"],
                    "names": {
                        "p:x": {
                            "kind": "field",
                            "name": "x",
                            "path": "x",
                            "spans": [["1.0", "1.0"]],
                            "replacement": "y",
                        }
                    },
                }
            ),
            "p:x: replacement must map releases",
        ),
    ],
)
def test_a_bad_timeline_file_is_named(tmp_path: Path, body: str, says: str) -> None:
    d = tmp_path / "timeline"
    d.mkdir()
    (d / "bad.json").write_text(body, encoding="utf-8")
    with pytest.raises(TimelineError, match=says) as e:
        read_timeline(d / "bad.json")
    assert "bad.json" in str(e.value)
    load_timelines.__globals__["_load"].cache_clear()
    (tmp_path / "x.jsonl").write_text(json.dumps(_rec("a", "1.0.2", releases=["1.0.2"], history={})) + "\n")
    with pytest.raises(RegistryError, match="bad.json"):
        Registry.load(tmp_path)
