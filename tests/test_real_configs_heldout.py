"""The held-out bug threads (tests/fixtures/real_configs/heldout/): sampled in session 3 by readers who neither ran
kb nor read its rules, after every rule was written; no rule is written from them. Here: the manifests' shape and
that every file lints without a crash. How many problems kb names is bench/lint_corpus.py --heldout's figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kb.doctor.configs import ConfigError, parse_config
from kb.doctor.judge import lint_file

HELDOUT = Path(__file__).resolve().parent / "fixtures" / "real_configs" / "heldout"
ITEMS = [
    {**i, "manifest": p.name}
    for p in sorted(HELDOUT.glob("manifest*.yaml"))
    for i in yaml.safe_load(p.read_text(encoding="utf-8"))["items"]
]
KINDS = {"invalid-key", "removed", "wrong-type", "mismatch", "missing", "unsupported", "other"}
THREAD = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$")


def test_every_file_is_listed_once_and_every_listed_file_exists():
    names = [i["file"] for i in ITEMS]
    assert len(names) >= 7 and len(names) == len(set(names))
    on_disk = {p.name for p in HELDOUT.glob("bug__*")}
    assert set(names) == on_disk


@pytest.mark.parametrize("item", ITEMS, ids=[i["file"] for i in ITEMS])
def test_item_shape_and_no_crash(registry, item):
    assert THREAD.match(item["source"]) and item["origin"] == "bug-thread" and item["good"] is False
    assert item["problem"]["kind"] in KINDS and item["problem"]["path"] and item["problem"]["summary"]
    assert isinstance(item.get("self_contained", True), bool)
    try:
        cfg = parse_config((HELDOUT / item["file"]).read_text(encoding="utf-8"), item["file"])
    except ConfigError:
        return  # a pasted fragment kb cannot read: a clean refusal, never a crash
    lint_file(cfg, registry, {})
