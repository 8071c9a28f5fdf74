"""Retrieval quality floors. Raise them as the KB grows; never lower one to make a change pass."""

import json

from click.testing import CliRunner

from cli.main import main
from kb.ask.evaluate import evaluate, load_eval
from tests.conftest import ROOT, shared_file

EVAL = ROOT / "tests" / "eval"


def test_heldout_in_scope(engine):
    rep = evaluate(engine, load_eval(EVAL / "heldout.yaml"))
    for lang in ("en", "zh"):
        s = rep["by_lang"][lang]
        assert s["hit@3"] >= 0.95, (lang, s)
        assert s["hit@1"] >= 0.80, (lang, s)


def test_out_of_scope_declined(engine):
    rep = evaluate(engine, load_eval(EVAL / "out_of_scope.yaml"))
    assert rep["out_of_scope"]["answered"] == 0, [r for r in rep["items"] if r.get("answered")]


def test_dev_set(engine):
    rep = evaluate(engine, load_eval(shared_file("eval/dev_queries.yaml")))
    for lang in ("en", "zh"):
        assert rep["by_lang"][lang]["hit@3"] >= 0.9, rep["by_lang"]
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
