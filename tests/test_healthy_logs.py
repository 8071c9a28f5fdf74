"""Healthy logs made by real runs (tests/fixtures/healthy_logs/ from bench/make_healthy_logs.py, and the healthy run
of tests/fixtures/long_logs/): kb finds no error block in any of them and answers nothing above the gate, read as a
file (`kb ask --log FILE`: every line is the log's) and pasted whole as the question (kb tells the log from the
user's words by their form)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.ask.logs import read_log

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEALTHY = sorted((FIXTURES / "healthy_logs").glob("*.log")) + sorted((FIXTURES / "long_logs").glob("healthy_*.log"))


def test_there_is_a_healthy_corpus():
    assert len(HEALTHY) >= 1


@pytest.mark.parametrize("path", HEALTHY, ids=[p.name for p in HEALTHY])
def test_a_healthy_log_has_no_error_block_and_no_answer(engine, path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        t = read_log(fh)
    assert not t.found, [(b.start, b.head) for b in t.blocks]
    assert not engine.ask("", log=t).answered
    pasted = path.read_text(encoding="utf-8", errors="replace")
    ans = engine.ask(pasted)  # pasted as the question itself
    assert ans.log is not None and not ans.answered, ans.query[:300]
