import json

from click.testing import CliRunner

from cli.main import main
from tests.conftest import ROOT


def test_stats_json_matches_the_entries():
    r = CliRunner().invoke(main, ["stats", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    n = len(list((ROOT / "data" / "entries").glob("*.yaml")))
    assert rep["entries"] == n == sum(rep["by_area"].values())
    assert rep["languages"]["entries_with_2plus_zh_queries"] == n
    assert 0 < rep["params_used"] < rep["registry_records"]
    assert rep["deepspeed_config_keys_unused"] == len(rep["deepspeed_config_keys_unused_list"])
    assert "deepspeed:zero_optimization.stage" not in rep["deepspeed_config_keys_unused_list"]
    assert rep["myths"] > 0 and rep["sources"]["code"] > 0


def test_stats_text():
    r = CliRunner().invoke(main, ["stats"])
    assert r.exit_code == 0 and "by area:" in r.output and "myths:" in r.output
