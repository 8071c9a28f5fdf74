"""Long logs of real runs that fail late, and the same run healthy (tests/fixtures/long_logs/, made by
bench/make_failing_logs.py): the buried error is found and answered right first; the healthy run is not answered."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kb.ask.logs import read_log

LOGS = Path(__file__).resolve().parent / "fixtures" / "long_logs"
ITEMS = yaml.safe_load((LOGS / "manifest.yaml").read_text(encoding="utf-8"))["items"]


def _read(item):
    with open(LOGS / item["file"], encoding="utf-8") as fh:
        return read_log(fh)


@pytest.mark.parametrize("item", ITEMS, ids=[i["file"] for i in ITEMS])
def test_the_root_cause_block_is_the_failing_ranks(item):
    t = _read(item)
    if item["expect"] is None:
        assert not t.found and t.blocks_seen == 0, [b.head for b in t.blocks]
        return
    assert [t.used[0].start, t.used[0].end] == item["root_lines"]


@pytest.mark.parametrize("item", ITEMS, ids=[i["file"] for i in ITEMS])
def test_long_logs_are_answered_right_first_or_not_at_all(engine, item):
    ans = engine.ask("", log=_read(item))
    if item["expect"] is None:
        assert not ans.answered and not ans.results
        return
    assert ans.answered and ans.results[0].id == item["expect"], [(r.id, r.score) for r in ans.results]
