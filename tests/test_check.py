"""`kb check`: the shipped entries pass; broken ones fail with file, line and field."""

import json

from click.testing import CliRunner

from kb.cli import main
from tests.conftest import ROOT

BROKEN = ROOT / "tests" / "fixtures" / "entries_broken"


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_shipped_entries_pass():
    res = run("check")
    assert res.exit_code == 0, res.output
    n = len(list((ROOT / "data" / "entries").glob("*.yaml")))
    assert f"checked {n} entries: ok" in res.output


def test_broken_entries_fail_with_file_line_field():
    res = run("check", "--entries", str(BROKEN), "--json")
    assert res.exit_code == 1
    problems = json.loads(res.output)
    got = {(p["file"].rsplit("/", 1)[-1], p["line"], p["field"]) for p in problems}
    assert ("bad-yaml.yaml", 7, "") in got  # YAML syntax error: the line of the problem
    assert ("missing-zh.yaml", 3, "title.zh") in got  # a language missing
    assert ("missing-zh.yaml", 4, "summary.zh") in got  # "zh" that is not Chinese
    assert ("unknown-param.yaml", 13, "fixes.0.params.1") in got  # invented parameter id
    assert ("unknown-param.yaml", 14, "fixes.0.snippet") in got  # invented key in a JSON snippet
    assert ("unknown-param.yaml", 20, "myths.0.names.0") in got  # a "myth" name that is real
    assert ("unknown-param.yaml", 23, "sources.0") in got  # code source past the end of the file
    by_field = {p["field"]: p["message"] for p in problems}
    assert "zero_optimization.offload_optimizer.nvme_path" in by_field["fixes.0.snippet"]


def test_human_output_names_file_and_line():
    res = run("check", "--entries", str(BROKEN))
    assert res.exit_code == 1
    assert (
        "unknown-param.yaml:13: fixes.0.params.1: 'deepspeed:zero_force_opt_offload' is not in the registry"
        in res.output
    )


def test_duplicate_ids_and_related(tmp_path):
    src = (ROOT / "data" / "entries" / "zero3-single-gpu-no-offload.yaml").read_text()
    (tmp_path / "zero3-single-gpu-no-offload.yaml").write_text(src)
    other = (
        src.replace("id: zero3-single-gpu-no-offload", "id: copy-entry")
        .replace("aliases: []", "aliases: [zero3-single-gpu-no-offload]")
        .replace("related: []", "related: [no-such-entry]")
    )
    (tmp_path / "copy-entry.yaml").write_text(other)
    res = run("check", "--entries", str(tmp_path), "--json")
    assert res.exit_code == 1
    msgs = [p["message"] for p in json.loads(res.output)]
    assert any("already used" in m for m in msgs)
    assert any("no entry with id 'no-such-entry'" in m for m in msgs)


def test_schema_rejects_unknown_keys_and_few_queries(tmp_path):
    src = (ROOT / "data" / "entries" / "zero3-single-gpu-no-offload.yaml").read_text()
    bad = src.replace("area: oom", "area: oom\nseverity: high")
    (tmp_path / "zero3-single-gpu-no-offload.yaml").write_text(bad)
    res = run("check", "--entries", str(tmp_path), "--json")
    assert res.exit_code == 1
    p = json.loads(res.output)[0]
    assert p["field"] == "severity" and p["line"] == 4 and "Extra inputs" in p["message"]


def test_empty_and_missing_folder(tmp_path):
    res = run("check", "--entries", str(tmp_path / "nope"))
    assert res.exit_code == 2 and "no entry folder" in res.output
    (tmp_path / "empty.yaml").write_text("")
    res = run("check", "--entries", str(tmp_path), "--json")
    assert res.exit_code == 1 and "file is empty" in res.output


def test_show_renders_both_languages():
    res = run("show", "zero3-single-gpu-no-offload", "--lang", "zh")
    assert res.exit_code == 0 and "单卡" in res.output and "deepspeed:zero_optimization.stage" in res.output
    res = run("show", "zero3-single-gpu", "--lang", "en")
    assert res.exit_code == 2 and "nearest" in res.output


def test_cjk_fold_spaces_removed():
    from kb.entries import unfold_cjk

    assert (
        unfold_cjk("切分到多张卡上。单卡的 时候\n  没有 offload 别的") == "切分到多张卡上。单卡的时候没有 offload 别的"
    )
