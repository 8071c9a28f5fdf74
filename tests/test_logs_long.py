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


@pytest.mark.parametrize("item", ITEMS, ids=[i["file"] for i in ITEMS])
def test_a_whole_log_piped_into_kb_ask_is_read_as_a_log(item):
    """`cat train.log | kb ask -`: more than a question can hold (MAX_QUERY_CHARS x 4 bytes) is a log, streamed
    from its first byte as --log - would read it (it was refused: "query is larger than 80 kB"); a shorter one is a
    paste, triaged as a log all the same."""
    import json

    from click.testing import CliRunner

    from cli.main import main
    from kb.ask.question import MAX_QUERY_CHARS

    data = (LOGS / item["file"]).read_bytes()
    sizes = [(LOGS / i["file"]).stat().st_size for i in ITEMS]
    assert max(sizes) > MAX_QUERY_CHARS * 4 > min(sizes)  # both cases: over the limit that refused, and under it
    r = CliRunner().invoke(main, ["ask", "-", "--json"], input=data)
    out = json.loads(r.stdout)
    assert out["log"] and out["log"]["lines"] == data.decode("utf-8").count("\n"), out["log"]
    if item["expect"] is None:
        assert r.exit_code == 3 and not out["results"]
        return
    assert r.exit_code == 0 and out["results"][0]["id"] == item["expect"], [x["id"] for x in out["results"]]


def test_a_question_piped_into_kb_ask_stays_a_question():
    import json

    from click.testing import CliRunner

    from cli.main import main

    r = CliRunner().invoke(main, ["ask", "-", "--json"], input=b"zero3 oom first step\n")
    out = json.loads(r.stdout)
    assert r.exit_code == 0 and out["log"] is None and out["results"][0]["id"] == "zero3-single-gpu-no-offload"
