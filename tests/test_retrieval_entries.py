"""Every entry carries its own retrieval tests (semgrep-rules style): its queries must retrieve it
in the top 3; its not_queries must not."""

import pytest

from kb.content.entries import load_entries
from tests.conftest import ROOT

ENTRIES = [le.entry for le in load_entries(ROOT / "data" / "entries")]
CASES = [(e.id, lang, q) for e in ENTRIES for lang in ("en", "zh") for q in getattr(e.queries, lang)]
NEAR_MISSES = [(e.id, q) for e in ENTRIES for q in e.not_queries]


@pytest.mark.parametrize("entry_id,lang,query", CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_query_retrieves_its_entry(engine, entry_id, lang, query):
    ans = engine.ask(query, k=3)
    top = [r.id for r in ans.results]
    assert ans.answered, f"{query!r} declined"
    assert entry_id in top, f"{query!r} -> {top}"


@pytest.mark.parametrize("entry_id,query", NEAR_MISSES)
def test_near_miss_stays_out(engine, entry_id, query):
    top = [r.id for r in engine.ask(query, k=3).results]
    assert entry_id not in top, f"{query!r} -> {top}"


def test_queries_are_not_indexed(engine):
    indexed = {u["text"] for u in engine.index.units}
    for e in ENTRIES:
        for _, q in e.queries.all():
            assert q not in indexed, f"{e.id}: query {q!r} is also indexed text (a test that cannot fail)"
