"""`kb check`: the shipped entries pass; broken ones fail with file, line, field and a stable code.

Every check is a unit (``kb.content.check.CHECKS``): its bad cases (mutations of a real valid entry) are
reported with its code, its ok cases are clean, and docs/entry-format.md lists exactly its codes.
"""

import importlib.metadata as md
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli.main import main
from kb.content.check import (
    BASE_ENTRY,
    CHECKS,
    CHECKS_BEGIN,
    CHECKS_END,
    SCOPES,
    Problem,
    check_all,
    checks_markdown,
    write_case,
)
from tests.conftest import ROOT

BROKEN = ROOT / "tests" / "fixtures" / "entries_broken"
BASE_TEXT = (ROOT / "data" / "entries" / f"{BASE_ENTRY}.yaml").read_text(encoding="utf-8")
BAD = [(code, i) for code, c in sorted(CHECKS.items()) for i in range(len(c.bad))]
OK = [(code, i) for code, c in sorted(CHECKS.items()) for i in range(len(c.ok))]


def run(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow  # `kb check` over every shipped entry (about 6 s; .ci/run runs it too)
def test_shipped_entries_pass():
    res = run("check")
    assert res.exit_code == 0, res.output
    n = len(list((ROOT / "data" / "entries").glob("*.yaml")))
    assert f"checked {n} entries: ok" in res.output


def test_broken_entries_fail_with_file_line_field():
    res = run("check", "--entries", str(BROKEN), "--json")
    assert res.exit_code == 1
    problems = json.loads(res.output)["problems"]
    got = {(p["file"].rsplit("/", 1)[-1], p["line"], p["field"], p["code"]) for p in problems}
    assert ("bad-yaml.yaml", 7, "", "CHK001") in got  # YAML syntax error: the line of the problem
    assert ("missing-zh.yaml", 3, "title.zh", "CHK001") in got  # a language missing
    assert ("missing-zh.yaml", 4, "summary.zh", "CHK001") in got  # "zh" that is not Chinese
    assert ("unknown-param.yaml", 13, "fixes.0.params.1", "CHK003") in got  # invented parameter id
    assert ("unknown-param.yaml", 14, "fixes.0.snippet", "CHK005") in got  # invented key in a JSON snippet
    assert ("unknown-param.yaml", 20, "myths.0.names.0", "CHK006") in got  # a "myth" name that is real
    assert ("unknown-param.yaml", 23, "sources.0", "CHK008") in got  # code source past the end of the file
    assert all(set(p) == {"code", "file", "line", "field", "message"} for p in problems)
    by_field = {p["field"]: p["message"] for p in problems if p["code"] != "CHK011"}
    assert "zero_optimization.offload_optimizer.nvme_path" in by_field["fixes.0.snippet"]


def test_human_output_names_file_and_line():
    res = run("check", "--entries", str(BROKEN))
    assert res.exit_code == 1
    assert (
        "unknown-param.yaml:13: CHK003 fixes.0.params.1: 'deepspeed:zero_force_opt_offload' is not in the registry"
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
    msgs = {(p["code"], p["message"]) for p in json.loads(res.output)["problems"]}
    assert any(c == "CHK002" and "already used" in m for c, m in msgs)
    assert ("CHK007", "no entry with id 'no-such-entry'") in msgs


def test_schema_rejects_unknown_keys_and_few_queries(tmp_path):
    src = (ROOT / "data" / "entries" / "zero3-single-gpu-no-offload.yaml").read_text()
    bad = src.replace("area: oom", "area: oom\nseverity: high")
    (tmp_path / "zero3-single-gpu-no-offload.yaml").write_text(bad)
    res = run("check", "--entries", str(tmp_path), "--json")
    assert res.exit_code == 1
    p = json.loads(res.output)["problems"][0]
    assert p["field"] == "severity" and p["line"] == 4 and "Extra inputs" in p["message"] and p["code"] == "CHK001"


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
    from kb.content.entries import unfold_cjk

    assert (
        unfold_cjk("切分到多张卡上。单卡的 时候\n  没有 offload 别的") == "切分到多张卡上。单卡的时候没有 offload 别的"
    )


# ---------------------------------------------------------------- checks are units


def test_codes_are_stable_and_contiguous():
    assert sorted(CHECKS) == [f"CHK{i:03d}" for i in range(1, len(CHECKS) + 1)]
    names = [c.name for c in CHECKS.values()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("code", sorted(CHECKS))
def test_check_metadata(code):
    c = CHECKS[code]
    assert c.scope in SCOPES and c.summary.strip() and "|" not in c.summary
    assert c.run.__name__ == code.lower()  # the check's logic is the function named after its code
    assert c.bad and c.ok, f"{code} needs at least one bad and one ok case"


def _run_case(case, tmp_path, registry):
    folder = write_case(case, tmp_path / "entries", BASE_TEXT)
    return check_all(folder, registry)[1]


@pytest.mark.parametrize("code,i", BAD, ids=[f"{c}-bad{i}" for c, i in BAD])
def test_bad_case_is_reported(tmp_path, registry, code, i):
    case = CHECKS[code].bad[i]
    problems = _run_case(case, tmp_path, registry)
    hits = [p for p in problems if p.code == code]
    assert hits, f"{code} did not report bad case {case.note!r}: {[str(p) for p in problems]}"
    for p in hits:
        assert p.message and p.file.endswith(".yaml") and p.line and code in str(p)


@pytest.mark.parametrize("code,i", OK, ids=[f"{c}-ok{i}" for c, i in OK])
def test_ok_case_is_clean(tmp_path, registry, code, i):
    case = CHECKS[code].ok[i]
    problems = _run_case(case, tmp_path, registry)
    assert problems == [], f"{code} ok case {case.note!r}: {[str(p) for p in problems]}"


def test_cases_edit_text_that_exists(tmp_path):
    for c in CHECKS.values():
        for case in c.bad + c.ok:
            write_case(case, tmp_path / c.code / case.note.replace(" ", "_").replace('"', ""), BASE_TEXT)
    with pytest.raises(ValueError, match="occurs 0 times"):
        from kb.content.check import EntryCase

        write_case(EntryCase("nothing", (("no such text", "x"),)), tmp_path / "none", BASE_TEXT)


def test_code_sources_chk008_cannot_check_are_listed_with_the_reason(tmp_path, registry):
    """Not checked is not passed: a source of a package that is not installed, or of another version of it,
    is listed (entry, field, line, source, reason) and summed up per reason; it is not a problem."""
    from kb.content.check import EntryCase, unchecked_code_sources, unchecked_summary

    case = EntryCase(
        "two sources it cannot check",
        (
            (
                "version: 0.19.8\n    file: deepspeed/runtime/zero/stage3.py",
                "version: 0.0.1\n    file: deepspeed/runtime/zero/stage3.py",
            ),
            ("package: deepspeed\n    version: 0.19.8", "package: no-such-package-kb\n    version: 0.19.8"),
        ),
    )
    folder = write_case(case, tmp_path / "entries", BASE_TEXT)
    loaded, problems = check_all(folder, registry)
    assert [p for p in problems if p.code == "CHK008"] == []
    got = unchecked_code_sources(loaded)
    by_field = {u.field: u for u in got}
    assert set(by_field) == {"sources.0", "sources.1"}, [str(u) for u in got]
    installed = md.version("deepspeed").split("+")[0]
    assert by_field["sources.0"].reason == f"deepspeed {installed} is installed, not 0.0.1"
    assert by_field["sources.0"].source == "deepspeed 0.0.1 deepspeed/runtime/zero/stage3.py:4016-4050"
    assert by_field["sources.1"].reason == "no-such-package-kb is not installed"
    for u in got:
        assert u.entry == BASE_ENTRY and u.file.endswith(f"{BASE_ENTRY}.yaml") and u.line
        assert str(u) == f"{u.file}:{u.line}: CHK008 info {u.field}: not checked: {u.source} ({u.reason})"
    summary = unchecked_summary(got)
    assert summary == [
        f"CHK008 info: 1 code source(s) not checked ({installed_reason}), in 1 entry: {BASE_ENTRY}"
        for installed_reason in sorted(u.reason for u in got)
    ]
    unmutated = write_case(EntryCase("as shipped"), tmp_path / "base", BASE_TEXT)
    assert unchecked_code_sources(check_all(unmutated, registry)[0]) == []  # every source of it is checked


def test_problem_str_and_json_carry_the_code():
    from kb.content.check import check_json

    p = Problem("CHK007", "data/entries/x.yaml", 3, "related.0", "no entry with id 'y'")
    assert str(p) == "data/entries/x.yaml:3: CHK007 related.0: no entry with id 'y'"
    assert str(Problem("CHK001", "x.yaml", None, "", "file is empty")) == "x.yaml: CHK001 file is empty"
    assert json.loads(check_json([p], [])) == {
        "problems": [
            {
                "code": "CHK007",
                "file": "data/entries/x.yaml",
                "line": 3,
                "field": "related.0",
                "message": "no entry with id 'y'",
            }
        ],
        "unchecked": [],
        "touched": [],
    }


def test_every_check_code_is_documented():
    doc = (ROOT / "docs" / "entry-format.md").read_text(encoding="utf-8")
    assert doc.count(CHECKS_BEGIN) == 1 and doc.count(CHECKS_END) == 1
    table = doc.split(CHECKS_BEGIN, 1)[1].split(CHECKS_END, 1)[0].strip("\n")
    assert table == checks_markdown(), "docs/entry-format.md check table is stale: paste `python -m kb.content.check`"
    out = subprocess.run(
        [sys.executable, "-m", "kb.content.check"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == checks_markdown()


# ---------------------------------------------------------------- kb check --fix (CHK011 links)


def _unlinked_case(tmp_path):
    text = BASE_TEXT.replace(
        "4·L = 0.49 GiB. The cost moves", "4·L = 0.49 GiB. Lower stage3_max_live_parameters. The cost moves", 1
    )
    assert text != BASE_TEXT
    (tmp_path / f"{BASE_ENTRY}.yaml").write_text(text, encoding="utf-8")
    return tmp_path / f"{BASE_ENTRY}.yaml"


def test_fix_proposes_the_id_for_the_fix(tmp_path):
    _unlinked_case(tmp_path)
    res = run("check", "--entries", str(tmp_path), "--fix")
    assert res.exit_code == 1
    assert "fixes.0.params += deepspeed:zero_optimization.stage3_max_live_parameters" in res.output
    assert "named in fixes.0.text.en" in res.output
    res = run("check", "--entries", str(tmp_path), "--fix", "--json")
    (p,) = json.loads(res.output)
    assert p["add"] == {"fixes.0.params": ["deepspeed:zero_optimization.stage3_max_live_parameters"]}


def test_fix_write_inserts_into_the_params_list(tmp_path):
    path = _unlinked_case(tmp_path)
    before = path.read_text(encoding="utf-8")
    res = run("check", "--entries", str(tmp_path), "--fix", "--write")
    assert res.exit_code == 0, res.output
    after = path.read_text(encoding="utf-8")
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert added == ["      - deepspeed:zero_optimization.stage3_max_live_parameters"]  # one line, nothing else moved
    assert run("check", "--entries", str(tmp_path)).exit_code == 0


def test_fix_says_declare_external_when_the_registry_has_none(tmp_path):
    text = BASE_TEXT.replace(
        "4·L = 0.49 GiB. The cost moves", "4·L = 0.49 GiB. Set NCCL_NOT_A_VAR=1. The cost moves", 1
    )
    (tmp_path / f"{BASE_ENTRY}.yaml").write_text(text, encoding="utf-8")
    res = run("check", "--entries", str(tmp_path), "--fix")
    assert (
        res.exit_code == 1 and "external += NCCL_NOT_A_VAR" in res.output and "declare it with a source" in res.output
    )
    assert run("check", "--entries", str(tmp_path), "--write").exit_code == 2  # --write needs --fix


def test_python_inputs_are_the_readers_own_variables():
    """A bare name a python snippet only reads as a value is the reader's variable (not a name to link); a name
    it calls, defines, passes as a keyword or uses as an object is not."""
    from kb.content.check import python_inputs

    code = (
        "tok = AutoTokenizer.from_pretrained(adapter_dir)\n"
        "for batch in itertools.islice(train_loader, 20):\n"
        "    emb.data[:old_vocab] = 0\n"
        "out = model.generate(**batch, max_new_tokens=256)\n"
        "run_fn(x)\n"
    )
    got = python_inputs(code)
    assert {"adapter_dir", "train_loader", "old_vocab"} <= got
    assert not got & {"max_new_tokens", "run_fn", "model", "tok", "batch"}


def test_shell_variables_set_and_read_by_the_snippet():
    """NAME=value alone on a line and read back as $NAME is the snippet's own; an export or a NAME=1 prefix to
    a command is an environment variable for a program."""
    from kb.content.check import shell_variables

    code = "CKPT=out/checkpoint-2000\nls $CKPT\nDS_CFG=$(realpath a.json)\necho ${DS_CFG}\n"
    code += "export CUDA_HOME=/usr/local/cuda\nexport PATH=$CUDA_HOME/bin:$PATH\nNCCL_P2P_DISABLE=1 python t.py\n"
    assert shell_variables(code) == {"CKPT", "DS_CFG"}


def test_call_result_attribute_links_only_to_a_method(registry):
    """``f(x).attr``: code on a call's result, linked when the registry has a method of that name, else outside."""
    from kb.content.check import _records_for, _snippet_names

    names = {sn.name: sn for sn in _snippet_names("python", "a = f(x).pretrained_model\nb = g(y).dtype\n", ("f",), 0)}
    assert {"().pretrained_model", "().dtype"} <= set(names)
    for n in ("().pretrained_model", "().dtype"):
        recs, _ = _records_for(names[n], registry)
        assert all(r["kind"] in ("method", "function") for r in recs)


@pytest.mark.slow  # `kb check` over every shipped entry, twice (about 13 s)
def test_check_says_which_code_sources_it_could_not_check(tmp_path):
    """CHK008 checks a code source only where that exact package version is installed; the rest are listed with
    the reason (info, not problems), in the text and in --json."""
    from click.testing import CliRunner

    from cli.main import main

    out = CliRunner().invoke(main, ["check", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["problems"] == [] and data["unchecked"]
    assert all(u["reason"] and u["entry"] and u["source"] for u in data["unchecked"])
    text = CliRunner().invoke(main, ["check"])
    reasons = {u["reason"] for u in data["unchecked"]}
    assert text.exit_code == 0 and all(f"({r})" in text.output for r in reasons)
    assert text.output.rstrip().endswith("entries: ok")
